"""The source files of the plug-ins a configuration uses (:mod:`calbench.plugins`), as code
inputs of exactly the verbs that run them: :mod:`calbench._sources` reads calbench's own code
only. :func:`plugin_code_inputs` adds them to a rule's ``results/code/<verb>.sha256``
(workflow/rules/common.smk); :func:`code_digest` enters the digest under which ``calibrate
--reuse-dir`` keeps a calibrator's files, so an edited plug-in is refitted, not restored.

A plug-in's files: every ``.py`` file of its top-level package (a lone module: that file); for
calbench's own adapters the calbench modules they run.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from calbench.metrics import Metric
from calbench.plugins import (
    _PKG,
    CALIBRATOR_GROUP,
    METRIC_GROUP,
    PluginError,
    find_calibrator,
    find_metric,
)


def _source_module(obj) -> str:
    if isinstance(obj, Metric):
        core = getattr(obj.core, "__wrapped__", obj.core)
        return getattr(core, "__module__", "") or ""
    return getattr(obj, "__module__", "") or ""


def plugin_object(name: str, group: str):
    """The loaded plug-in (class or :class:`Metric`) called ``name`` in ``group``, or ``None``
    for a built-in; a name that does not load raises :class:`PluginError`."""
    obj = find_calibrator(name) if group == CALIBRATOR_GROUP else find_metric(name)
    builtin = f"{_PKG}.calibrators." if group == CALIBRATOR_GROUP else f"{_PKG}.metrics"
    return None if _source_module(obj).startswith(builtin) else obj


def _files_of(obj) -> list[str]:
    """The source files of the plug-in defining ``obj``: calbench's own modules it runs (an
    adapter) or every ``.py`` file of its top-level package (a module alone: that file)."""
    module = _source_module(obj)
    mod = sys.modules.get(module)
    if mod is None or not getattr(mod, "__file__", None):
        return []
    top = module.split(".")[0]
    if top == "calbench":
        from calbench._sources import closure, module_file  # lazy: code inputs

        return sorted({str(module_file(m)) for m, _ in closure({(module, "*")})})
    root_file = getattr(sys.modules.get(top), "__file__", None)
    if root_file and Path(root_file).name == "__init__.py":
        return sorted(str(p) for p in Path(root_file).parent.rglob("*.py"))
    return [str(Path(mod.__file__))]


def _config_metrics(config: Mapping) -> list[str]:
    out: list[str] = []
    ev, cmp = config.get("evaluation") or {}, config.get("compare") or {}
    rep, shift = config.get("report") or {}, config.get("shift") or {}
    for names in (ev.get("metrics"), ev.get("ci_metrics"), cmp.get("metrics"),
                  rep.get("table_metrics"), rep.get("losses_metrics"), shift.get("metrics"),
                  shift.get("compare_metrics")):  # fmt: skip
        out += [n for n in names or [] if isinstance(n, str) and n not in out]
    return out


def plugin_names(config: Mapping) -> tuple[list[str], list[str]]:
    """(calibrator methods, metric names) of ``config`` that are loadable plug-ins."""
    cals: list[str] = []
    for key, entry in (config.get("calibrators") or {}).items():
        method = (entry or {}).get("method", key)
        if method not in cals and _plugin_or_none(method, CALIBRATOR_GROUP) is not None:
            cals.append(method)
    metrics = [n for n in _config_metrics(config) if _plugin_or_none(n, METRIC_GROUP) is not None]
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
    cal = {(f"{_PKG}.{m}", f) for m, f in CALIBRATOR_UNITS}
    met = {(f"{_PKG}.{m}", f) for m, f in METRIC_UNITS}
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
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(Path(f).name.encode() + b"\0" + Path(f).read_bytes() + b"\0")
    return h.hexdigest()
