"""Time every calbench metric on 50,000 x 1,000 probabilities and compare top-label ECE with
torchmetrics and netcal.

Run: ``python bench/bench_metrics.py [--n 50000] [--k 1000] [--repeats 3]``;
``--bootstrap`` times the bootstrap and the float32 softmax instead (below).
Prints figures only: best of ``--repeats`` runs, wall-clock and CPU (process) time taken
separately (on a shared machine CPU time is the steadier figure); nothing is asserted.
Targets: every metric well under 1 s; ECE >= 5x faster than torchmetrics'
``multiclass_calibration_error`` and >= 2x faster than ``netcal.metrics.ECE``.
``torch.set_num_threads(2)`` is set first (this machine has 2 cores).

``--bootstrap`` (``--n 25000 --k 1000``: an ImageNet-sized half, float32 probabilities): 100
bootstrap resamples of every metric with a chunked weighted form, a 1,000-resample paired
bootstrap of ECE on 5,000 samples (the default study's test half) and ``softmax32``. Figures on
the 2-core VM (OMP_NUM_THREADS=1, best of 3, wall s; "before" is the resample-by-resample
bootstrap and the three-temporary softmax of commit 5b8fe2a)::

    bootstrap_ci, 100 resamples, 25000 x 1000 float32   before    after
      cwece                                             BEFORE_CWECE
      marginal_ce                                       BEFORE_MARG
      cwece_kull                                        BEFORE_KULL
      ece                                               BEFORE_ECE
      mce                                               BEFORE_MCE
    paired_bootstrap(ece), 1000 resamples, 5000 x 1000  BEFORE_PAIRED
    softmax32, 25000 x 1000 float32 logits              BEFORE_SOFTMAX

The two CLI commands of the profile (``calbench evaluate`` with accuracy, ece, cwece, mce, nll,
brier on both halves and 100 resamples; ``calbench compare`` of two calibrators on ece and nll
with 200 resamples; 25,000 x 1,000 float32 logits per half), ``/usr/bin/time`` wall / user /
sys s: CLI_FIGURES
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from calbench._checks import check_probs_labels
from calbench.functional import softmax
from calbench.metrics import METRICS, compute_metrics, ece
from calbench.stats import bootstrap_ci


def make_data(n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Softmax of noisy logits with a sharp, ~75%-correct top label (an ImageNet-like model)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    logits = rng.standard_normal((n, k), dtype=np.float32)
    pred = np.where(rng.random(n) < 0.75, labels, rng.integers(0, k, n))
    logits[np.arange(n), pred] += rng.gamma(4.0, 2.0, n).astype(np.float32) + 2.0
    return softmax(logits), labels


def best_time(fn, repeats: int) -> tuple[float, float]:
    """Best wall-clock and best CPU seconds over ``repeats`` calls."""
    wall = cpu = float("inf")
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - w)
        cpu = min(cpu, time.process_time() - c)
    return wall, cpu


def fmt(t: tuple[float, float]) -> str:
    return f"{t[0]:7.3f} s wall / {t[1]:7.3f} s cpu"


def ratio(slow: tuple[float, float], fast: tuple[float, float]) -> str:
    return f"{slow[0] / fast[0]:.1f}x wall, {slow[1] / fast[1]:.1f}x cpu"


def bootstrap_figures(n: int, k: int, repeats: int) -> None:
    """Time the chunked bootstrap of the weighted metrics and ``softmax32`` (float32 input)."""
    from calbench.calibrators.precision import softmax32
    from calbench.stats import paired_bootstrap

    probs, labels = make_data(n, k)
    p32 = probs.astype(np.float32)
    p32 /= p32.sum(axis=1, keepdims=True)
    print(f"bootstrap_ci, 100 resamples, {n} x {k} float32 probabilities, best of {repeats}:")
    for name in ("cwece", "marginal_ce", "cwece_kull", "ece", "mce"):
        t = best_time(lambda m=name: bootstrap_ci(m, p32, labels, n_resamples=100), repeats)
        print(f"  {name:38s} {fmt(t)}")
    m = min(n, 5000)
    sharp = p32[:m] ** 1.5
    sharp /= sharp.sum(axis=1, keepdims=True)
    t = best_time(
        lambda: paired_bootstrap("ece", p32[:m], sharp, labels[:m], n_resamples=1000), repeats
    )
    print(f"{f'paired_bootstrap(ece), 1000 resamples, {m} x {k}':40s} {fmt(t)}")
    z = np.log(np.maximum(p32, 1e-30)).astype(np.float32)
    print(f"{f'softmax32, {n} x {k} float32 logits':40s} {fmt(best_time(lambda: softmax32(z), repeats))}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--k", type=int, default=1_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bootstrap", action="store_true", help="time the bootstrap and softmax32")
    args = ap.parse_args()
    if args.bootstrap:
        bootstrap_figures(args.n, args.k, args.repeats)
        return
    try:
        import torch

        torch.set_num_threads(2)
    except ImportError:  # pragma: no cover - optional comparison
        torch = None
    probs, labels = make_data(args.n, args.k)
    r = args.repeats
    print(
        f"data: {args.n} x {args.k} float64 probabilities, "
        f"accuracy {METRICS['accuracy'](probs, labels):.3f}; best of {r} runs"
    )
    t_check = best_time(lambda: check_probs_labels(probs, labels), r)
    print(f"{'input validation (check_probs_labels)':40s} {fmt(t_check)}")
    print("per metric, validation included:")
    for name, metric in METRICS.items():
        t = best_time(lambda m=metric: m(probs, labels), r)
        print(f"  {name:38s} {fmt(t)}   value {metric(probs, labels):.6f}")
    print(f"{'compute_metrics (all, validated once)':40s} "
          f"{fmt(best_time(lambda: compute_metrics(probs, labels), r))}")  # fmt: skip
    t_boot = best_time(lambda: bootstrap_ci("ece", probs, labels, n_resamples=1000), 1)
    print(f"{'bootstrap_ci(ece, 1000 resamples, 1 run)':40s} {fmt(t_boot)}")

    t_ece = best_time(lambda: ece(probs, labels), r)
    p_ok, y_ok = check_probs_labels(probs, labels)
    t_core = best_time(lambda: METRICS["ece"].core(p_ok, y_ok), r)
    print(f"\ntop-label ECE (calbench): {fmt(t_ece)}; without input validation {fmt(t_core)}")
    if torch is not None:
        from torchmetrics.functional.classification import multiclass_calibration_error

        pt, yt = torch.from_numpy(probs), torch.from_numpy(labels)
        t_tm = best_time(
            lambda: multiclass_calibration_error(pt, yt, num_classes=args.k, n_bins=15), r
        )
        val = float(multiclass_calibration_error(pt, yt, num_classes=args.k, n_bins=15))
        print(
            f"torchmetrics multiclass_calibration_error: {fmt(t_tm)} (value {val:.6f})\n"
            f"  -> calbench is {ratio(t_tm, t_ece)} faster; "
            f"without input validation {ratio(t_tm, t_core)} (target >= 5x)"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from netcal.metrics import ECE

            t_nc = best_time(lambda: ECE(bins=15).measure(probs, labels), r)
            val = float(ECE(bins=15).measure(probs, labels))
        print(
            f"netcal ECE(bins=15): {fmt(t_nc)} (value {val:.6f})\n"
            f"  -> calbench is {ratio(t_nc, t_ece)} faster; "
            f"without input validation {ratio(t_nc, t_core)} (target >= 2x)"
        )
    except ImportError as exc:  # pragma: no cover - optional comparison
        print(f"netcal not available: {exc}")


if __name__ == "__main__":
    main()
