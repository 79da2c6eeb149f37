"""Paired tests of two calibrators on the same test samples: McNemar's exact test, the paired
t-test, Wilcoxon's signed-rank test, the sign-flip test, and the registry's choice among them
and the unbiased errors' jackknife test (:func:`paired_test`)."""

from __future__ import annotations

import math

import numpy as np

from calbench.metrics import PAIRED_TESTS
from calbench.stats import common
from calbench.stats.common import PairedTest, paired_inputs, registry_entry, resolve_metric
from calbench.stats.signed_rank import signed_rank_test
from calbench.stats.ub import ub_paired_test

#: Paired tests of :func:`paired_test` (:data:`calbench.metrics.PAIRED_TESTS`).
PAIRED_TEST_NAMES = PAIRED_TESTS


def permutations_for(family_size: int, alpha: float = 0.05, factor: float = 4.0) -> int:
    """Sign-flips ``B`` that give a p-value resolution well below a Holm-corrected threshold.

    The sign-flip p-value is at least ``1 / (B + 1)``, so Holm over ``m`` tests can only reject
    when ``m / (B + 1) <= alpha``; ``B = ceil(factor m / alpha) - 1`` puts the smallest
    attainable adjusted p-value ``factor`` times below ``alpha`` (``m = 9``, ``alpha = 0.05``:
    ``B = 719``, smallest adjusted p 0.0125). A larger factor buys little power (the p-values
    that decide lie near ``alpha / m``, far above the resolution) at a proportional cost.
    """
    if isinstance(family_size, bool) or not isinstance(family_size, int | np.integer):
        raise ValueError(f"family_size must be an integer >= 1, got {family_size!r}")
    if family_size < 1:
        raise ValueError(f"family_size must be an integer >= 1, got {family_size!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), e.g. 0.05, got {alpha!r}")
    return max(1, math.ceil(factor * family_size / alpha) - 1)


def mcnemar_exact(correct_a, correct_b) -> PairedTest:
    """McNemar's (1947) exact test of equal accuracy on the same samples.

    With ``n01`` the samples ``a`` gets right and ``b`` wrong and ``n10`` the reverse, under
    H0 ``n01 ~ Binomial(n01 + n10, 1/2)``; the two-sided p-value is
    ``min(1, 2 P(X <= min(n01, n10)))`` (Dietterich 1998, sec. 3.5; Fagerland, Lydersen &
    Laake 2013, eq. 2). Concordant pairs carry no information; no discordant pair gives p = 1.
    """
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("correct_a and correct_b must be 1-D boolean arrays of the same length")
    n01 = int(np.sum(a & ~b))
    n10 = int(np.sum(~a & b))
    n = n01 + n10
    diff = (n01 - n10) / a.shape[0] if a.shape[0] else 0.0
    if n == 0:
        return PairedTest(diff, 0.0, 1.0, "mcnemar_exact", 1.0)
    p = min(1.0, _binomial_half_cdf_doubled(min(n01, n10), n))
    return PairedTest(diff, float(n01), p, "mcnemar_exact", min(1.0, 2.0 * 0.5**n))


def _binomial_half_cdf_doubled(k: int, n: int) -> float:
    """``2 P(X <= k)`` for ``X ~ Binomial(n, 1/2)``, exactly: ``2 sum_{i <= k} C(n, i) / 2^n``
    in integers, rounded once to a float."""
    term, total = 1, 1  # C(n, 0)
    for i in range(k):
        term = term * (n - i) // (i + 1)
        total += term
    return 2 * total / 2**n


def paired_t(x_a, x_b) -> PairedTest:
    """Paired t-test of equal means of per-sample values (e.g. NLL or Brier terms, Student
    1908): ``t = mean(d) / (sd(d) / sqrt(n))`` with ``d = x_a - x_b``, two-sided p from
    ``t_{n-1}``. Differences that are all equal give p = 1 (all 0) or 0 (a constant shift)."""
    from scipy.special import stdtr  # t.sf(x, df) of scipy.stats is stdtr(df, -x), bit for bit

    d = np.asarray(x_a, dtype=np.float64) - np.asarray(x_b, dtype=np.float64)
    n = d.shape[0]
    if n < 2:
        raise ValueError(f"the paired t-test needs >= 2 samples, got {n}")
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return PairedTest(
            mean,
            0.0 if mean == 0 else math.copysign(math.inf, mean),
            1.0 if mean == 0 else 0.0,
            "paired_t",
            0.0,
        )
    t = mean / (sd / math.sqrt(n))
    return PairedTest(mean, t, float(min(1.0, 2.0 * stdtr(n - 1, -abs(t)))), "paired_t", 0.0)


def wilcoxon_signed_rank(x_a, x_b) -> PairedTest:
    """Wilcoxon (1945) signed-rank test of per-sample differences ``d = x_a - x_b``, normal
    approximation with the tie correction (zero differences dropped, Wilcoxon's rule; ties
    share mean ranks; Hollander, Wolfe & Chicken 2014, sec. 3.1, eq. 3.12 without continuity
    correction; :func:`calbench.stats.signed_rank.signed_rank_test`). ``statistic`` is ``W+``,
    the rank sum of the positive differences; ``difference`` the mean of ``d``."""
    d = np.asarray(x_a, dtype=np.float64) - np.asarray(x_b, dtype=np.float64)
    mean = float(d.mean()) if d.size else 0.0
    test = signed_rank_test(d, method="normal")
    return PairedTest(mean, test.statistic, test.p_value, "wilcoxon", 0.0)


def _flip_values(metric, pa, pb, y, dtype):
    """``(estimate_a, estimate_b, f)`` where ``f(s)`` gives ``metric`` of both mixtures for an
    ``(r, N)`` 0/1 array ``s`` of flips (1: the sample's outputs are swapped) as two ``(r,)``
    arrays: side A takes ``b``'s outputs where ``s`` is 1, side B ``a``'s."""
    stats = getattr(metric, "stats", None)
    reduce = getattr(metric, "reduce", None)
    linear = getattr(metric, "linear", None)
    if linear is not None:
        sums_a, from_sums = linear(pa, y, dtype)
        sums_b, _ = linear(pb, y, dtype)
        est_a = float(np.asarray(from_sums(*sums_a())).reshape(-1)[0])
        est_b = float(np.asarray(from_sums(*sums_b())).reshape(-1)[0])

        # side B's sums are the two full sums minus side A's (the weights add up to one)
        full = [u + v for u, v in zip(sums_a(), sums_b(), strict=True)]

        def f(s):
            keep, swap = sums_a(1.0 - s), sums_b(s)
            mixed_a = [u + v for u, v in zip(keep, swap, strict=True)]
            mixed_b = [t - u for t, u in zip(full, mixed_a, strict=True)]
            return np.asarray(from_sums(*mixed_a)), np.asarray(from_sums(*mixed_b))

        return est_a, est_b, f
    if stats is not None and reduce is not None:
        xa, xb = stats(pa, y, dtype), stats(pb, y, dtype)
        est_a, est_b = float(reduce(*xa)), float(reduce(*xb))

        def f(s):
            out_a, out_b = [], []
            for row in s.astype(bool):
                out_a.append(reduce(*(np.where(row, v, u) for u, v in zip(xa, xb, strict=True))))
                out_b.append(reduce(*(np.where(row, u, v) for u, v in zip(xa, xb, strict=True))))
            return np.asarray(out_a, dtype=np.float64), np.asarray(out_b, dtype=np.float64)

        return est_a, est_b, f
    est_a, est_b = float(metric(pa, y)), float(metric(pb, y))

    def f(s):
        out_a, out_b = [], []
        for row in s.astype(bool)[:, :, None]:
            out_a.append(float(metric(np.where(row, pb, pa), y)))
            out_b.append(float(metric(np.where(row, pa, pb), y)))
        return np.asarray(out_a), np.asarray(out_b)

    return est_a, est_b, f


#: the flips of the last sign-flip test, kept while they fit in this many entries (256 MiB of
#: float64): every comparison of a model uses the same seed, samples and number of flips
_FLIP_CACHE_ENTRIES = 2**25
_FLIPS: dict = {}


def _flip_chunks(seed: int, n: int, n_flips: int):
    """The ``(r, n)`` 0/1 float64 chunks of ``n_flips`` random flips of ``n`` samples from
    ``default_rng(seed)``, drawn as before (``rng.random((r, n)) < 0.5`` chunk by chunk) and
    stored column-major, which the sparse bin sums read without a transposed copy. The chunks
    of the last call are kept (up to :data:`_FLIP_CACHE_ENTRIES`): a model's comparisons share
    them instead of drawing the same flips again."""
    key = (seed, n, n_flips)
    if key in _FLIPS:
        return _FLIPS[key]
    chunk = max(1, min(n_flips, common.CHUNK_ENTRIES // max(n, 1) // 4))

    def draw():
        rng = np.random.default_rng(seed)
        for start in range(0, n_flips, chunk):
            r = min(chunk, n_flips - start)
            yield np.asfortranarray(rng.random((r, n)) < 0.5, dtype=np.float64)

    if n * n_flips > _FLIP_CACHE_ENTRIES:
        return draw()
    chunks = list(draw())
    for c in chunks:
        c.setflags(write=False)
    _FLIPS.clear()
    _FLIPS[key] = chunks
    return chunks


def sign_flip_test(
    metric, probs_a, probs_b, labels, n_permutations: int = 1999, seed: int = 0
) -> PairedTest:
    """Paired sign-flip (randomization) test of ``metric(a) = metric(b)`` for any metric.

    H0: on every sample, the two calibrators' outputs are exchangeable. Each of ``B`` random
    flips swaps the outputs of a random half of the samples (each sample independently with
    probability 1/2) and recomputes ``d* = metric(mix_a) - metric(mix_b)``; the two-sided
    p-value is ``(1 + #{|d*| >= |d|}) / (B + 1)`` (Good 2005, ch. 3; Phipson & Smyth 2010,
    eq. 2: exact, never 0). Binned errors whose bins do not move under the swap mix the bin
    sums (``Metric.linear``), means mix per-sample arrays (``Metric.stats``), any other
    callable is re-evaluated on the mixed ``(N, K)`` arrays. Choose ``B`` with
    :func:`permutations_for` so the resolution suits the multiple-testing correction.
    """
    metric = resolve_metric(metric)
    if (
        isinstance(n_permutations, bool)
        or not isinstance(n_permutations, int | np.integer)
        or n_permutations < 1
    ):
        raise ValueError(f"n_permutations must be an integer >= 1, got {n_permutations!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    pa, pb, y = paired_inputs(probs_a, probs_b, labels)
    dtype = getattr(probs_a, "dtype", None)
    est_a, est_b, f = _flip_values(metric, pa, pb, y, dtype)
    d = est_a - est_b
    exceed = 0
    tol = 1e-12 * max(1.0, abs(d))
    for s in _flip_chunks(int(seed), y.shape[0], int(n_permutations)):
        va, vb = f(s)
        exceed += int(np.sum(np.abs(va - vb) >= abs(d) - tol))
    p = (1 + exceed) / (int(n_permutations) + 1)
    return PairedTest(
        d, d, float(p), "sign_flip", 1.0 / (int(n_permutations) + 1), int(n_permutations)
    )


def paired_test(
    metric,
    probs_a,
    probs_b,
    labels,
    *,
    test: str | None = None,
    n_permutations: int = 1999,
    seed: int = 0,
) -> PairedTest:
    """Two-sided paired test of ``metric(a) - metric(b)`` with the metric's own test.

    ``test`` (default: the registry's ``Metric.paired_test``; ``"sign_flip"`` for a plain
    callable): ``"mcnemar_exact"`` (accuracy), ``"paired_t"`` or ``"wilcoxon"`` (means of
    per-sample values: NLL, Brier score) or ``"sign_flip"`` (any metric; ``n_permutations``
    flips, ``seed``). The per-sample tests need a metric with one per-sample array
    (``Metric.is_mean``).
    """
    if test is None:
        entry = registry_entry(metric)
        test = entry.paired_test if entry is not None and entry.paired_test else "sign_flip"
    if test not in PAIRED_TEST_NAMES:
        raise ValueError(f"test must be one of {list(PAIRED_TEST_NAMES)} or None, got {test!r}")
    if test == "sign_flip":
        return sign_flip_test(metric, probs_a, probs_b, labels, n_permutations, seed)
    if test == "jackknife_z":
        return ub_paired_test(metric, probs_a, probs_b, labels)
    m = resolve_metric(metric)
    if not getattr(m, "is_mean", False) or getattr(m, "stats", None) is None:
        raise ValueError(
            f"the {test} test needs a mean of one per-sample array (Metric.is_mean); "
            "use test='sign_flip' for this metric"
        )
    pa, pb, y = paired_inputs(probs_a, probs_b, labels)
    dtype = getattr(probs_a, "dtype", None)
    (xa,), (xb,) = m.stats(pa, y, dtype), m.stats(pb, y, dtype)
    return per_sample_test(test, xa, xb)


def per_sample_test(test: str, xa: np.ndarray, xb: np.ndarray) -> PairedTest:
    """``test`` (McNemar, paired t or Wilcoxon) of two calibrators' per-sample values."""
    if test == "mcnemar_exact":
        if not (np.isin(xa, (0.0, 1.0)).all() and np.isin(xb, (0.0, 1.0)).all()):
            raise ValueError("McNemar's test needs a 0/1 per-sample score such as accuracy")
        return mcnemar_exact(xa > 0.5, xb > 0.5)
    if test == "paired_t":
        return paired_t(xa, xb)
    return wilcoxon_signed_rank(xa, xb)
