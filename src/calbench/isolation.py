"""Plug-in code isolated from the data and from each other: the one place where calibrators are
fitted and applied, and plug-in metrics called, on behalf of a job that runs several of them.

A calibrator or metric from another package (a plug-in, :mod:`calbench.plugins`) may be careless:
it may scale its logits in place, write into the probabilities it scores, or return one output
buffer it overwrites on the next call. Every calibrator and metric of a job gets the same arrays,
so without isolation one careless plug-in changes every later result. Here:

* a calibrator's ``fit`` and ``predict_proba`` get their own copies of the logits and labels
  (:func:`fit`, :func:`predict`): a copy of a validation half costs a memcpy, far less than any
  fit, and unlike a read-only view it also protects the data from torch code, which writes
  through a tensor sharing a read-only array's memory without an error;
* a calibrator's output is checked once (:func:`checked_probabilities`): a NumPy float array of
  shape ``(N, K)``, finite, rows summing to 1 (the tolerance the metrics accept), sharing no
  memory with its input or an earlier output (a reused buffer), then made read-only, so no metric
  or later step can change it;
* a plug-in metric gets read-only views of its probabilities and labels and must return a finite
  float (:func:`metric_value`; the wrapper of :func:`calbench.plugins.metric` calls it), so a
  write into its input is an error naming it, never a silent change of the next metric's input;
* an exception other than ``ValueError`` raised inside a plug-in's code becomes a one-line
  ``ValueError`` naming what raised it (the original chained as its cause), so the CLI prints one
  line; calbench's own calibrators' other exceptions propagate unchanged (a bug in calbench is a
  traceback, as before).
"""

from __future__ import annotations

import numbers

import numpy as np

from calbench._checks import check_probs


def is_plugin(obj) -> bool:
    """Whether ``obj`` (a calibrator, its class, or a function) comes from outside calbench."""
    module = getattr(obj, "__module__", None) or type(obj).__module__ or ""
    return module.split(".")[0] != __name__.split(".")[0]


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def read_only(x):
    """A read-only view of NumPy array ``x`` (``x`` itself stays writeable); other objects as
    they are."""
    if isinstance(x, np.ndarray):
        x = x.view()
        x.flags.writeable = False
    return x


def freeze(*arrays: np.ndarray) -> None:
    """Make the arrays a job owns read-only, so that no code of the job can write into them."""
    for a in arrays:
        if isinstance(a, np.ndarray):
            a.flags.writeable = False


def _copy(x):
    return np.array(x, copy=True) if isinstance(x, np.ndarray) else x


#: NumPy's messages for a write into a read-only array
_READ_ONLY = ("assignment destination is read-only", "output array is read-only")


def _wrote_read_only(exc: BaseException) -> bool:
    return isinstance(exc, ValueError) and any(m in str(exc) for m in _READ_ONLY)


def run_plugin(what: str, fn, *args, plugin: bool = True, **kwargs):
    """``fn(*args, **kwargs)``; for plug-in code (``plugin``) an exception other than a
    ``ValueError`` becomes a one-line ``ValueError`` ``"<what> raised <type>: <message>"`` (the
    original is its ``__cause__``), and a write into a read-only array one naming it."""
    try:
        return fn(*args, **kwargs)
    except ValueError as exc:
        if _wrote_read_only(exc):
            raise ValueError(
                f"{what} wrote into a read-only array ({_line(exc)}): it changes its input or "
                "an earlier output in place; compute on a copy (np.array(x))"
            ) from exc
        if plugin and "\n" in str(exc):
            raise ValueError(_line(exc)) from exc
        raise
    except Exception as exc:
        if not plugin:
            raise
        raise ValueError(f"{what} raised {type(exc).__name__}: {_line(exc)}") from exc


def _named(exc: ValueError, name: str | None) -> ValueError:
    """``exc`` with ``calibrator <name>:`` in front unless it names a calibrator already."""
    if name is None or str(exc).startswith("calibrator "):
        return exc
    out = ValueError(f"calibrator {name!r}: {exc}")
    out.__cause__ = exc.__cause__
    return out


def fit(cal, logits, labels, *, name: str | None = None, **kwargs):
    """``cal.fit`` on copies of ``logits`` and ``labels``: whatever it does to them in place,
    the caller's arrays stay as they are. Returns ``cal``. An error names calibrator ``name``
    when given."""
    try:
        run_plugin("fit", cal.fit, _copy(logits), _copy(labels), plugin=is_plugin(cal), **kwargs)
    except ValueError as exc:
        raise _named(exc, name) from exc.__cause__
    return cal


def predict(cal, logits, *, earlier=(), name: str | None = None) -> np.ndarray:
    """``cal.predict_proba`` on a copy of ``logits``, its output checked
    (:func:`checked_probabilities` against ``logits`` and the ``earlier`` outputs of the job)
    and returned read-only. An error names calibrator ``name`` when given."""
    z = _copy(logits)
    try:
        out = run_plugin("predict_proba", cal.predict_proba, z, plugin=is_plugin(cal))
        return checked_probabilities(out, np.shape(logits), others=(logits, z, *earlier))
    except ValueError as exc:
        raise _named(exc, name) from exc.__cause__


def _describe(x) -> str:
    cls = type(x)
    name = (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )
    return f"a {name}"


def checked_probabilities(out, shape: tuple, *, others=()) -> np.ndarray:
    """``out``, a calibrator's predictions for logits of ``shape`` ``(N, K)``, checked to be a
    NumPy float array of that shape holding probabilities (finite, in [0, 1], rows summing to 1
    within :data:`calbench._checks.ROW_SUM_ATOL`) that shares no memory with any of ``others``
    (its input, earlier outputs); returned made read-only. A one-line ``ValueError`` (starting
    ``predict_proba returned``) otherwise."""
    if not isinstance(out, np.ndarray) or isinstance(out, np.matrix | np.ma.MaskedArray):
        raise ValueError(
            f"predict_proba returned {_describe(out)}, not a numpy.ndarray of shape "
            f"{tuple(shape)}; return a NumPy array (a tensor: t.detach().cpu().numpy())"
        )
    if not np.issubdtype(out.dtype, np.floating):
        raise ValueError(
            f"predict_proba returned an array of dtype {out.dtype}; return float probabilities"
        )
    if out.shape != tuple(shape):
        raise ValueError(
            f"predict_proba returned shape {out.shape} for logits of shape {tuple(shape)}; "
            "return one row per sample and one column per class"
        )
    try:
        check_probs(out, "its probabilities")
    except ValueError as exc:
        raise ValueError(f"predict_proba returned invalid probabilities: {exc}") from None
    for other in others:
        if isinstance(other, np.ndarray) and np.may_share_memory(out, other):
            if np.shares_memory(out, other):
                raise ValueError(
                    "predict_proba returned an array sharing memory with its input or an "
                    "earlier output (a reused buffer, overwritten by the next call); return a "
                    "new array on every call"
                )
    if out.base is not None:  # a view: its owner may still be written through
        out = np.array(out, copy=True, order="K")
    out.flags.writeable = False
    return out


def metric_value(name: str, fn, probs, labels) -> float:
    """``fn(probs, labels)`` for plug-in metric ``name``, on read-only views, checked to be a
    finite real number: a one-line ``ValueError`` naming the metric otherwise."""
    value = run_plugin(f"metric {name!r}", fn, read_only(probs), read_only(labels))
    return checked_value(name, value)


def checked_value(name: str, value) -> float:
    """``value``, a metric's result, as a float if it is a finite real number; a one-line
    ``ValueError`` naming metric ``name`` and what it returned otherwise."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ValueError(
            f"metric {name!r} returned {_describe(value)} ({value!r:.40}), not a float; "
            "return a Python or NumPy float"
        )
    out = float(value)
    if not np.isfinite(out):
        raise ValueError(f"metric {name!r} returned {out}; a metric must return a finite float")
    return out
