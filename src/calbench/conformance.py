"""One conformance suite for any calibrator or metric, built-in or plug-in (``calbench
check-calibrator NAME``, ``calbench check-metric NAME``; the test suite runs it over every
built-in, so built-ins and plug-ins meet one bar).

Calibrators (:func:`check_calibrator`), on synthetic over-confident logits:

* ``shapes``: ``fit`` returns the calibrator, ``predict_proba`` gives ``(N, K)``;
* ``probabilities``: finite, in [0, 1], rows summing to 1 (within ``ROW_ATOL``);
* ``deterministic``: two fresh fits on the same data predict bit-identically;
* ``isolation``: ``fit`` and ``predict_proba`` leave their input arrays as they are, and
  ``predict_proba`` returns a new array each call, sharing no memory with its input or an
  earlier output (:mod:`calbench.isolation` rejects such outputs in a job);
* ``round trip``: ``save_calibrator`` / ``load_calibrator`` (JSON) predicts bit-identically;
* ``layout and dtype``: Fortran-ordered and strided arrays, float16/32/64 values, every integer
  label dtype, torch tensors (when torch is installed) give the answer of the C-ordered float64
  array holding the same values, within the input dtype's precision (:func:`layout_variants`);
* ``bad input``: NaN or infinite logits, labels out of range, the wrong number of classes and
  predicting before fitting are one-line ``ValueError`` s;
* ``refuses probabilities``: ``fit`` and ``predict_proba`` refuse rows that are probability
  vectors (calibrators take logits);
* ``fit time``: seconds to fit 5,000 x 10 and 5,000 x 100 logits (printed, never judged).

Metrics (:func:`check_metric`): every fact declared (``Metric.missing_facts``), a finite float,
its input arrays left as they are, deterministic, calibrated predictions (labels drawn from them)
scoring better than confidently wrong ones in the declared direction (judged: a metric that
contradicts its ``higher_is_better`` makes every table bold its worst calibrator; only
calbench's coverage checks, near ``1 - alpha`` by construction, are printed, not judged), the
layout and dtype property, one-line errors on bad input, and the time on 5,000 x 10 and
5,000 x 100 probabilities.

Every check runs under a time limit (``timeout`` seconds, ``--timeout``; default
:data:`TIMEOUT`): a fit or metric that hangs fails the check it hangs in, with one line naming
the check and the limit, and ends the suite. The limit is a ``SIGALRM`` timer, so it applies in
the main thread on POSIX systems and interrupts Python code (and any call that returns to the
interpreter), not a single C call that never does.
"""

from __future__ import annotations

import json
import signal
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calbench.calibrators import get_calibrator, load_calibrator, save_calibrator
from calbench.functional import softmax
from calbench.metrics import METRICS
from calbench.plugins import find_calibrator, find_metric

#: largest deviation of a row sum from 1 accepted from a calibrator
ROW_ATOL = 1e-9
#: relative tolerance per input float dtype in the layout check: same values, other arithmetic
RTOL = {np.float64: 1e-9, np.float32: 2e-3, np.float16: 2e-3}
LABEL_DTYPES = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
#: the (N, K) inputs whose fitting time is printed
TIMING_SIZES = ((5000, 10), (5000, 100))
#: seconds one check may run by default (the slowest built-in fit of 5,000 x 100 takes far less)
TIMEOUT = 600.0
#: calbench's coverage checks: near 1 - alpha by construction, their direction only orders the
#: column (calbench.metrics.registry), so the direction check prints them instead of judging
COVERAGE_CHECKS = ("lac_coverage", "aps_coverage")


@dataclass(frozen=True)
class Check:
    """One check's outcome: ``ok`` is ``None`` for a figure that is printed, not judged."""

    name: str
    ok: bool | None
    detail: str = ""

    def line(self) -> str:
        mark = {True: "PASS", False: "FAIL", None: "INFO"}[self.ok]
        return f"{mark}  {self.name}" + (f": {self.detail}" if self.detail else "")


# --- data -------------------------------------------------------------------------------------
def overconfident_logits(n: int, k: int, seed: int = 0, temperature: float = 2.5):
    """(float64 logits (n, k), int64 labels): informative logits whose labels are drawn from
    the softmax at ``temperature`` (> 1: the logits are over-confident)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2.0
    z[np.arange(n), rng.integers(0, k, n)] += 2.0
    p = softmax(z / temperature)
    u = rng.random((n, 1))
    y = np.minimum((u > np.cumsum(p, axis=1)).sum(axis=1), k - 1).astype(np.int64)
    return z, y


def calibrated_probs(n: int, k: int, seed: int = 0):
    """(probabilities (n, k), labels drawn from them): calibrated by construction."""
    rng = np.random.default_rng(seed)
    p = softmax(rng.normal(size=(n, k)) * 2.0)
    y = np.minimum((rng.random((n, 1)) > np.cumsum(p, axis=1)).sum(axis=1), k - 1)
    return p, y.astype(np.int64)


def layout_variants(x: np.ndarray, y: np.ndarray) -> list[tuple[str, object, object, type]]:
    """``(label, x variant, y variant, float dtype of the values)``: for float64 ``x`` a
    Fortran-ordered array, a strided view, every integer label dtype, strided labels and torch
    tensors; for float32 / float16 ``x`` the array itself and its torch tensor."""
    try:
        import torch  # lazy: pulls torch
    except ImportError:  # pragma: no cover - torch is a calbench dependency
        torch = None
    dt = x.dtype.type
    if dt is not np.float64:
        out = [(dt.__name__, x, y, dt)]
        if torch is not None:
            t = torch.tensor(x, requires_grad=dt is not np.float16)
            out.append((f"torch {dt.__name__}", t, torch.tensor(y), dt))
        return out
    big = np.zeros((2 * x.shape[0], 3 * x.shape[1]), dtype=x.dtype)
    big[::2, ::3] = x
    out = [("fortran", np.asfortranarray(x), y, dt), ("strided", big[::2, ::3], y, dt)]
    out += [(f"labels {d.__name__}", x, y.astype(d), dt) for d in LABEL_DTYPES]
    out.append(("strided labels", x, np.repeat(y, 2)[::2], dt))
    if torch is not None:
        out.append(
            ("torch requires_grad", torch.tensor(x, requires_grad=True), torch.tensor(y), dt)
        )
        out.append(("torch", torch.tensor(x), torch.tensor(y, dtype=torch.int32), dt))
    return out


def _one_line_value_error(fn: Callable[[], object], expect: str) -> str | None:
    """``None`` if ``fn()`` raises a one-line ``ValueError``, else why not."""
    try:
        fn()
    except ValueError as exc:
        text = str(exc)
        if "\n" in text or not text.strip():
            return f"{expect}: the ValueError is not one line ({text[:80]!r})"
        return None
    except Exception as exc:  # noqa: BLE001 - any other exception is the finding
        return f"{expect}: raised {type(exc).__name__} ({str(exc)[:80]}), not a ValueError"
    return f"{expect}: accepted"


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# --- time limit ------------------------------------------------------------------------------
class CheckTimeout(BaseException):
    """Raised inside a check that ran past its limit (a ``BaseException``: the checks' own
    ``except Exception`` clauses, meant for the plug-in's errors, do not catch it)."""


class _Clock:
    """The name of the check in progress (set by the suites) and the per-check limit."""

    def __init__(self, seconds: float | None) -> None:
        if seconds is not None and (
            isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0
            or not np.isfinite(seconds)
        ):  # fmt: skip
            raise ValueError(
                f"--timeout must be a number of seconds >= 0 (0: none), got {seconds!r}"
            )
        self.seconds = float(seconds or 0.0)
        self.name = "loads"

    def _usable(self) -> bool:
        return (
            self.seconds > 0
            and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
        )

    def bounded(self, checks: Iterator[Check]) -> Iterator[Check]:
        """``checks``, each ``next`` under the limit; a check that runs past it ends the suite
        with a failed :class:`Check` naming it and the limit."""
        while True:
            try:
                with self._armed():
                    c = next(checks)
            except StopIteration:
                return
            except CheckTimeout:
                checks.close()
                yield Check(
                    self.name,
                    False,
                    f"did not finish within {self.seconds:g} s (the per-check limit, --timeout); "
                    "the fit or metric hangs or is far too slow",
                )
                return
            yield c

    def _armed(self):
        clock = self

        class _Armed:
            def __enter__(self):
                self.previous = None
                if clock._usable():

                    def expire(signum, frame):
                        raise CheckTimeout(clock.name)

                    self.previous = signal.signal(signal.SIGALRM, expire)
                    signal.setitimer(signal.ITIMER_REAL, clock.seconds)

            def __exit__(self, *exc):
                if self.previous is not None:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    signal.signal(signal.SIGALRM, self.previous)
                return False

        return _Armed()


# --- calibrators ------------------------------------------------------------------------------
def _quiet(fn: Callable[[], object]):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few-samples warnings of the small problems
        return fn()


def calibrator_classes(make: Callable[[], object]) -> int:
    """3, or 2 for a calibrator that refuses more classes (binary only)."""
    z, y = overconfident_logits(200, 3, seed=5)
    try:
        _quiet(lambda: make().fit(z, y))
    except ValueError:
        return 2
    except Exception:  # noqa: BLE001 - a crash: the shapes check reports it
        return 3
    return 3


def calibrator_checks(
    name: str, params: dict | None = None, *, timing: bool = True, timeout: float | None = TIMEOUT
) -> Iterator[Check]:
    """The calibrator checks of ``name`` (a registry name, an entry point or ``module:Class``)
    with hyperparameters ``params``, one :class:`Check` at a time, each within ``timeout``
    seconds (``None`` or 0: no limit)."""
    clock = _Clock(timeout)
    return clock.bounded(_calibrator_checks(name, dict(params or {}), timing, clock))


def _calibrator_checks(name: str, params: dict, timing: bool, clock: _Clock) -> Iterator[Check]:
    cls = find_calibrator(name)  # an unknown or broken name: one-line ValueError
    make = lambda: get_calibrator(name, **params)  # noqa: E731
    make()  # bad params: one-line ValueError before any check
    yield Check("loads", True, f"{cls.__module__}.{cls.__name__}")
    clock.name = "shapes"
    k = calibrator_classes(make)
    z, y = overconfident_logits(400, k, seed=1)
    zt, _ = overconfident_logits(150, k, seed=2)
    try:
        cal = _quiet(lambda: make().fit(z, y))
        p = cal.predict_proba(zt)
    except Exception as exc:  # noqa: BLE001
        yield Check("shapes", False, f"fit/predict_proba failed: {type(exc).__name__}: {exc}")
        return
    ok = isinstance(p, np.ndarray) and p.shape == zt.shape and np.issubdtype(p.dtype, np.floating)
    got = (
        f"{p.dtype} {p.shape}"
        if isinstance(p, np.ndarray)
        else f"{type(p).__module__}.{type(p).__qualname__}"
    )
    yield Check("shapes", ok, f"fit (400, {k}) -> predict (150, {k}) gave {got}")
    if not ok:
        return
    clock.name = "probabilities"
    p64 = np.asarray(p, dtype=np.float64)
    dev = float(np.abs(p64.sum(axis=1) - 1).max()) if np.all(np.isfinite(p64)) else np.nan
    ok = bool(np.all(np.isfinite(p64)) and p64.min() >= 0 and p64.max() <= 1 and dev <= ROW_ATOL)
    yield Check(
        "probabilities", ok, f"finite, in [0, 1], max |row sum - 1| = {dev:.1e} (<= {ROW_ATOL:g})"
    )
    clock.name = "deterministic"
    again = _quiet(lambda: make().fit(z, y)).predict_proba(zt)
    yield Check("deterministic", bool(np.array_equal(again, p)),
                "two fits predict bit-identically" if np.array_equal(again, p) else
                f"two fits differ by up to {np.abs(again - p).max():.2e}")  # fmt: skip
    clock.name = "round trip"
    yield _round_trip(cal, zt, p)
    clock.name = "isolation"
    yield _isolation_check(make, z, y, zt)
    clock.name = "layout and dtype"
    yield _layout_check(make, k)
    clock.name = "bad input"
    yield _bad_input_check(make, z, y)
    clock.name = "refuses probabilities"
    yield _probabilities_check(make, cal, z, y)
    if timing:
        for n, kk in TIMING_SIZES:
            clock.name = f"fit time {n} x {kk}"
            if k == 2 and kk > 2:
                yield Check(clock.name, None, "binary-only calibrator: not applicable")
                continue
            zz, yy = overconfident_logits(n, kk, seed=3)
            secs = _quiet(lambda zz=zz, yy=yy: _timed(lambda: make().fit(zz, yy)))
            yield Check(clock.name, None, f"{secs:.3f} s")


def _isolation_check(make, z: np.ndarray, y: np.ndarray, zt: np.ndarray) -> Check:
    """``fit`` and ``predict_proba`` on writeable copies: the copies must be unchanged after,
    and two predictions (of different logits of one shape) must be new arrays, sharing no memory
    with their inputs or each other, the first unchanged by the second call."""
    problems = []
    zc, yc = z.copy(), y.copy()
    a, b = zt.copy(), zt[::-1].copy()
    a0 = a.copy()
    try:
        cal = _quiet(lambda: make().fit(zc, yc))
        pa = cal.predict_proba(a)
        pa0 = np.array(pa, copy=True)
        pb = cal.predict_proba(b)
    except Exception as exc:  # noqa: BLE001
        return Check("isolation", False, f"fit/predict_proba failed: {type(exc).__name__}: {exc}")
    if not np.array_equal(zc, z):
        problems.append("fit changes its logits in place")
    if not np.array_equal(yc, y):
        problems.append("fit changes its labels in place")
    if not np.array_equal(a, a0):
        problems.append("predict_proba changes its logits in place")
    if isinstance(pa, np.ndarray) and isinstance(pb, np.ndarray):
        if np.shares_memory(pa, a) or np.shares_memory(pb, b):
            problems.append("predict_proba returns an array sharing memory with its input")
        if np.shares_memory(pa, pb):
            problems.append(
                "predict_proba returns one reused output buffer (its second output shares "
                "memory with the first"
                + (", which it overwrote)" if not np.array_equal(pa, pa0) else ")")
            )
        elif not np.array_equal(pa, pa0):
            problems.append("predict_proba's second call changed its first output")
    if problems:
        return Check(
            "isolation", False, "; ".join(problems) + "; work on copies, return new arrays"
        )
    return Check(
        "isolation", True, "inputs unchanged by fit and predict_proba; a new output array per call"
    )


def _round_trip(cal, zt: np.ndarray, p: np.ndarray) -> Check:
    try:
        json.dumps(cal.to_dict(), allow_nan=False)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "c.json"
            save_calibrator(cal, path)
            back = load_calibrator(path).predict_proba(zt)
    except Exception as exc:  # noqa: BLE001
        return Check("round trip", False, f"save/load failed: {type(exc).__name__}: {exc}")
    same = bool(np.array_equal(back, p))
    detail = (
        "JSON save/load predicts bit-identically"
        if same
        else (f"the loaded calibrator differs by up to {np.abs(back - p).max():.2e}")
    )
    return Check("round trip", same, detail)


def _layout_check(make, k: int) -> Check:
    """The property test over layouts and dtypes (each variant fits and predicts)."""
    z0, y = overconfident_logits(90, k, seed=4)
    worst = []
    for dtype in (np.float64, np.float32, np.float16):
        z = z0.astype(dtype)
        ref = _quiet(
            lambda z=z: make().fit(z.astype(np.float64), y).predict_proba(z.astype(np.float64))
        )
        for label, zv, yv, dt in layout_variants(z, y):
            try:
                got = _quiet(lambda zv=zv, yv=yv: make().fit(zv, yv).predict_proba(zv))
            except Exception as exc:  # noqa: BLE001
                return Check("layout and dtype", False, f"{label}: {type(exc).__name__}: {exc}")
            got = np.asarray(got, dtype=np.float64)
            tol = RTOL[dt]
            if got.shape != ref.shape or not np.allclose(got, ref, rtol=tol, atol=tol):
                err = np.abs(got - ref).max() if got.shape == ref.shape else got.shape
                worst.append(f"{label} ({dtype.__name__}): {err}")
    if worst:
        return Check(
            "layout and dtype", False, "differs from C-ordered float64 for " + "; ".join(worst[:3])
        )
    return Check(
        "layout and dtype", True, "Fortran, strided, float16/32/64, int8..uint64 labels, torch"
    )


def _bad_input_check(make, z: np.ndarray, y: np.ndarray) -> Check:
    k = z.shape[1]
    nan = z.copy()
    nan[3, 1] = np.nan
    inf = z.copy()
    inf[3, 1] = np.inf
    fitted = _quiet(lambda: make().fit(z, y))
    cases = [
        (lambda: make().predict_proba(z), "predict before fit"),
        (lambda: make().fit(nan, y), "NaN logits"),
        (lambda: make().fit(inf, y), "infinite logits"),
        (lambda: make().fit(z, np.where(y == 0, k, y)), "label = K"),
        (lambda: make().fit(z, np.where(y == 0, -1, y)), "negative label"),
        (lambda: make().fit(z, y[:-1]), "labels of another length"),
        (lambda: fitted.predict_proba(np.concatenate([z, z[:, :1]], axis=1)), "K + 1 classes"),
        (lambda: fitted.predict_proba(nan), "NaN logits at predict"),
    ]
    problems = [
        why for fn, what in cases if (why := _one_line_value_error(lambda fn=fn: _quiet(fn), what))
    ]
    if problems:
        return Check("bad input", False, "; ".join(problems))
    return Check("bad input", True, f"{len(cases)} bad inputs, each a one-line ValueError")


def _probabilities_check(make, cal, z: np.ndarray, y: np.ndarray) -> Check:
    p = softmax(z)
    problems = [
        why
        for fn, what in [
            (lambda: make().fit(p, y), "fit(probabilities)"),
            (lambda: cal.predict_proba(p), "predict_proba(probabilities)"),
        ]  # fmt: skip
        if (why := _one_line_value_error(lambda fn=fn: _quiet(fn), what))
    ]
    if problems:
        return Check("refuses probabilities", False, "; ".join(problems))
    return Check("refuses probabilities", True, "fit and predict_proba refuse probability rows")


# --- metrics ----------------------------------------------------------------------------------
def _grid_probs(z: np.ndarray) -> np.ndarray:
    """softmax(z) on a 1/1024 grid: exact in float16/32/64, rows summing to 1."""
    n = z.shape[0]
    counts = np.floor(softmax(z) * 1024).astype(np.int64)
    counts[np.arange(n), counts.argmax(axis=1)] += 1024 - counts.sum(axis=1)
    return counts / 1024


def metric_checks(
    name: str, *, timing: bool = True, timeout: float | None = TIMEOUT
) -> Iterator[Check]:
    """The metric checks of ``name`` (a registry name, an entry point or ``module:function``),
    each within ``timeout`` seconds (``None`` or 0: no limit)."""
    clock = _Clock(timeout)
    return clock.bounded(_metric_checks(name, timing, clock))


def _metric_checks(name: str, timing: bool, clock: _Clock) -> Iterator[Check]:
    m = find_metric(name)  # an unknown, broken or incompletely declared metric: ValueError
    missing = m.missing_facts()
    yield Check("facts", not missing, "missing: " + ", ".join(missing) if missing else
                f"display {m.display!r}, higher_is_better={m.higher_is_better}, interval "
                f"{m.interval}, paired test {m.paired_test}")  # fmt: skip
    clock.name = "value"
    z, y = overconfident_logits(300, 4, seed=1)
    p = softmax(z)
    pc, yc = p.copy(), y.copy()
    try:
        v = m(pc, yc)
    except Exception as exc:  # noqa: BLE001
        yield Check("value", False, f"{type(exc).__name__}: {exc}")
        return
    ok = isinstance(v, float | np.floating) and bool(np.isfinite(v))
    yield Check("value", ok, f"a finite float on (300, 4): {v!r}")
    clock.name = "inputs unchanged"
    changed = [
        w for w, a, b in (("probabilities", pc, p), ("labels", yc, y)) if not np.array_equal(a, b)
    ]
    yield Check(
        "inputs unchanged",
        not changed,
        f"the metric changes its {' and '.join(changed)} in place; compute on a copy"
        if changed
        else "probabilities and labels as they were",
    )
    clock.name = "deterministic"
    again = m(p.copy(), y.copy())
    yield Check(
        "deterministic", again == v or (np.isnan(again) and np.isnan(v)), "same value twice"
    )
    clock.name = "direction"
    yield _direction_check(m)
    clock.name = "layout and dtype"
    yield _metric_layout_check(m)
    clock.name = "bad input"
    k = 4
    nan = p.copy()
    nan[0, 0] = np.nan
    off = p.copy()
    off[0] *= 1.5
    cases = [
        (lambda: m(nan, y), "NaN probabilities"),
        (lambda: m(off, y), "a row not summing to 1"),
        (lambda: m(p, np.where(y == 0, k, y)), "label = K"),
        (lambda: m(p, y[:-1]), "labels of another length"),
    ]
    problems = [why for fn, what in cases if (why := _one_line_value_error(fn, what))]
    yield Check(
        "bad input",
        not problems,
        "; ".join(problems) or f"{len(cases)} bad inputs, each a one-line ValueError",
    )
    if timing:
        for n, kk in TIMING_SIZES:
            clock.name = f"time {n} x {kk}"
            zz, yy = overconfident_logits(n, kk, seed=3)
            pp = softmax(zz)
            yield Check(clock.name, None, f"{_timed(lambda pp=pp, yy=yy: m(pp, yy)):.3f} s")


def _direction_check(m) -> Check:
    """Calibrated predictions (labels drawn from them) against confidently wrong ones: the
    calibrated must score better (or equal) in the declared direction."""
    k = 4
    good, yc = calibrated_probs(2000, k, seed=7)
    bad = np.full_like(good, 0.1 / (k - 1))
    bad[np.arange(len(yc)), (yc + 1) % k] = 0.9
    vg, vb = m(good, yc), m(bad, yc)
    better = vg >= vb if m.higher_is_better else vg <= vb
    side = "higher" if m.higher_is_better else "lower"
    detail = f"calibrated {vg:.4g} vs confidently wrong {vb:.4g} ({side} is better)"
    if better:
        return Check("direction", True, f"as declared: {detail}")
    if m.name in COVERAGE_CHECKS and METRICS.get(m.name) is m:
        return Check("direction", None, f"NOT as declared: {detail}; a coverage check, whose "
                     "direction only orders the column")  # fmt: skip
    return Check(
        "direction",
        False,
        f"NOT as declared: {detail}; tables would bold the worst calibrator: fix "
        "higher_is_better or the metric",
    )


def _metric_layout_check(m) -> Check:
    z, y = overconfident_logits(90, 4, seed=6)
    worst = []
    for dtype in (np.float64, np.float32, np.float16):
        p = _grid_probs(z).astype(dtype)
        ref = float(m(p.astype(np.float64), y))
        for label, pv, yv, dt in layout_variants(p, y):
            got = float(m(pv, yv))
            if not np.isclose(got, ref, rtol=RTOL[dt], atol=RTOL[dt] * 1e-2):
                worst.append(f"{label} ({dtype.__name__}): {got!r} vs {ref!r}")
    if worst:
        return Check("layout and dtype", False, "; ".join(worst[:3]))
    return Check(
        "layout and dtype", True, "Fortran, strided, float16/32/64, int8..uint64 labels, torch"
    )


def run(checks: Iterator[Check], emit: Callable[[str], object] = print) -> bool:
    """Print each check as it completes; ``True`` when none failed."""
    ok = True
    for c in checks:
        emit(c.line())
        ok &= c.ok is not False
    return ok
