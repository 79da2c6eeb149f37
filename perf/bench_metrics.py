"""Time every calbench metric on 50,000 x 1,000 probabilities and compare top-label ECE with
torchmetrics and netcal.

Run: ``python perf/bench_metrics.py [--n 50000] [--k 1000] [--repeats 3]``;
``--bootstrap`` times the bootstrap and the float32 softmax instead (below).
Prints figures only: best of ``--repeats`` runs, wall-clock and CPU (process) time taken
separately (on a shared machine CPU time is the steadier figure); nothing is asserted.
Targets: every metric well under 1 s; ECE >= 5x faster than torchmetrics'
``multiclass_calibration_error`` and >= 2x faster than ``netcal.metrics.ECE``.
``torch.set_num_threads(2)`` is set first (this machine has 2 cores).

``--bootstrap`` (``--n 25000 --k 1000``: an ImageNet-sized half, float32 probabilities): 100
bootstrap resamples of every metric with a chunked weighted form, a 1,000-resample paired
bootstrap of ECE on 5,000 samples (the default study's test half) and ``softmax32``. Figures on
the 2-core VM (OMP_NUM_THREADS=1, best of 3, wall s; "before" is commit 5b8fe2a: one
matrix-vector product per resample on a fresh float64 copy of the probabilities, ECE/MCE
re-binned resample by resample, softmax32 with three full-size temporaries)::

    bootstrap_ci, 100 resamples, 25000 x 1000 float32    before    after
      cwece                                               5.50     0.25
      marginal_ce                                         5.43     0.25
      cwece_kull                                          5.42     0.24
      ece                                                 0.103    0.078
      mce                                                 0.103    0.081
    paired_bootstrap(ece), 1000 resamples, 5000 x 1000    0.315    0.110
    softmax32, 25000 x 1000 float32 logits (warm loop)    0.120    0.096
      first call in a fresh process                       0.12-0.62  0.10-0.35

(first-touch page faults on this VM vary from run to run, hence the ranges.) The two CLI
commands of the profile on 25,000 x 1,000 float32 logits per half, ``calbench evaluate``
(accuracy, ece, cwece, mce, nll, brier; both halves; 100 resamples) and ``calbench compare``
(two calibrators, ece and nll, 200 resamples), ``/usr/bin/time`` wall / user / sys s over 3
runs each while another session used the machine (wall is noisy, user + sys is the steadier
figure)::

    evaluate  before  18.4-25.1 / 8.4-8.7 / 6.1-7.8   (14.9 / 8.1 / 6.7 on a quiet machine)
              after    3.6-5.7  / 2.6-2.9 / 0.2-1.0
    compare   before   2.8-5.5  / 1.6-1.8 / 0.8-1.4
              after    2.7-3.9  / 1.5-1.7 / 0.5-1.4

Both commands' CSVs agree with the earlier code to 5e-16 (evaluate) and 4e-15 (compare)
relative, in 3 and 2 interval bounds; estimates and p-values are unchanged. compare is
dominated by reading the logits, softmax and validation, not by its bootstrap.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
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
        t = best_time(
            lambda m=name: bootstrap_ci(m, p32, labels, n_resamples=100, method="basic"), repeats
        )
        print(f"  {name:38s} {fmt(t)}")
    m = min(n, 5000)
    sharp = p32[:m] ** 1.5
    sharp /= sharp.sum(axis=1, keepdims=True)
    t = best_time(
        lambda: paired_bootstrap(
            "ece", p32[:m], sharp, labels[:m], n_resamples=1000, method="basic"
        ),
        repeats,
    )
    print(f"{f'paired_bootstrap(ece), 1000 resamples, {m} x {k}':40s} {fmt(t)}")
    z = np.log(np.maximum(p32, 1e-30)).astype(np.float32)
    t = best_time(lambda: softmax32(z), repeats)
    print(f"{f'softmax32, {n} x {k} float32 logits':40s} {fmt(t)}")
    # a fresh process pays the first touch of every new page (the CLI's case)
    code = (
        "import time, numpy as np; from calbench.calibrators.precision import softmax32; "
        f"z = np.random.default_rng(0).standard_normal(({n}, {k}), dtype=np.float32); "
        "t = time.perf_counter(); softmax32(z); print(f'{time.perf_counter() - t:7.3f} s wall')"
    )
    cold = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    print(f"{'  first call in a fresh process':40s} {cold.stdout.strip()}")


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
    t_boot = best_time(
        lambda: bootstrap_ci("ece", probs, labels, n_resamples=1000, method="basic"), 1
    )
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
