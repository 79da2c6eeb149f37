"""Plug-in calibrators and metrics: code from other packages (or the user's own folder) used by
name, exactly like calbench's own entries.

Two ways to name a plug-in:

* an **entry point** of an installed distribution, group ``calbench.calibrators`` (a
  :class:`calbench.calibrators.Calibrator` subclass) or ``calbench.metrics`` (a
  :class:`calbench.metrics.Metric`, e.g. made with :func:`metric`); its name is the name used in
  ``config.yaml`` and must equal the object's own ``name``;
* an explicit **reference** ``module:Class`` (a calibrator's ``method``, ``calbench
  check-calibrator``) or ``module:function`` (``calbench check-metric``), importable from the
  current folder; the reference itself is then the name (a fitted calibrator's JSON stores it).
  A metric's name becomes a file name (``results/tables/<metric>.csv``), so a metric in a
  workflow config comes from an entry point.

Calibrators are found when a lookup misses (:func:`find_calibrator`, called by
``get_calibrator`` / ``load_calibrator``); metrics are loaded when :mod:`calbench.metrics` is
imported (:func:`load_metric_plugins`), because the report's tables read every metric's facts
at import. Both are registered in the one registry (``REGISTRY`` through
:func:`calbench.calibrators.register`, ``METRICS`` through :func:`register_metric`). A plug-in
metric declares every fact a built-in one does (``Metric.missing_facts``); a missing fact is an
error, never a default. A broken plug-in never breaks ``import calbench``: its one-line error,
naming the entry point and the fix, is raised when its name is used.

:mod:`calbench.plugin_inputs` gives the workflow the source files of the plug-ins a config uses,
as code inputs of exactly the verbs that run them.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys
from importlib import metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from calbench.metrics import Metric


#: (spelt from the package name: calbench._sources counts a string naming a calbench module as
#: that module's code)
_PKG = __name__.split(".")[0]
CALIBRATOR_GROUP = f"{_PKG}.calibrators"
METRIC_GROUP = f"{_PKG}.metrics"
#: entry-point names: the registry's lower-case names, dots allowed (``netcal.ts``)
NAME = re.compile(r"^[a-z0-9][a-z0-9_]*(\.[a-z0-9_]+)*$")
#: metric names become file names and table keys: slugs only
METRIC_NAME = re.compile(r"^[a-z0-9][a-z0-9_]*$")
REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

#: one-line load errors of plug-ins that failed, by (group, name); raised when the name is used
_FAILED: dict[tuple[str, str], str] = {}
#: where each loaded plug-in came from: (group, name) -> (origin text, the object)
_ORIGINS: dict[tuple[str, str], tuple[str, object]] = {}


class PluginError(ValueError):
    """A plug-in that cannot be used: the message names the entry point or reference and the fix."""


# --- discovery ----------------------------------------------------------------------------------
@functools.cache
def entry_points(group: str) -> dict[str, tuple[str, str]]:
    """``{name: (module:attr, distribution)}`` of the installed entry points of ``group``."""
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

    return {
        **{n: (ref, "calbench[arena]") for n, ref in ADAPTERS.items()},
        **entry_points(CALIBRATOR_GROUP),
    }


def _describe(group: str, name: str, ref: str, where: str) -> str:
    if name == ref:
        return f"reference {ref!r}"
    return f"entry point {name} = {ref} (group {group}, from {where})"


def _line(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(exc).split())


def _import(ref: str, what: str):
    """The object ``module:attr`` names; the current folder is searched first (user code)."""
    if not REFERENCE.match(ref):
        raise PluginError(f"{what}: {ref!r} is not a module:attribute reference")
    module, attr = ref.split(":", 1)
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except ImportError as exc:
        raise PluginError(
            f"{what}: cannot import {module!r} ({type(exc).__name__}: {_line(exc)}); install the package "
            "that provides it (pip install -e <folder>) or run from the folder holding the module"
        ) from None
    except AttributeError:
        raise PluginError(
            f"{what}: module {module!r} has no attribute {attr!r}; fix the reference"
        ) from None
    except Exception as exc:  # the plug-in's own import failed: name it, one line
        raise PluginError(
            f"{what}: importing {module!r} failed ({type(exc).__name__}: {_line(exc)}); fix the plug-in"
        ) from None
    finally:
        if added:
            sys.path.remove(cwd)
    return obj


def _missing_requirements(obj) -> list[str]:
    """Modules a plug-in declares in ``requires`` that are not installed."""
    from importlib.util import find_spec

    return [m for m in getattr(obj, "requires", ()) if find_spec(m) is None]


# --- calibrators ----------------------------------------------------------------------------------
def find_calibrator(name: str):
    """The calibrator class registered (or registrable) as ``name``: a built-in, an entry point
    of group ``calbench.calibrators`` or a ``module:Class`` reference; one-line
    :class:`PluginError` otherwise."""
    from calbench.calibrators.base import REGISTRY  # lazy: code inputs

    if not isinstance(name, str):
        raise PluginError(f"a calibrator name must be a string, got {name!r:.40}")
    if name in REGISTRY:
        return REGISTRY[name]
    key = (CALIBRATOR_GROUP, name)
    if key in _FAILED:
        raise PluginError(_FAILED[key])
    if ":" in name:
        ref, where = name, "the current folder"
    else:
        found = calibrator_entry_points().get(name)
        if key in _FAILED:
            raise PluginError(_FAILED[key])
        if found is None:
            raise PluginError(
                f"unknown calibrator {name!r}; choose one of {known_calibrators()}, or install a "
                f"package with an entry point {name} in group {CALIBRATOR_GROUP}, or give a "
                "module:Class reference (docs/plugins.md)"
            )
        ref, where = found
    what = f"plug-in calibrator {_describe(CALIBRATOR_GROUP, name, ref, where)}"
    try:
        cls = _calibrator_class(name, ref, what)
    except PluginError as exc:
        _FAILED[key] = str(exc)
        raise
    _ORIGINS[key] = (what, cls)
    return cls


def _calibrator_class(name: str, ref: str, what: str):
    from calbench.calibrators.base import Calibrator, register  # lazy: code inputs

    obj = _import(ref, what)
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
    from calbench.calibrators.base import REGISTRY  # lazy: code inputs

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
    from calbench.metrics import Metric  # lazy: import cycle

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


def register_metric(m: Metric, origin: str = "plug-in metric") -> Metric:
    """Add ``m`` to :data:`calbench.metrics.METRICS` after checking it declares every fact;
    one-line :class:`PluginError` naming the missing facts otherwise."""
    from calbench.metrics import INTERVALS, METRICS, PAIRED_TESTS, Metric  # lazy: import cycle

    if not isinstance(m, Metric):
        raise PluginError(
            f"{origin}: is {type(m).__name__}, not a calbench.metrics.Metric; decorate the "
            "function with calbench.plugins.metric(name=..., display=..., ...)"
        )
    if not isinstance(m.name, str) or not METRIC_NAME.match(m.name):
        raise PluginError(
            f"{origin}: name {m.name!r} must match {METRIC_NAME.pattern} (it names files)"
        )
    missing = m.missing_facts()
    if missing:
        raise PluginError(
            f"{origin}: metric {m.name!r} does not declare {', '.join(missing)}; declare every fact "
            f"(interval in {list(INTERVALS)} or None with no_interval_reason, paired_test in "
            f"{list(PAIRED_TESTS)}, scale 1.0 or 100.0, a reference with its year)"
        )
    if m.paired_test in ("mcnemar_exact", "paired_t", "wilcoxon") and not (m.is_mean and m.stats):
        raise PluginError(
            f"{origin}: paired_test {m.paired_test!r} of metric {m.name!r} compares per-sample "
            "values, which a plain function does not give; declare paired_test='sign_flip'"
        )
    if m.name in METRICS and METRICS[m.name] is not m:
        raise PluginError(f"{origin}: metric name {m.name!r} is taken; rename the plug-in")
    METRICS[m.name] = m
    return m


def load_metric_plugins() -> None:
    """Register every metric of the installed entry points of group ``calbench.metrics``; a
    broken one is remembered (:func:`metric_problem`), never raised here. Called when
    :mod:`calbench.metrics` is imported; again it does nothing."""
    for name, (ref, where) in entry_points(METRIC_GROUP).items():
        key = (METRIC_GROUP, name)
        if key in _FAILED or key in _ORIGINS:
            continue
        try:
            _load_metric(name, ref, where)
        except PluginError as exc:
            _FAILED[key] = str(exc)


def _load_metric(name: str, ref: str, where: str) -> Metric:
    from calbench.metrics import Metric  # lazy: import cycle

    what = f"plug-in metric {_describe(METRIC_GROUP, name, ref, where)}"
    obj = _import(ref, what)
    if isinstance(obj, Metric) and obj.name != name and name != ref:
        raise PluginError(
            f"{what}: the metric's name is {obj.name!r}, not {name!r}; make them equal"
        )
    m = register_metric(obj, what)
    _ORIGINS[(METRIC_GROUP, name)] = (what, m)
    return m


def find_metric(name: str) -> Metric:
    """The metric registered as ``name`` (a built-in, an entry point) or named by a
    ``module:function`` reference; one-line :class:`PluginError` otherwise."""
    from calbench.metrics import METRICS  # lazy: import cycle

    if name in METRICS:
        return METRICS[name]
    key = (METRIC_GROUP, name)
    if key in _FAILED:
        raise PluginError(_FAILED[key])
    if isinstance(name, str) and ":" in name:
        try:
            obj = _import(name, f"plug-in metric reference {name!r}")
            return register_metric(obj, f"plug-in metric reference {name!r}")
        except PluginError as exc:
            _FAILED[key] = str(exc)
            raise
    raise PluginError(
        f"unknown metric {name!r}; choose one of {sorted(METRICS)}, or install a package with an "
        f"entry point {name} in group {METRIC_GROUP} (docs/plugins.md)"
    )


def metric_problem(name: str) -> str | None:
    """Why ``name`` is not a usable metric (one line), or ``None``."""
    try:
        find_metric(name)
    except PluginError as exc:
        return str(exc)
    return None
