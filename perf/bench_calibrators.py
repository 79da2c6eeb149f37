"""Speed of the calibrators at the study's sizes (prints figures; no assertions on time).

* isotonic one-vs-rest, 1,000 classes x 25,000 samples (ImageNet half): vectorised fit + apply
  against a per-class scikit-learn IsotonicRegression loop (target ratio >= 5x);
* histogram binning (20 bins, fit + apply + row renormalisation), same size, against three
  alternatives a user has (target >= 20x against the obvious one):
  - the study's implementation style: per class, per bin boolean masks
    ``(p >= a) & (p < b)``, ``theta = y[mask].mean()``, applied by the same masks;
  - netcal's ``HistogramBinning(bins=20)``, which is one-vs-rest for multiclass input;
  - a per-class numpy loop with ``np.digitize`` + ``np.bincount`` (a tuned loop);
* temperature scaling on 5,000 x 100 on CPU (target < 0.1 s), also with ``strong_wolfe``;
* vs_b / ms_b / dirichlet on 5,000 x 100 on CPU, with the number of objective evaluations,
  and the former configuration (all threads, denormals not flushed) for comparison.

Run: ``python perf/bench_calibrators.py [--classes 1000 --samples 25000 --repeats 3]``.
Every figure is the best of ``--repeats`` runs, wall-clock and CPU (process) time separately; on
a shared machine the CPU time is the steadier figure.  Baselines that take several seconds run
``--slow-repeats`` times (default 1; printed).  The array-level functions are timed on
precomputed probabilities (the softmax is common to all sides and excluded).
``torch.set_num_threads(2)`` is set first, as a user on this 2-core machine would have it.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def best_of(fn, repeats: int):
    """(result, best wall seconds, best CPU seconds) over ``repeats`` calls."""
    wall = cpu = float("inf")
    out = None
    for _ in range(max(1, repeats)):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        wall = min(wall, time.perf_counter() - w)
        cpu = min(cpu, time.process_time() - c)
    return out, wall, cpu


def fmt(wall: float, cpu: float) -> str:
    return f"{wall:7.3f} s wall / {cpu:7.3f} s cpu"


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


def _mask(col, edges, m):
    last = m == len(edges) - 2
    return (col >= edges[m]) & ((col <= 1.0) if last else (col < edges[m + 1]))


def hist_masks_fit(p, y, n_bins=20):
    """The study's style: per class, per bin, a boolean mask and the mean label inside it."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    theta = np.empty((p.shape[1], n_bins))
    for j in range(p.shape[1]):
        col, t = p[:, j], y == j
        for m in range(n_bins):
            mask = _mask(col, edges, m)
            theta[j, m] = t[mask].mean() if mask.any() else (m + 0.5) / n_bins
    return theta


def hist_masks_apply(theta, p):
    edges = np.linspace(0.0, 1.0, theta.shape[1] + 1)
    out = np.empty_like(p)
    for j in range(p.shape[1]):
        col = p[:, j]
        for m in range(theta.shape[1]):
            out[_mask(col, edges, m), j] = theta[j, m]
    return out / out.sum(axis=1, keepdims=True)


def hist_digitize_loop(p, y, n_bins=20):
    """A tuned per-class loop: digitize each column, bin means by bincount, renormalise."""
    edges = np.linspace(0, 1, n_bins + 1)
    edges[-1] = 1 + 1e-10
    out = np.empty_like(p)
    for j in range(p.shape[1]):
        idx = np.digitize(p[:, j], edges) - 1
        cnt = np.bincount(idx, minlength=n_bins)
        pos = np.bincount(idx, weights=(y == j), minlength=n_bins)
        theta = np.where(cnt > 0, pos / np.maximum(cnt, 1), (np.arange(n_bins) + 0.5) / n_bins)
        out[:, j] = theta[idx]
    return out / out.sum(axis=1, keepdims=True)


def hist_netcal(p, y, n_bins=20):
    from netcal.binning import HistogramBinning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return HistogramBinning(bins=n_bins).fit(p, y).transform(p)


class EvalCounter:
    """Count calls of ``torch.nn.functional.cross_entropy`` (one per objective evaluation)."""

    def __init__(self):
        import torch

        self.fn = torch.nn.functional
        self.orig = self.fn.cross_entropy
        self.n = 0

    def __enter__(self):
        def counted(*a, **k):
            self.n += 1
            return self.orig(*a, **k)

        self.fn.cross_entropy = counted
        return self

    def __exit__(self, *exc):
        self.fn.cross_entropy = self.orig


def bench_isotonic(p, y, r, slow_r):
    from calbench.calibrators.isotonic import apply_isotonic, fit_isotonic

    fast, w1, c1 = best_of(lambda: apply_isotonic(*fit_isotonic(p, y), p), r)
    ref, w2, c2 = best_of(lambda: sklearn_iso_loop(p, y), slow_r)
    print("isotonic one-vs-rest, fit + apply (no renormalisation on either side):")
    print(f"  calbench vectorised             {fmt(w1, c1)}")
    print(f"  per-class sklearn loop ({slow_r} run)  {fmt(w2, c2)}   "
          f"ratio {w2 / w1:5.1f}x wall, {c2 / c1:5.1f}x cpu (target >= 5x); "
          f"max |diff| {np.abs(fast - ref).max():.1e}")  # fmt: skip


def bench_histogram(p, y, r, slow_r):
    from calbench.calibrators.binning import apply_histogram_binning, fit_histogram_binning

    def ours():
        return apply_histogram_binning(fit_histogram_binning(p, y, 20), p, renormalise=True)

    fast, w1, c1 = best_of(ours, r)
    print("histogram binning one-vs-rest, 20 bins, fit + apply + renormalise rows:")
    print(f"  calbench                        {fmt(w1, c1)}")
    baselines = [
        ("study style: per-bin masks", lambda: hist_masks_apply(hist_masks_fit(p, y), p), slow_r),
        ("netcal HistogramBinning", lambda: hist_netcal(p, y), slow_r),
        ("tuned loop: digitize+bincount", lambda: hist_digitize_loop(p, y), r),
    ]
    for name, fn, reps in baselines:
        ref, w2, c2 = best_of(fn, reps)
        print(f"  {name:30s}  {fmt(w2, c2)}   ratio {w2 / w1:5.1f}x wall, {c2 / c1:5.1f}x cpu "
              f"({reps} run{'s' if reps > 1 else ''}); max |diff| {np.abs(fast - ref).max():.1e}")  # fmt: skip


def bench_scaling(r):
    import torch

    from calbench.calibrators import get_calibrator
    from calbench.calibrators.scaling import _fit_scaling
    from calbench.functional import log_softmax

    zs, ys = synthetic(5000, 100, seed=1)
    get_calibrator("ts", device="cpu").fit(zs[:100], ys[:100])  # warm torch
    zt, yt = torch.from_numpy(zs), torch.from_numpy(ys)
    print(
        f"\nscaling family on 5000 x 100 (cpu, float32), torch threads = {torch.get_num_threads()}:"
    )

    a = torch.ones(1, requires_grad=True)

    def one_eval():
        a.grad = None
        torch.nn.functional.cross_entropy(zt * a, yt).backward()

    for threads in (1, 2):
        torch.set_num_threads(threads)
        _, w, c = best_of(lambda: [one_eval() for _ in range(50)], r)
        print(f"  ts objective + gradient, {threads} thread{'s' if threads > 1 else ' '}: "
              f"{w / 50 * 1e6:8.0f} us wall / {c / 50 * 1e6:8.0f} us cpu per evaluation")  # fmt: skip
    torch.set_num_threads(2)

    rows = [
        ("ts", "ts", {}),
        ("ts", "ts", {"line_search": "strong_wolfe"}),
        ("vs_b", "vs_b", {}),
        ("ms_b", "ms_b", {}),
        ("dirichlet", "ms_b", {}),
    ]
    for name, kind, opts in rows:
        cal = get_calibrator(name, device="cpu", **opts)
        with EvalCounter() as count:
            _, w, c = best_of(lambda cal=cal: cal.fit(zs, ys), r)
        label = name + (f" ({', '.join(f'{k}={v}' for k, v in opts.items())})" if opts else "")
        print(f"  {label:30s} fit {fmt(w, c)}   {count.n // r:4d} evaluations per fit")
        if name == "dirichlet":
            continue
        p = cal.get_params()

        def former(p=p, x=zs, kind=kind):  # before: caller's threads, denormals not flushed
            return _fit_scaling(
                x, ys, kind, p["max_iter"], p["line_search"], p["dtype"], "cpu", 0.0, None
            )

        _, w, c = best_of(former, r)
        print(f"  {'  former settings (2 threads)':30s} fit {fmt(w, c)}")

    # Dirichlet: its former fit (200 s wall) is too slow to repeat here; time one objective
    # evaluation at the fitted parameters instead, where the denormals appear
    cal = get_calibrator("dirichlet", device="cpu").fit(zs, ys)
    x = torch.from_numpy(log_softmax(zs)).float()
    w_ = torch.from_numpy(cal.params_["W"]).requires_grad_(True)
    b_ = torch.from_numpy(cal.params_["b"]).requires_grad_(True)
    off = 1.0 - torch.eye(100)

    def dir_eval():
        w_.grad = b_.grad = None
        loss = torch.nn.functional.cross_entropy(x @ w_ + b_, yt)
        loss = loss + 1e-3 / 9900 * ((w_ * off) ** 2).sum() + 1e-5 * (b_**2).sum()
        loss.backward()

    logp = torch.log_softmax(x @ w_.detach() + b_.detach(), dim=1)
    share = float(((logp < -87.3) & (logp > -103.9)).float().mean())
    print(f"  dirichlet objective + gradient at the fit ({share:.1%} of the float32 softmax "
          "outputs are denormal):")  # fmt: skip
    for threads, ftz in ((2, False), (1, False), (2, True), (1, True)):
        torch.set_num_threads(threads)
        torch.set_flush_denormal(ftz)
        _, w, c = best_of(lambda: [dir_eval() for _ in range(10)], r)
        print(f"    {threads} thread{'s' if threads > 1 else ' '}, denormals "
              f"{'flushed' if ftz else 'kept   '}: {w / 10 * 1e3:7.2f} ms wall / "
              f"{c / 10 * 1e3:7.2f} ms cpu per evaluation")  # fmt: skip
    torch.set_flush_denormal(False)
    torch.set_num_threads(2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=25000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--slow-repeats", type=int, default=1)
    ap.add_argument("--only", choices=["iso", "hist", "scaling"], default=None)
    args = ap.parse_args()
    import scipy.optimize  # noqa: F401  (import costs excluded from every side)
    import sklearn.isotonic  # noqa: F401
    import torch

    torch.set_num_threads(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import netcal.binning  # noqa: F401

    from calbench.functional import softmax

    n, k = args.samples, args.classes
    z, y = synthetic(n, k)
    p = softmax(z)
    print(f"data: {n} x {k}, top-1 accuracy {np.mean(p.argmax(1) == y):.3f}; "
          f"best of {args.repeats} runs unless stated")  # fmt: skip
    if args.only in (None, "iso"):
        bench_isotonic(p, y, args.repeats, args.slow_repeats)
    if args.only in (None, "hist"):
        bench_histogram(p, y, args.repeats, args.slow_repeats)
    if args.only in (None, "scaling"):
        bench_scaling(args.repeats)


if __name__ == "__main__":
    main()
