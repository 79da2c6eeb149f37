"""Speed of the calibrators at the study's sizes (prints figures; no assertions on time).

* isotonic one-vs-rest, 1,000 classes x 25,000 samples (ImageNet half): vectorised fit + apply
  against a per-class scikit-learn IsotonicRegression loop (target ratio >= 5x);
* histogram binning, same size, against a per-class numpy loop (target >= 20x);
* temperature scaling on 5,000 x 100 on CPU (target < 0.1 s);
* ms_b / vs_b / dirichlet on 5,000 x 100 on CPU.

Run: ``python benchmarks/bench_calibrators.py [--classes 1000 --samples 25000]``.
Both wall-clock and CPU (process) time are printed: on a shared machine the CPU time is the
steadier figure.  The array-level functions are timed on precomputed probabilities (the softmax
is common to both sides and excluded).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def timed(fn, *args):
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - w, time.process_time() - c


def synthetic(n, k, seed=0):
    """ImageNet-like logits: true class boosted, ~65 % top-1 accuracy at K = 1000."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = (rng.normal(size=(n, k)) * 1.5).astype(np.float32)
    z[np.arange(n), y] += 5.5
    return z, y


def sklearn_iso_loop(p, y):
    from sklearn.isotonic import IsotonicRegression

    out = np.empty_like(p)
    for j in range(p.shape[1]):
        ir = IsotonicRegression(increasing=True, out_of_bounds="clip", y_min=0, y_max=1)
        ir.fit(p[:, j], (y == j).astype(np.float64))
        out[:, j] = ir.predict(p[:, j])
    return out


def hist_loop(p, y, n_bins=20):
    """Per-class reference: digitize each column, bin means, empty bins -> centre."""
    edges = np.linspace(0, 1, n_bins + 1)
    edges[-1] = 1 + 1e-10
    out = np.empty_like(p)
    for j in range(p.shape[1]):
        idx = np.digitize(p[:, j], edges) - 1
        cnt = np.bincount(idx, minlength=n_bins)
        pos = np.bincount(idx, weights=(y == j), minlength=n_bins)
        theta = np.where(cnt > 0, pos / np.maximum(cnt, 1), (np.arange(n_bins) + 0.5) / n_bins)
        out[:, j] = theta[idx]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=25000)
    args = ap.parse_args()
    import scipy.optimize  # noqa: F401  (import cost excluded from both sides)
    import sklearn.isotonic  # noqa: F401

    from calbench.calibrators import get_calibrator
    from calbench.calibrators.binning import apply_histogram_binning, fit_histogram_binning
    from calbench.calibrators.isotonic import apply_isotonic, fit_isotonic
    from calbench.functional import softmax

    n, k = args.samples, args.classes
    z, y = synthetic(n, k)
    p = softmax(z)
    print(f"data: {n} x {k}, top-1 accuracy {np.mean(p.argmax(1) == y):.3f}")

    def iso_vec():
        return apply_isotonic(*fit_isotonic(p, y), p)

    fast, w1, c1 = timed(iso_vec)
    ref, w2, c2 = timed(sklearn_iso_loop, p, y)
    print(f"isotonic ovr fit+apply: vectorised {w1:.3f} s wall / {c1:.3f} s cpu; "
          f"sklearn loop {w2:.3f} s / {c2:.3f} s; ratio {w2 / w1:.1f}x wall, {c2 / c1:.1f}x cpu "
          f"(max |diff| {np.abs(fast - ref).max():.1e})")  # fmt: skip

    def hist_vec():
        return apply_histogram_binning(fit_histogram_binning(p, y, 20), p)

    fast, w1, c1 = timed(hist_vec)
    ref, w2, c2 = timed(hist_loop, p, y)
    print(f"histogram binning fit+apply: vectorised {w1:.3f} s / {c1:.3f} s cpu; "
          f"per-class loop {w2:.3f} s / {c2:.3f} s; ratio {w2 / w1:.1f}x wall, {c2 / c1:.1f}x cpu "
          f"(max |diff| {np.abs(fast - ref).max():.1e})")  # fmt: skip

    zs, ys = synthetic(5000, 100, seed=1)
    get_calibrator("ts", device="cpu").fit(zs[:100], ys[:100])  # warm torch
    for name in ("ts", "vs_b", "ms_b", "dirichlet"):
        cal = get_calibrator(name, device="cpu")
        _, w, c = timed(cal.fit, zs, ys)
        print(f"{name} fit 5000 x 100 (cpu, study defaults): {w:.3f} s wall / {c:.3f} s cpu")


if __name__ == "__main__":
    main()
