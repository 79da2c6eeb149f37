"""Selective prediction: AURC and accuracy at a fixed coverage (pure functions).

Geifman & El-Yaniv 2017, "Selective classification for deep neural networks" (NeurIPS), sec. 2:
a classifier that abstains on its least confident inputs has, at coverage ``k / n`` (the ``k``
most confident samples kept, confidence = top-label probability), selective risk
``r(k) = errors among them / k``.  The area under the risk-coverage curve is (Geifman, Uziel &
El-Yaniv 2019, "Bias-reduced uncertainty estimation", eq. 2, the empirical form)::

    AURC = (1 / n) sum_{k=1}^{n} r(k).

Ties in confidence: the order inside a group of equal confidences is arbitrary, so ``r(k)`` is
its expectation over those orders: within a tie group of ``n_g`` samples with ``e_g`` errors
that starts after ``s`` samples, ``r(k) = (E_s + (k - s) e_g / n_g) / k`` (``E_s`` the errors
before the group).  The prediction is the argmax (first of tied maxima).

Facts for the registry: ``aurc`` ("AURC", scale 1000 as usually printed (x 10^3), 2 decimals,
lower is better, bootstrap over samples by recomputing); ``acc_at_90`` ("Acc@90% cov.", scale 100,
2 decimals, higher is better, bootstrap by recomputing).  No reference package is installed;
the tests check a brute force over all tie orders.
"""

from __future__ import annotations

import numpy as np

from calbench._checks import check_probs_labels


def _sorted_errors(probs, labels):
    p, y, top = check_probs_labels(probs, labels, with_argmax=True)
    conf = p[np.arange(y.size), top].astype(np.float64)
    err = (top != y).astype(np.float64)
    order = np.argsort(-conf, kind="stable")
    conf, err = conf[order], err[order]
    starts = np.flatnonzero(np.r_[True, conf[1:] != conf[:-1]])
    return err, starts


def expected_errors(probs, labels) -> np.ndarray:
    """``E_k`` (k = 1..n): expected errors among the ``k`` most confident samples, ties averaged."""
    err, starts = _sorted_errors(probs, labels)
    n = err.size
    ends = np.r_[starts[1:], n]
    group_err = np.add.reduceat(err, starts)
    before = np.r_[0.0, np.cumsum(group_err)[:-1]]
    g = np.repeat(np.arange(starts.size), ends - starts)
    k = np.arange(1, n + 1)
    return before[g] + (k - starts[g]) * group_err[g] / (ends - starts)[g]


def aurc(probs, labels) -> float:
    """Area under the risk-coverage curve (module docstring); a fraction in [0, 1]."""
    e = expected_errors(probs, labels)
    return float(np.mean(e / np.arange(1, e.size + 1)))


def accuracy_at_coverage(probs, labels, coverage: float = 0.9) -> float:
    """Accuracy on the ``ceil(coverage n)`` most confident samples (ties averaged)."""
    if isinstance(coverage, bool) or not isinstance(coverage, int | float) or not 0 < coverage <= 1:
        raise ValueError(f"coverage must be a number in (0, 1], got {coverage!r}")
    e = expected_errors(probs, labels)
    m = max(1, int(np.ceil(coverage * e.size - 1e-9)))
    return float(1.0 - e[m - 1] / m)


def acc_at_90(probs, labels) -> float:
    """:func:`accuracy_at_coverage` at 90% coverage."""
    return accuracy_at_coverage(probs, labels, 0.9)
