"""Plug-in calibrators and metrics: code from other packages (or the user's own folder) used by
name, exactly like calbench's own entries.

Two ways to name a plug-in:

* an **entry point** of an installed distribution, group ``calbench.calibrators`` (a
  :class:`calbench.calibrators.Calibrator` subclass) or ``calbench.metrics`` (a
  :class:`calbench.metrics.Metric`, e.g. made with :func:`metric`); its name is the name used in
  ``config.yaml`` and must equal the object's own ``name``;
* an explicit **reference** ``module:Class`` (a calibrator's ``method``, ``calbench
  check-calibrator``) or ``module:function`` (``calbench check-metric``) of a module in the
  **project folder**: the current working directory (the folder a ``calbench`` command runs in;
  for the workflow, Snakemake's working directory, the folder of ``config.yaml`` or
  ``--directory``), never an installed module (under ``sys.prefix`` or a ``site-packages``
  folder, a virtual environment inside the project included). The module's origin is checked
  with :func:`importlib.util.find_spec` before any of its code runs. The reference itself is
  then the name (a fitted calibrator's JSON stores it). A metric's name becomes a file name
  (``results/tables/<metric>.csv``), so a metric in a workflow config comes from an entry point.

Nothing is loaded implicitly: ``import calbench.metrics`` and ``import calbench.calibrators``
import no plug-in and read no entry point, and ``get_calibrator`` / ``load_calibrator`` look
in the registry only. The plug-ins a command or a config names are loaded explicitly, by the
verb that takes the names (``calbench.cli._args.load_named_plugins``: its ``--spec``, method,
metric lists and calibrator JSONs), by ``check-calibrator`` / ``check-metric``, and by the
workflow's config check at start-up (:mod:`calbench.config_check`): :func:`load_plugins`,
:func:`find_calibrator`, :func:`find_metric`. An installed plug-in nothing names is never
imported. Load before importing :mod:`calbench.stats` or :mod:`calbench.report`, which build
tables of the metrics' facts at import (the verbs load first). A loaded plug-in joins the one registry (``REGISTRY`` through
:func:`calbench.calibrators.register`, ``METRICS`` through :func:`register_metric`).

Refused with a one-line :class:`PluginError` naming the entry point or reference and the fix:
an import that fails, exits (``sys.exit``, an ``argparse`` error: its output is held back) or
names a module outside the project folder; a name of calbench's own (a built-in calibrator or
metric, which an entry point never replaces; a metric named like one of calbench's own output
files, :func:`reserved_metric_name`); two installed entry points of one name; a metric missing
a fact a built-in declares (``Metric.missing_facts``). ``KeyboardInterrupt`` is never caught.

:mod:`calbench.plugin_inputs` gives the workflow the source files of the plug-ins a config uses,
as code inputs of exactly the verbs that run them.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import os
import re
import site
import sys
from collections.abc import Iterable, Mapping
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

from calbench.calibrators.base import REGISTRY, Calibrator, register
from calbench.metrics import INTERVALS, METRICS, PAIRED_TESTS, Metric

#: (spelt from the package name: calbench._sources counts a string naming a calbench module as
#: that module's code)
PACKAGE = __name__.split(".")[0]
CALIBRATOR_GROUP = f"{PACKAGE}.calibrators"
METRIC_GROUP = f"{PACKAGE}.metrics"
#: entry-point names: the registry's lower-case names, dots allowed (``netcal.ts``)
NAME = re.compile(r"^[a-z0-9][a-z0-9_]*(\.[a-z0-9_]+)*$")
#: metric names become file names and table keys: slugs only
METRIC_NAME = re.compile(r"^[a-z0-9][a-z0-9_]*$")
REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

#: metric names calbench's own outputs use: ``calbench aggregate`` writes
#: ``results/tables/<metric>.*``, ``results/tables/losses_<metric>.*`` (the by-loss tables) and
#: ``results/tables/reference.csv``; the report's tables derive ``error`` and ``temperature``
#: (:data:`calbench.display.DERIVED`)
RESERVED_METRIC_NAMES = {
    "reference": "results/tables/reference.csv, the comparison with published numbers",
    "error": "'error', the derived quantity 1 - accuracy of the report's tables",
    "temperature": "'temperature', the fitted temperature of the report's tables",
}
RESERVED_METRIC_PREFIX = "losses_"

#: one-line load errors of plug-ins that failed, by (group, name); raised when the name is used
_FAILED: dict[tuple[str, str], str] = {}
#: where each loaded plug-in came from: (group, name) -> (origin text, the object)
_ORIGINS: dict[tuple[str, str], tuple[str, object]] = {}


class PluginError(ValueError):
    """A plug-in that cannot be used: the message names the entry point or reference and the fix."""


class UnknownPluginError(PluginError):
    """A name that is neither calbench's own, an installed entry point nor a reference."""


def forget_loaded() -> None:
    """Forget which plug-ins were loaded or failed (the registries keep their entries)."""
    entry_points.cache_clear()
    _FAILED.clear()
    _ORIGINS.clear()


def plugin_origin(group: str, name: str) -> str | None:
    """Where the loaded plug-in ``name`` of ``group`` came from (``None``: not loaded)."""
    found = _ORIGINS.get((group, name))
    return None if found is None else found[0]


def source_module(obj) -> str:
    """The module defining a calibrator class or a :class:`Metric`'s function."""
    if isinstance(obj, Metric):
        core = getattr(obj.core, "__wrapped__", obj.core)
        return getattr(core, "__module__", "") or ""
    return getattr(obj, "__module__", "") or ""


def _builtin_calibrator(name: str) -> bool:
    return name in REGISTRY and REGISTRY[name].__module__.startswith(f"{PACKAGE}.calibrators.")


def _builtin_metric(name: str) -> bool:
    return name in METRICS and source_module(METRICS[name]).startswith(f"{PACKAGE}.metrics")


# --- discovery ----------------------------------------------------------------------------------
@functools.cache
def entry_points(group: str) -> dict[str, tuple[str, str]]:
    """``{name: (module:attr, distribution)}`` of the installed entry points of ``group`` (read
    from the distributions' metadata; nothing is imported)."""
    out: dict[str, tuple[str, str]] = {}
    for ep in metadata.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        where = f"{dist.name} {dist.version}" if dist is not None else "an installed package"
        if ep.name in out and out[ep.name][0] != ep.value:
            _FAILED[(group, ep.name)] = (
                f"plug-in {ep.name!r}: two installed packages define entry point {ep.name!r} in "
                f"group {group} ({out[ep.name][1]}, {where}); uninstall one of them"
            )
            continue
        out[ep.name] = (ep.value, where)
    return out


def calibrator_entry_points() -> dict[str, tuple[str, str]]:
    """:func:`entry_points` of group ``calbench.calibrators`` and calbench's own adapters
    (:data:`calbench.adapters.ADAPTERS`, the same entry points as in pyproject.toml, so they are
    found before calbench is reinstalled)."""
    from calbench.adapters import ADAPTERS  # lazy: code inputs

    out = {n: (ref, "calbench[arena]") for n, ref in ADAPTERS.items()}
    for name, (ref, where) in entry_points(CALIBRATOR_GROUP).items():
        if name in ADAPTERS and ADAPTERS[name] != ref:
            _FAILED[(CALIBRATOR_GROUP, name)] = (
                f"plug-in calibrator entry point {name} = {ref} (group {CALIBRATOR_GROUP}, from "
                f"{where}) has the name of calbench's own adapter {name!r} ({ADAPTERS[name]}); "
                "rename the entry point"
            )
            continue
        out[name] = (ref, where)
    return out


def _describe(group: str, name: str, ref: str, where: str | None) -> str:
    if where is None:
        return f"reference {ref!r}"
    return f"entry point {name} = {ref} (group {group}, from {where})"


def _line(exc: BaseException | str) -> str:
    """An exception's message (or a text) on one line."""
    return " ".join(str(exc).split())


# --- where a reference's module lives -------------------------------------------------------------
def project_folder() -> Path:
    """The folder whose modules a ``module:attr`` reference may name: the working directory."""
    return Path.cwd().resolve()


def _installed_folders() -> list[Path]:
    """Folders of installed code: the interpreter's prefixes and site-packages folders."""
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, *getattr(site, "getsitepackages",
             lambda: [])(), site.getusersitepackages()]  # fmt: skip
    return [Path(p).resolve() for p in found if p]


def installed_code(path: Path) -> bool:
    """Whether ``path`` lies in installed code: a ``site-packages`` / ``dist-packages`` folder or
    the interpreter's prefixes (a virtual environment inside the project folder included)."""
    path = Path(path).resolve()
    return any(part in ("site-packages", "dist-packages") for part in path.parts) or any(
        path.is_relative_to(p) for p in _installed_folders()
    )


def _origin_problem(module: str) -> str | None:
    """Why the top-level module of ``module`` is not the project folder's own code (one line),
    or ``None``; found with :func:`importlib.util.find_spec`, which runs none of its code."""
    top = module.split(".")[0]
    project = project_folder()
    try:
        spec = find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return (
            f"no module {top!r} in the project folder {project}; run from the folder holding "
            "it, or install the plug-in as a package with an entry point (docs/plugins.md)"
        )
    if spec.origin not in (None, "namespace") and spec.has_location:
        places = [Path(spec.origin).resolve()]
    else:
        places = [Path(p).resolve() for p in spec.submodule_search_locations or []]
        if not places:  # built into the interpreter (sys, builtins)
            return (
                f"module {top!r} is built into Python, not in the project folder {project}; "
                "name a module of the project folder or an installed entry point (docs/plugins.md)"
            )
    for place in places:
        if not place.is_relative_to(project):
            return (
                f"module {top!r} ({place}) is not in the project folder {project}; a config or "
                "command names only modules of the project folder (the folder calbench runs in) "
                "or installed entry points (docs/plugins.md)"
            )
        if installed_code(place):
            return (
                f"module {top!r} is installed code ({place}), not the project folder's; a config "
                "or command names only modules of the project folder or installed entry points "
                "(docs/plugins.md)"
            )
    return None


@contextlib.contextmanager
def _project_first():
    """The project folder first on ``sys.path`` (user code before installed code)."""
    cwd = os.getcwd()
    sys.path.insert(0, cwd)
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.path.remove(cwd)


def _import_module(module: str, what: str):
    """``importlib.import_module(module)``; an exception, ``sys.exit`` or an ``argparse`` error
    during the import is a one-line :class:`PluginError` naming ``what`` (the output of an import
    that exits is held back, the output of one that succeeds is passed on);
    ``KeyboardInterrupt`` propagates."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            mod = importlib.import_module(module)
    except SystemExit as exc:
        said = _line(err.getvalue() or out.getvalue())
        began = f"; its output began {said[:60]!r}" if said else ""
        raise PluginError(
            f"{what}: importing {module!r} called sys.exit({exc.code!r}){began}; a plug-in "
            "module must not exit or parse arguments when imported (move that code under "
            "`if __name__ == '__main__':`)"
        ) from None
    except ImportError as exc:
        raise PluginError(
            f"{what}: cannot import {module!r} ({type(exc).__name__}: {_line(exc)}); install the "
            "package that provides it (pip install -e <folder>) or run from the folder holding "
            "the module"
        ) from None
    except Exception as exc:  # the plug-in's own import failed: name it, one line
        raise PluginError(
            f"{what}: importing {module!r} failed ({type(exc).__name__}: {_line(exc)}); fix the "
            "plug-in"
        ) from None
    sys.stdout.write(out.getvalue())
    sys.stderr.write(err.getvalue())
    return mod


def _import(ref: str, what: str, *, reference: bool):
    """The object ``module:attr`` names. A ``reference`` (from a config or a command) must name
    a module of the project folder, checked before it is imported; an entry point's module is
    the installed distribution's declaration."""
    if not REFERENCE.match(ref):
        raise PluginError(f"{what}: {ref!r} is not a module:attribute reference")
    module, attr = ref.split(":", 1)
    with _project_first() if reference else contextlib.nullcontext():
        if reference and (why := _origin_problem(module)):
            raise PluginError(f"{what}: {why}")
        obj = _import_module(module, what)
    try:
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise PluginError(
            f"{what}: module {module!r} has no attribute {attr!r}; fix the reference"
        ) from None
    return obj


def _missing_requirements(obj) -> list[str]:
    """Modules a plug-in declares in ``requires`` that are not installed."""
    return [m for m in getattr(obj, "requires", ()) if find_spec(m) is None]


def _load_once(group: str, what: str, name, find):
    """``find(name, key)``'s plug-in of ``group``, loaded once: a loaded one is returned as it
    is, a failed one raises its first error again (an unknown name is not remembered)."""
    if not isinstance(name, str):
        raise PluginError(f"a {what} name must be a string, got {name!r:.40}")
    key = (group, name)
    if key in _ORIGINS:
        return _ORIGINS[key][1]
    if key in _FAILED:
        raise PluginError(_FAILED[key])
    try:
        return find(name, key)
    except UnknownPluginError:
        raise
    except PluginError as exc:
        _FAILED[key] = str(exc)
        raise


# --- calibrators ----------------------------------------------------------------------------------
def find_calibrator(name: str):
    """Load (once) and return the calibrator class ``name``: a built-in, an entry point of group
    ``calbench.calibrators`` or a ``module:Class`` reference of the project folder; one-line
    :class:`PluginError` otherwise (:class:`UnknownPluginError` for a name that is none of
    these). A built-in whose name an installed entry point also uses is refused, naming it."""
    return _load_once(CALIBRATOR_GROUP, "calibrator", name, _find_calibrator)


def _find_calibrator(name: str, key: tuple[str, str]):
    if ":" in name:
        ref, where = name, None
    else:
        found = calibrator_entry_points().get(name)
        if key in _FAILED:
            raise PluginError(_FAILED[key])
        if _builtin_calibrator(name):
            if found is not None:
                raise PluginError(
                    f"plug-in calibrator {_describe(CALIBRATOR_GROUP, name, *found)} has the name "
                    f"of calbench's own calibrator {name!r}, which a plug-in never replaces; "
                    "rename the entry point"
                )
            return REGISTRY[name]
        if found is None:
            if name in REGISTRY:  # registered by hand (calbench.calibrators.register)
                return REGISTRY[name]
            raise UnknownPluginError(
                f"unknown calibrator {name!r}; choose one of {known_calibrators()}, or install a "
                f"package with an entry point {name} in group {CALIBRATOR_GROUP}, or give a "
                "module:Class reference of the project folder (docs/plugins.md)"
            )
        ref, where = found
    what = f"plug-in calibrator {_describe(CALIBRATOR_GROUP, name, ref, where)}"
    cls = _calibrator_class(name, ref, what, reference=where is None)
    _ORIGINS[key] = (what, cls)
    return cls


def _calibrator_class(name: str, ref: str, what: str, *, reference: bool):
    obj = _import(ref, what, reference=reference)
    if not (isinstance(obj, type) and issubclass(obj, Calibrator)):
        raise PluginError(
            f"{what}: {ref} is {type(obj).__name__} {obj!r:.40}, not a subclass of "
            "calbench.calibrators.Calibrator; point the entry point at the class"
        )
    missing = _missing_requirements(obj)
    if missing:
        raise PluginError(
            f"{what}: needs {', '.join(missing)}, which is not installed; "
            f"pip install {obj.__dict__.get('install', ' '.join(missing))}"
        )
    if ":" in name:  # a reference: registered under the reference, which its JSON then stores
        if getattr(obj, "name", "") == name:
            cls = obj
        else:
            cls = type(obj.__name__, (obj,), {"name": name, "__module__": obj.__module__})
    else:
        if obj.name != name:
            raise PluginError(
                f"{what}: the class's name is {obj.name!r}, not {name!r}; make the entry point's "
                "name and the class attribute `name` equal"
            )
        cls = obj
    if not NAME.match(name) and ":" not in name:
        raise PluginError(
            f"{what}: the name must match {NAME.pattern} (lower case, digits, _ and .)"
        )
    try:
        register(cls)
    except TypeError as exc:
        raise PluginError(f"{what}: {exc}; rename the plug-in") from None
    return cls


def known_calibrators() -> list[str]:
    """Built-in and plug-in calibrator names (installed entry points, loaded or not)."""
    return sorted(set(REGISTRY) | set(calibrator_entry_points()))


def calibrator_problem(name: str) -> str | None:
    """Why ``name`` cannot be used as a calibrator method (one line), or ``None``."""
    try:
        find_calibrator(name)
    except PluginError as exc:
        return str(exc)
    return None


# --- metrics ----------------------------------------------------------------------------------------
def metric(
    *,
    name: str,
    display: str,
    scale: float,
    decimals: int,
    higher_is_better: bool,
    interval: str | None,
    paired_test: str,
    reference: str,
    verdicts: bool,
    no_interval_reason: str = "",
):
    """Decorator: the function ``f(probs, labels) -> float`` as a :class:`Metric` carrying every
    fact a built-in metric declares (all keywords required; ``interval=None`` needs
    ``no_interval_reason``). ``probs`` arrive validated as float64 ``(N, K)``, ``labels`` int64.

    ``interval``: one of :data:`calbench.metrics.INTERVALS` or ``None``; ``paired_test``: one of
    :data:`calbench.metrics.PAIRED_TESTS`; ``scale``: 1.0 or 100.0 (percent in tables);
    ``verdicts``: whether tests, ranks and findings may be drawn from it (``True`` only for an
    estimator whose bias does not depend on the predictions' sharpness, compared by a test of
    equal population value: never with ``paired_test="sign_flip"``)."""

    def wrap(fn):
        def core(p, y, dtype=None):  # read-only inputs, a finite float out
            from calbench.isolation import metric_value  # lazy: pulls numpy

            return metric_value(name, fn, p, y)

        core.__wrapped__ = fn
        return Metric(
            name, core, display=display, scale=scale, decimals=decimals,
            higher_is_better=higher_is_better, interval=interval,
            no_interval_reason=no_interval_reason, paired_test=paired_test, reference=reference,
            verdicts=verdicts,
        )  # fmt: skip

    return wrap


def reserved_metric_name(name: str) -> str | None:
    """The output of calbench's own that a metric called ``name`` would collide with (its
    files or a derived quantity of the report's tables), or ``None``."""
    if name in RESERVED_METRIC_NAMES:
        return RESERVED_METRIC_NAMES[name]
    if name.startswith(RESERVED_METRIC_PREFIX):
        base = name[len(RESERVED_METRIC_PREFIX) :]
        return f"results/tables/{name}.*, the by-loss table of metric {base!r}"
    return None


def register_metric(m: Metric, origin: str = "plug-in metric") -> Metric:
    """Add ``m`` to :data:`calbench.metrics.METRICS` after checking it declares every fact and
    takes no name of calbench's own; one-line :class:`PluginError` otherwise."""
    if not isinstance(m, Metric):
        raise PluginError(
            f"{origin}: is {type(m).__name__}, not a calbench.metrics.Metric; decorate the "
            "function with calbench.plugins.metric(name=..., display=..., ...)"
        )
    if not isinstance(m.name, str) or not METRIC_NAME.match(m.name):
        raise PluginError(
            f"{origin}: name {m.name!r} must match {METRIC_NAME.pattern} (it names files)"
        )
    if clash := reserved_metric_name(m.name):
        raise PluginError(
            f"{origin}: metric name {m.name!r} collides with calbench's own output {clash}; "
            "rename the plug-in"
        )
    problems = m.fact_problems()
    missing = [fact for fact, why in problems.items() if not why]
    if missing:
        raise PluginError(
            f"{origin}: metric {m.name!r} does not declare {', '.join(missing)}; declare every fact "
            f"(interval in {list(INTERVALS)} or None with no_interval_reason, paired_test in "
            f"{list(PAIRED_TESTS)}, scale 1.0 or 100.0, a reference with its year)"
        )
    if problems:
        raise PluginError(f"{origin}: metric {m.name!r} " + "; and ".join(problems.values()))
    if m.paired_test in ("mcnemar_exact", "paired_t", "wilcoxon") and not (m.is_mean and m.stats):
        raise PluginError(
            f"{origin}: paired_test {m.paired_test!r} of metric {m.name!r} compares per-sample "
            "values, which a plain function does not give; declare paired_test='sign_flip'"
        )
    if m.name in METRICS and METRICS[m.name] is not m:
        raise PluginError(f"{origin}: metric name {m.name!r} is taken; rename the plug-in")
    METRICS[m.name] = m
    return m


def _load_metric(name: str, ref: str, where: str | None) -> Metric:
    what = f"plug-in metric {_describe(METRIC_GROUP, name, ref, where)}"
    if where is not None and (clash := reserved_metric_name(name)):  # before importing it
        raise PluginError(
            f"{what}: metric name {name!r} collides with calbench's own output {clash}; rename "
            "the entry point"
        )
    obj = _import(ref, what, reference=where is None)
    if isinstance(obj, Metric) and where is not None and obj.name != name:
        raise PluginError(
            f"{what}: the metric's name is {obj.name!r}, not {name!r}; make them equal"
        )
    m = register_metric(obj, what)
    _ORIGINS[(METRIC_GROUP, name)] = (what, m)
    return m


def find_metric(name: str) -> Metric:
    """Load (once) and return the metric ``name``: a built-in, an entry point of group
    ``calbench.metrics`` or a ``module:function`` reference of the project folder; one-line
    :class:`PluginError` otherwise (:class:`UnknownPluginError` for a name that is none of
    these). A built-in whose name an installed entry point also uses is refused, naming it."""
    return _load_once(METRIC_GROUP, "metric", name, _find_metric)


def _find_metric(name: str, key: tuple[str, str]) -> Metric:
    if ":" in name:
        return _load_metric(name, name, None)
    found = entry_points(METRIC_GROUP).get(name)
    if key in _FAILED:
        raise PluginError(_FAILED[key])
    if _builtin_metric(name):
        if found is not None:
            raise PluginError(
                f"plug-in metric {_describe(METRIC_GROUP, name, *found)} has the name of "
                f"calbench's own metric {name!r}, which a plug-in never replaces; rename the "
                "entry point"
            )
        return METRICS[name]
    if found is None:
        if name in METRICS:  # registered by hand (register_metric)
            return METRICS[name]
        raise UnknownPluginError(
            f"unknown metric {name!r}; choose one of {sorted(METRICS)}, or install a package with "
            f"an entry point {name} in group {METRIC_GROUP} (docs/plugins.md)"
        )
    return _load_metric(name, *found)


def metric_problem(name: str) -> str | None:
    """Why ``name`` is not a usable metric (one line), or ``None``."""
    try:
        find_metric(name)
    except PluginError as exc:
        return str(exc)
    return None


# --- what a config or command names -------------------------------------------------------------
#: the keys of a config (or a config slice: a step's spec) whose values are lists of metric names,
#: at the top level and in these sections
METRIC_LIST_KEYS = ("metrics", "ci_metrics", "compare_metrics", "table_metrics", "losses_metrics")
METRIC_SECTIONS = ("evaluation", "compare", "report", "shift")


def named_in(config: Mapping) -> tuple[list[str], list[str]]:
    """(calibrator methods, metric names) a workflow config or a step's spec names, in order,
    each once: ``calibrators.<key>.method`` (default the key), and the metric lists of
    :data:`METRIC_LIST_KEYS` at the top level and in :data:`METRIC_SECTIONS` (with
    ``report.guo_kull.metric_map``'s values)."""
    cals: list[str] = []
    for key, entry in (config.get("calibrators") or {}).items():
        method = entry.get("method", key) if isinstance(entry, Mapping) else key
        if isinstance(method, str) and method not in cals:
            cals.append(method)
    places = [config] + [config.get(s) for s in METRIC_SECTIONS]
    report = config.get("report")
    if isinstance(report, Mapping) and isinstance(report.get("guo_kull"), Mapping):
        places.append(report["guo_kull"])
    names: list = []
    for place in places:
        if not isinstance(place, Mapping):
            continue
        for k in METRIC_LIST_KEYS:
            if isinstance(place.get(k), list):
                names += place[k]
        if isinstance(place.get("metric_map"), Mapping):
            names += list(place["metric_map"].values())
    metrics: list[str] = []
    for n in names:
        if isinstance(n, str) and n not in metrics:
            metrics.append(n)
    return cals, metrics


def load_plugins(calibrators: Iterable[str] = (), metrics: Iterable[str] = ()) -> None:
    """Load the plug-ins among ``calibrators`` (methods) and ``metrics`` (names) explicitly:
    entry points and ``module:attr`` references; built-ins are checked against a shadowing entry
    point. A name that is none of these is left to the caller's own check (a verb's "unknown
    metric" error); a plug-in that does not load raises its one-line :class:`PluginError`."""
    for names, find in ((calibrators, find_calibrator), (metrics, find_metric)):
        for name in names:
            if not isinstance(name, str) or (":" in name and not REFERENCE.match(name)):
                continue  # not a name (a file path, a number): the verb says what is wrong
            try:
                find(name)
            except UnknownPluginError:
                continue
