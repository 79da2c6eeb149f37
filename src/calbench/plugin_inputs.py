"""The source files of the plug-ins a configuration uses (:mod:`calbench.plugins`), as code
inputs of exactly the verbs that run them: :mod:`calbench._sources` reads calbench's own code
only. :func:`plugin_code_inputs` adds them to a rule's ``results/code/<verb>.sha256``
(workflow/rules/common.smk); :func:`code_digest` enters the digest under which ``calibrate
--reuse-dir`` keeps a calibrator's files, so an edited plug-in is refitted, not restored.

A plug-in's files (:func:`plugin_files`): the module defining it; every ``.py`` file of its
top-level package when that is a regular package (with ``__init__.py``); and, transitively,
every module of the user's folder it imports (at the top or inside a function, absolute or
relative, read with :mod:`ast`): the folder holding its top-level module or package, unless
that is installed code (a ``site-packages`` folder, ``sys.prefix``), whose other packages are
not the plug-in's. So a plug-in laid out as docs/plugins.md shows (a folder without
``__init__.py``) brings the helper modules it imports. For calbench's own adapters: the
calbench modules they run.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from calbench.io import hasher
from calbench.plugins import (
    CALIBRATOR_GROUP,
    METRIC_GROUP,
    PACKAGE,
    PluginError,
    find_calibrator,
    find_metric,
    installed_code,
    named_in,
    source_module,
)


def plugin_object(name: str, group: str):
    """The loaded plug-in (class or :class:`Metric`) called ``name`` in ``group``, or ``None``
    for a built-in; a name that does not load raises :class:`PluginError`."""
    obj = find_calibrator(name) if group == CALIBRATOR_GROUP else find_metric(name)
    builtin = f"{PACKAGE}.calibrators." if group == CALIBRATOR_GROUP else f"{PACKAGE}.metrics"
    return None if source_module(obj).startswith(builtin) else obj


def _module_path(root: Path, name: str) -> Path | None:
    """The file of module ``name`` (dotted) under ``root``, or ``None``."""
    base = root.joinpath(*name.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _imported_names(path: Path, module: str) -> set[str]:
    """Absolute names of the modules ``path`` (module ``module``) may import: every ``import``
    and ``from ... import`` anywhere in it, relative ones resolved, ``from a import b`` as both
    ``a`` and ``a.b``."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                keep = len(parts) - (node.level - 1)
                if keep < 0 or (keep == 0 and not node.module):
                    continue
                base = ".".join([*parts[:keep], *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            if base:
                out.add(base)
                out |= {f"{base}.{a.name}" for a in node.names if a.name != "*"}
    return out


def _user_folder_files(module: str, path: Path) -> set[Path]:
    """``path`` (module ``module``) and every module of its folder it imports, transitively;
    the folder is the one holding the top-level module, unless that is installed code."""
    depth = module.count(".") + (1 if path.name == "__init__.py" else 0)
    root = path.resolve().parents[depth]
    if installed_code(root):
        return {path}
    seen: dict[str, Path] = {module: path}
    todo = [module]
    while todo:
        name = todo.pop()
        for imported in sorted(_imported_names(seen[name], name)):
            if imported in seen:
                continue
            found = _module_path(root, imported)
            if found is not None:
                seen[imported] = found
                todo.append(imported)
    return set(seen.values())


def _files_of(obj) -> list[str]:
    """The source files of the plug-in defining ``obj`` (module docstring)."""
    module = source_module(obj)
    mod = sys.modules.get(module)
    if mod is None or not getattr(mod, "__file__", None):
        return []
    top = module.split(".")[0]
    if top == PACKAGE:
        from calbench._sources import closure, module_file  # lazy: code inputs

        return sorted({str(module_file(m)) for m, _ in closure({(module, "*")})})
    files = _user_folder_files(module, Path(mod.__file__))
    root_file = getattr(sys.modules.get(top), "__file__", None)
    if root_file and Path(root_file).name == "__init__.py":
        files |= set(Path(root_file).parent.rglob("*.py"))
    return sorted({str(p) for p in files})


def plugin_names(config: Mapping) -> tuple[list[str], list[str]]:
    """(calibrator methods, metric names) of ``config`` that are loadable plug-ins."""
    methods, names = named_in(config)
    cals = [m for m in methods if _plugin_or_none(m, CALIBRATOR_GROUP) is not None]
    metrics = [n for n in names if _plugin_or_none(n, METRIC_GROUP) is not None]
    return cals, metrics


def _plugin_or_none(name: str, group: str):
    try:
        return plugin_object(name, group)
    except PluginError:
        return None


def plugin_files(names: Iterable[str], group: str) -> list[str]:
    """Sorted source files of the plug-ins ``names`` of ``group`` (built-ins: none)."""
    files: set[str] = set()
    for name in names:
        obj = _plugin_or_none(name, group)
        if obj is not None:
            files |= set(_files_of(obj))
    return sorted(files)


#: the calbench units (module below the package, function; "" = import-time code) through which
#: a verb runs a calibrator or looks a metric's facts up. Written without the package prefix:
#: calbench._sources counts a string naming a calbench module as that whole module's code.
CALIBRATOR_UNITS = frozenset(
    {("calibrators.base", "get_calibrator"), ("calibrators.base", "load_calibrator")}
)
METRIC_UNITS = frozenset({("stats", ""), ("display", "")})


@functools.cache
def _verb_runs(verb: str) -> tuple[bool, bool]:
    from calbench._sources import verb_units  # lazy: code inputs

    units = verb_units(verb)
    cal = {(f"{PACKAGE}.{m}", f) for m, f in CALIBRATOR_UNITS}
    met = {(f"{PACKAGE}.{m}", f) for m, f in METRIC_UNITS}
    return bool(units & cal), bool(units & met)


def plugin_code_inputs(config: Mapping, verb: str) -> list[str]:
    """Source files of the plug-ins ``config`` uses that ``calbench <verb>`` runs: plug-in
    calibrators for the verbs that fit or load calibrators, plug-in metrics for the verbs that
    compute or tabulate metrics. Empty (and free) for a config without plug-ins."""
    cals, metrics = plugin_names(config)
    if not cals and not metrics:
        return []
    runs_cal, runs_metric = _verb_runs(verb)
    files = plugin_files(cals, CALIBRATOR_GROUP) if runs_cal else []
    files += plugin_files(metrics, METRIC_GROUP) if runs_metric else []
    return sorted(set(files))


def code_digest(calibrators: Iterable[str] = (), metrics: Iterable[str] = ()) -> str:
    """SHA-256 over the source files of the plug-ins among the calibrator methods and metric
    names given; ``""`` when none is a plug-in (built-ins are covered by calbench's own digest)."""
    files = set(plugin_files(calibrators, CALIBRATOR_GROUP)) | set(
        plugin_files(metrics, METRIC_GROUP)
    )
    if not files:
        return ""
    h = hasher()
    for f in sorted(files):
        h.update(Path(f).name.encode() + b"\0" + Path(f).read_bytes() + b"\0")
    return h.hexdigest()
