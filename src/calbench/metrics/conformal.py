"""Split-conformal prediction sets at 90% coverage: LAC and APS (pure functions).

LAC (least ambiguous set-valued classifier; Sadinle, Lei & Wasserman 2019, "Least ambiguous
set-valued classifiers with bounded error levels", JASA, eq. 6 / sec. 4.1): score
``s(x, y) = 1 - p_y``, set ``{j : 1 - p_j <= q}``.
APS (adaptive prediction sets; Romano, Sesia & Candès 2020, "Classification with valid and
adaptive coverage", NeurIPS, eq. 5 without the randomisation, ``u = 1``): score = total
probability of the classes ranked at or above ``y`` (descending probability, ties by class
index), set = every class whose own score is ``<= q``.
Both: ``q`` is the ``ceil((m + 1)(1 - alpha))``-th smallest calibration score of ``m``
(Vovk et al. 2005; Angelopoulos & Bates 2023, eq. 1), infinite (every class) when that exceeds
``m``.

Split inside one ``metric(probs, labels)`` call: a fixed seeded half split of the evaluated set
(``numpy.random.default_rng(0).permutation(n)``: the first ``n // 2`` calibrate, the rest are
evaluated).  It is valid because the split does not look at the data: when the evaluated samples
are exchangeable, the calibration and evaluation halves are exchangeable too, so the marginal
coverage on the evaluation half is at least ``1 - alpha`` (and below ``1 - alpha + 1/(m+1)``
without ties).  The same seed gives the same halves for every calibrator of a model, so set sizes
compare on identical samples.

Facts for the registry: ``lac_coverage``, ``lac_size``, ``aps_coverage``, ``aps_size`` (labels
"LAC cov.", "LAC size", "APS cov.", "APS size"); coverage scale 100, 2 decimals, higher is better
only as far as it reaches 90% (report it, don't rank on it); size scale 1, 3 decimals, lower is
better; bootstrap intervals by recomputing on resamples; no reference in the tests (MAPIE's
split LAC/APS use the same quantile rule but their own API), checked against a brute force.
"""

from __future__ import annotations

import numpy as np

from calbench._checks import check_choice, check_probs_labels

METHODS = ("lac", "aps")
ALPHA = 0.1
SEED = 0


def conformal_quantile(scores: np.ndarray, alpha: float) -> float:
    """The ``ceil((m + 1)(1 - alpha))``-th smallest of ``m`` scores (inf when beyond ``m``)."""
    m = scores.size
    r = int(np.ceil((m + 1) * (1 - alpha) - 1e-12))
    return float(np.inf) if r > m else float(np.partition(scores, r - 1)[r - 1])


def class_scores(p: np.ndarray, method: str) -> np.ndarray:
    """(N, K) nonconformity score of every class for every sample."""
    if method == "lac":
        return 1.0 - p
    order = np.argsort(-p, axis=1, kind="stable")
    cum = np.cumsum(np.take_along_axis(p, order, axis=1), axis=1)
    out = np.empty_like(cum)
    np.put_along_axis(out, order, cum, axis=1)
    return out


def split_halves(n: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Calibration and evaluation indices of the fixed seeded half split (module docstring)."""
    perm = np.random.default_rng(seed).permutation(n)
    return perm[: n // 2], perm[n // 2 :]


def conformal_sets(probs, labels, method: str = "lac", alpha: float = ALPHA, seed: int = SEED):
    """``(coverage, mean set size)`` on the evaluation half (module docstring)."""
    check_choice(method, "method", METHODS)
    if not (isinstance(alpha, float) and 0 < alpha < 1):
        raise ValueError(f"alpha must be a float in (0, 1), got {alpha!r}")
    p, y = check_probs_labels(probs, labels)
    if y.size < 2:
        raise ValueError(f"conformal sets need at least 2 samples (one per half), got {y.size}")
    return _sets(np.asarray(p, dtype=np.float64), y, method, alpha, seed)


def _sets(p: np.ndarray, y: np.ndarray, method: str, alpha: float, seed: int):
    cal, ev = split_halves(y.size, seed)
    s = class_scores(p, method)
    q = conformal_quantile(s[cal, y[cal]], alpha)
    sets = s[ev] <= q
    return float(np.mean(sets[np.arange(ev.size), y[ev]])), float(np.mean(sets.sum(axis=1)))


def lac_coverage(probs, labels) -> float:
    return conformal_sets(probs, labels, "lac")[0]


def lac_size(probs, labels) -> float:
    return conformal_sets(probs, labels, "lac")[1]


def aps_coverage(probs, labels) -> float:
    return conformal_sets(probs, labels, "aps")[0]


def aps_size(probs, labels) -> float:
    return conformal_sets(probs, labels, "aps")[1]


def conformal_values(p: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Coverage and set size of both methods on validated ``(p, y)``, by registry name
    (``Metric.joint``): each equals its function's value exactly."""
    if y.size < 2:
        raise ValueError(f"conformal sets need at least 2 samples (one per half), got {y.size}")
    p = np.asarray(p, dtype=np.float64)
    out = {}
    for method in METHODS:
        out[f"{method}_coverage"], out[f"{method}_size"] = _sets(p, y, method, ALPHA, SEED)
    return out
