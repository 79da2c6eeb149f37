"""Fit speed of calbench's calibrators and ECE against their references, side by side (prints a
table; no assertions).  One run of each (``--repeats`` for best-of-n).

Sections (``--only`` picks some):

* ``ts``: temperature scaling (study protocol, CPU) vs probmetrics' ``TemperatureScalingCalibrator``
  (bisection) on 5,000 x 10 .. 50,000 x 1,000;
* ``ece``: top-label ECE (15 bins) at 50,000 x 1,000 vs torchmetrics'
  ``MulticlassCalibrationError`` and vs one pass over the array (``probs.max(axis=1)``);
* ``iso``: one-vs-rest isotonic fit on uninformative logits vs a scikit-learn loop;
* ``new``: every calibrator added with docs/calibrators.md on 5,000 x 100 vs its reference
  (betacal, venn_abers, probmetrics, ml_insights; spline and its reference on 10 of the classes,
  scaled by 10, the reference taking ~20 s per class);
* ``denormal``: Dirichlet calibration on 5,000 x 100: its fit (objective evaluations counted)
  and one objective + gradient at the fitted parameters on 1 and 2 threads with denormal floats
  kept and flushed to zero (why the scaling family flushes them:
  ``calbench.calibrators.scaling.cpu_fit_settings``).

Run: ``python perf/bench_speed.py [--only ts ece iso new denormal] [--repeats 1]``.
"""

from __future__ import annotations

import argparse
import sys
import time
import types
import warnings

import numpy as np


def timed(fn, repeats=1):
    best, out = float("inf"), None
    for _ in range(max(1, repeats)):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return out, best


def problem(n, k, seed=0):
    from calbench.functional import softmax

    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 3
    p = softmax(z / 2)
    cum = np.cumsum(p, axis=1)
    y = np.minimum((rng.random((n, 1)) > cum).sum(axis=1), k - 1)
    return z.astype(np.float32), y


def row(name, shape, ours, ref, ref_name):
    ratio = ref / ours if ours > 0 else float("nan")
    print(f"{name:<14} {shape:<14} {ours:>9.3f} s {ref:>9.3f} s  {ratio:>6.1f}x  ({ref_name})")


def probmetrics_calibrators():
    try:
        import numba  # noqa: F401
    except ImportError:  # probmetrics imports numba for a solver not used here
        stub = types.ModuleType("numba")
        stub.njit = lambda *a, **k: a[0] if a and callable(a[0]) else (lambda f: f)
        sys.modules["numba"] = stub
    import probmetrics.calibrators as pc

    return pc


def bench_ts(repeats):
    import torch

    from calbench.calibrators import get_calibrator
    from calbench.functional import softmax

    pc = probmetrics_calibrators()
    for n, k in [(5000, 10), (5000, 100), (50000, 100), (50000, 1000)]:
        z, y = problem(n, k)
        get_calibrator("ts", device="cpu").fit(
            z[:100], y[:100]
        )  # torch start-up outside the timing
        _, ours = timed(lambda z=z, y=y: get_calibrator("ts", device="cpu").fit(z, y), repeats)
        pz = torch.as_tensor(softmax(z))
        from probmetrics.distributions import CategoricalProbs

        def ref_fit(pz=pz, y=y):
            return pc.TemperatureScalingCalibrator().fit_torch(
                CategoricalProbs(pz), torch.as_tensor(y)
            )

        threads = torch.get_num_threads()
        _, ref = timed(ref_fit, repeats)
        row("ts", f"{n}x{k}", ours, ref, f"probmetrics TS, {threads} torch threads")
        torch.set_num_threads(1)
        _, ref1 = timed(ref_fit, repeats)
        torch.set_num_threads(threads)
        row("ts", f"{n}x{k}", ours, ref1, "probmetrics TS, 1 torch thread")


def bench_ece(repeats):
    import torch
    from torchmetrics.functional.classification import multiclass_calibration_error

    from calbench.functional import softmax
    from calbench.metrics import METRICS

    z, y = problem(50000, 1000)
    p = softmax(z)
    _, ours = timed(lambda: METRICS["ece"](p, y), repeats)
    pt, yt = torch.as_tensor(p), torch.as_tensor(y)
    _, ref = timed(
        lambda: multiclass_calibration_error(pt, yt, num_classes=1000, n_bins=15), repeats
    )
    _, one = timed(lambda: p.max(axis=1), repeats)
    row("ece", "50000x1000", ours, ref, "torchmetrics")
    row("ece", "50000x1000", ours, one, "one pass: probs.max(axis=1)")


def bench_iso(repeats):
    from sklearn.isotonic import IsotonicRegression

    from calbench.calibrators import get_calibrator
    from calbench.functional import softmax

    for k in (10, 100):
        rng = np.random.default_rng(1)
        z = rng.normal(size=(5000, k)).astype(np.float32)
        y = rng.integers(0, k, 5000)  # uninformative: nothing to cut before the first positive
        _, ours = timed(lambda z=z, y=y: get_calibrator("iso").fit(z, y), repeats)
        p = softmax(z)
        _, ref = timed(lambda p=p, y=y: [IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(
            p[:, j], y == j) for j in range(p.shape[1])], repeats)  # fmt: skip
        row("iso (uninf.)", f"5000x{k}", ours, ref, "scikit-learn loop")


def bench_new(repeats):
    import betacal
    import ml_insights
    import venn_abers

    from calbench.calibrators import get_calibrator
    from calbench.functional import softmax

    pc = probmetrics_calibrators()
    z, y = problem(5000, 100)
    p = softmax(z)
    zt, _ = problem(5000, 100, seed=1)
    pt = softmax(zt)
    refs = {
        "beta": (
            "betacal",
            lambda: [betacal.BetaCalibration("abm").fit(p[:, j], y == j) for j in range(100)],
        ),
        "venn_abers": (
            "venn_abers",
            lambda: venn_abers.VennAbersCalibrator().predict_proba(
                p_cal=p, y_cal=y, p_test=pt, va_type="one_vs_rest"
            ),
        ),  # fmt: skip
        "svs": ("probmetrics", lambda: pc.get_calibrator("svs").fit(p, y)),
        "sms": ("probmetrics", lambda: pc.get_calibrator("sms").fit(p, y)),
        "ets": ("none installed", None),
        "cir": ("cir_model not installed", None),
    }
    for name, (ref_name, ref_fn) in refs.items():
        fit = (
            (lambda name=name: get_calibrator(name).fit(z, y).predict_proba(zt))
            if name == "venn_abers"
            else (lambda name=name: get_calibrator(name).fit(z, y))
        )
        _, ours = timed(fit, repeats)
        ref = timed(ref_fn, 1)[1] if ref_fn else float("nan")
        row(
            name,
            "5000x100",
            ours,
            ref,
            ref_name + (" (fit + predict)" if name == "venn_abers" else ""),
        )
    # spline: 10 classes of the 100 (one-vs-rest; per-class cost), times scaled by 10
    from calbench.calibrators.spline import fit_spline
    from calbench.calibrators.structured import blas_threads

    def ours_fit():
        with blas_threads(p.size):  # as SplineCalibration.fit runs it
            return [fit_spline(p[:, j], y == j) for j in range(10)]

    _, ours = timed(ours_fit, 1)
    _, ref = timed(
        lambda: [ml_insights.SplineCalib().fit(p[:, j], (y == j).astype(int)) for j in range(10)], 1
    )
    row("spline", "5000x100", 10 * ours, 10 * ref, "ml_insights SplineCalib, 10 classes x 10")


def bench_denormal(repeats):
    """Dirichlet's fit and its objective at the fitted parameters, denormals kept or flushed
    (CPU seconds of this process: steadier than wall seconds on a shared machine)."""
    import torch

    def timed(fn, repeats):  # noqa: F811  (CPU seconds here)
        best, out = float("inf"), None
        for _ in range(max(1, repeats)):
            t = time.process_time()
            out = fn()
            best = min(best, time.process_time() - t)
        return out, best

    from calbench.calibrators import get_calibrator
    from calbench.functional import log_softmax

    rng = np.random.default_rng(1)  # ImageNet-like: the true class boosted
    y = rng.integers(0, 100, 5000)
    z = (rng.normal(size=(5000, 100)) * 1.5).astype(np.float32)
    z[np.arange(5000), y] += 5.5
    calls = [0]
    orig = torch.nn.functional.cross_entropy

    def counted(*a, **k):
        calls[0] += 1
        return orig(*a, **k)

    torch.nn.functional.cross_entropy = counted
    try:
        cal, sec = timed(lambda: get_calibrator("dirichlet", device="cpu").fit(z, y), repeats)
    finally:
        torch.nn.functional.cross_entropy = orig
    print(
        f"{'dirichlet':<14} {'5000x100':<14} {sec:>9.3f} CPU-s fit, "
        f"{calls[0] // max(1, repeats)} objective evaluations"
    )
    x = torch.from_numpy(log_softmax(z)).float()
    yt = torch.from_numpy(y)
    w = torch.from_numpy(cal.params_["W"]).requires_grad_(True)
    b = torch.from_numpy(cal.params_["b"]).requires_grad_(True)
    off = 1.0 - torch.eye(100)

    def evaluate():
        for _ in range(10):
            w.grad = b.grad = None
            loss = torch.nn.functional.cross_entropy(x @ w + b, yt)
            (loss + 1e-3 / 9900 * ((w * off) ** 2).sum() + 1e-5 * (b**2).sum()).backward()

    logp = torch.log_softmax(x @ w.detach() + b.detach(), dim=1)
    share = float(((logp < -87.3) & (logp > -103.9)).float().mean())
    threads = torch.get_num_threads()
    for n, flush in ((2, False), (1, False), (2, True), (1, True)):
        torch.set_num_threads(n)
        torch.set_flush_denormal(flush)
        _, sec = timed(evaluate, repeats)
        print(
            f"{'  objective':<14} {f'{n} thread(s)':<14} {sec / 10 * 1e3:>9.2f} CPU-ms per "
            f"evaluation at the fit, denormals {'flushed' if flush else 'kept'} "
            f"({share:.1%} of the softmax outputs denormal)"
        )
    torch.set_flush_denormal(False)
    torch.set_num_threads(threads)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=["ts", "ece", "iso", "new", "denormal"])
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    print(f"{'what':<14} {'shape':<14} {'calbench':>11} {'reference':>11}  speed-up")
    for name in args.only:
        {
            "ts": bench_ts,
            "ece": bench_ece,
            "iso": bench_iso,
            "new": bench_new,
            "denormal": bench_denormal,
        }[name](args.repeats)


if __name__ == "__main__":
    main()
