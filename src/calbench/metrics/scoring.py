"""Accuracy and proper scoring rules: accuracy, negative log-likelihood, Brier score.

The study (Vasilev, MSU 2021) defines NLL in eq. 9 and the Brier score in eq. 10; both are
averages over samples, so each has a per-sample form used by the bootstrap.
"""

from __future__ import annotations

import numpy as np

from calbench._checks import check_choice, check_probs_labels, numpy_dtype

#: Clipping bound of scikit-learn <= 1.0 ``log_loss`` (its ``eps=1e-15`` default).
STUDY_EPS = 1e-15
NLL_RULES = ("study", "modern")
_BLOCK = 4096  # rows per block for full-array passes


def accuracy(probs, labels) -> float:
    """Top-1 accuracy: share of samples whose argmax equals the label (a fraction)."""
    p, y = check_probs_labels(probs, labels)
    return float(np.mean(np.argmax(p, axis=1) == y))


def nll_per_sample(p: np.ndarray, y: np.ndarray, rule: str = "study", dtype=None) -> np.ndarray:
    """Per-sample negative log-likelihood ``-log q_{i, y_i}`` (validated input, float64 out).

    ``rule="study"``: q = rows of ``clip(p, 1e-15, 1 - 1e-15)`` renormalised to sum 1 (the
    scikit-learn <= 1.0 ``log_loss`` the study used). ``rule="modern"``: q = ``clip(p, eps,
    1 - eps)`` without renormalisation, eps the machine epsilon of ``dtype`` (float32 input:
    1.19e-7, anything else: float64's 2.2e-16), as scikit-learn >= 1.5 does.
    """
    n = p.shape[0]
    py = p[np.arange(n), y].astype(np.float64)
    if rule == "modern":
        eps = np.finfo(np.float32 if numpy_dtype(dtype) == np.float32 else np.float64).eps
        return -np.log(np.clip(py, eps, 1.0 - eps))
    # row sums of clip(p): the plain row sums plus the (sparse) changes made by clipping
    k = p.shape[1]
    row = p.sum(axis=1, dtype=np.float64)
    flat = p.reshape(-1) if p.flags.c_contiguous else np.ascontiguousarray(p).reshape(-1)
    for idx, bound in (
        (np.flatnonzero(p < STUDY_EPS), STUDY_EPS),
        (np.flatnonzero(p > 1.0 - STUDY_EPS), 1.0 - STUDY_EPS),
    ):
        if idx.size:
            row += np.bincount(idx // k, weights=bound - flat[idx], minlength=n)
    return -np.log(np.clip(py, STUDY_EPS, 1.0 - STUDY_EPS) / row)


def nll(probs, labels, rule: str = "study") -> float:
    """Mean negative log-likelihood with natural log (the study's eq. 9).

    ``rule="study"`` reproduces ``sklearn.metrics.log_loss`` as it was up to scikit-learn 1.0
    (the study's version): clip every probability to [1e-15, 1 - 1e-15], renormalise each row
    to sum 1, average ``-log`` of the true class's probability. A true-class probability of 0
    therefore costs about ``15 ln 10 ~= 34.54`` nats.
    ``rule="modern"`` reproduces current scikit-learn: clip to [eps, 1 - eps] with eps the
    input dtype's machine epsilon (1.19e-7 for float32, capping a sample at ~15.9 nats), no
    renormalisation. Computed in float64 (scikit-learn computes float32 input in float32, so
    the two agree to ~1e-7 relative there).
    """
    check_choice(rule, "rule", NLL_RULES)
    dtype = getattr(probs, "dtype", None)
    p, y = check_probs_labels(probs, labels)
    return float(np.mean(nll_per_sample(p, y, rule, dtype)))


def brier_per_sample(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-sample ``sum_k (p_ik - 1[y_i == k])^2`` (validated input, float64 out)."""
    n = p.shape[0]
    sq = np.empty(n, dtype=np.float64)
    for i in range(0, n, _BLOCK):
        blk = p[i : i + _BLOCK]
        if blk.dtype != np.float64:
            blk = blk.astype(np.float64)
        sq[i : i + _BLOCK] = np.einsum("ij,ij->i", blk, blk)
    py = p[np.arange(n), y].astype(np.float64)
    # sum_k p_k^2 - p_y^2 + (1 - p_y)^2, clamped at 0 against rounding
    return np.maximum(sq - py * py + (1.0 - py) ** 2, 0.0)


def brier(probs, labels) -> float:
    """Multiclass Brier score, the study's eq. 10 (Brier 1950):
    ``(1/N) sum_i sum_k (p_ik - 1[y_i == k])^2``, in [0, 2] (not divided by K)."""
    p, y = check_probs_labels(probs, labels)
    return float(np.mean(brier_per_sample(p, y)))
