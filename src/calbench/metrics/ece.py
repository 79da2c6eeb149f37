"""Binned calibration errors: ECE, MCE, classwise ECE, adaptive ECE, KS error, debiased and
marginal calibration error.

All functions take probabilities ``(N, K)`` and integer labels ``(N,)`` and return a fraction
(the study prints ECE, MCE and cwECE multiplied by 100). Bin rules are those of
:mod:`calbench.metrics.binning`: ``"width"`` is the study's ``[a, b)`` equal-width grid,
``"mass"`` the equal-mass rule of Kumar et al. (2019). Empty bins contribute 0.

Notation: bin b holds ``n_b`` of the N samples, ``conf_b`` is their mean confidence and
``acc_b`` the mean of the target (top-label correctness, or ``1[y == j]`` one-vs-rest).
"""

from __future__ import annotations

import numpy as np

from calbench._checks import check_choice, check_n_bins, check_probs_labels
from calbench.metrics.binning import (
    BINNINGS,
    ECE_BINS,
    bin_ids,
    bin_sums,
    onevsrest_binner,
    top_label,
    width_bin_ids,
    width_edges,
)

NORMS = ("l1", "l2", "max")


def check_power(p) -> float:
    if isinstance(p, bool) or not isinstance(p, int | float | np.integer | np.floating):
        raise ValueError(f"p must be a number >= 1, got {p!r}")
    if not np.isfinite(p) or p < 1:
        raise ValueError(f"p must be a finite number >= 1 (1 = l1, 2 = l2), got {p!r}")
    return float(p)


def _gaps(count: np.ndarray, sum_x: np.ndarray, sum_t: np.ndarray) -> np.ndarray:
    """|acc_b - conf_b| per bin, 0 for empty bins (works on any leading shape)."""
    safe = np.maximum(count, 1)
    return np.where(count > 0, np.abs(sum_t / safe - sum_x / safe), 0.0)


def error_from_sums(
    count: np.ndarray, sum_x: np.ndarray, sum_t: np.ndarray, n: int, norm: str = "l1"
) -> float:
    """Binned calibration error from per-bin sums (weights ``n_b / n``).

    ``"l1"``: sum_b w_b |acc_b - conf_b| (Guo et al. 2017, eq. 3; the study's eq. 7);
    ``"l2"``: sqrt(sum_b w_b (acc_b - conf_b)^2) (Karandikar et al. 2021, eq. 6 with p = 2);
    ``"max"``: max_b |acc_b - conf_b| (MCE, Guo et al. 2017, eq. 5; empty bins count as 0).
    """
    gap = _gaps(count, sum_x, sum_t)
    w = count / n
    if norm == "l1":
        return float(np.dot(w, gap))
    if norm == "l2":
        return float(np.sqrt(np.dot(w, gap * gap)))
    return float(gap.max())


def errors_from_sums(count, sum_x, sum_t, total, norm: str = "l1") -> np.ndarray:
    """:func:`error_from_sums` over leading axes: ``count``, ``sum_x``, ``sum_t`` of shape
    ``(..., B)`` and ``total`` (the sample count, ``(...)``) give an array ``(...)``."""
    gap = _gaps(count, sum_x, sum_t)
    if norm == "max":
        return gap.max(axis=-1)
    w = count / np.asarray(total, dtype=np.float64)[..., None]
    if norm == "l1":
        return np.sum(w * gap, axis=-1)
    return np.sqrt(np.sum(w * gap * gap, axis=-1))


def calibration_error_1d(
    x: np.ndarray,
    target: np.ndarray,
    n_bins: int = ECE_BINS,
    norm: str = "l1",
    binning: str = "width",
) -> float:
    """Binned calibration error of confidences ``x`` against 0/1 ``target`` (validated arrays)."""
    ids, edges = bin_ids(x, n_bins, binning)
    n_used = edges.shape[0] - 1
    count, sum_x, sum_t = bin_sums(ids, x, target, n_used)
    return error_from_sums(count, sum_x, sum_t, x.shape[0], norm)


def ece(probs, labels, n_bins: int = ECE_BINS, norm: str = "l1", binning: str = "width") -> float:
    """Top-label expected calibration error (Guo et al. 2017, eq. 3; the study's eq. 7).

    ``ECE = sum_b (n_b / N) |acc_b - conf_b|`` over the bins of the top-label confidence, with
    ``acc_b`` the share of correct argmax predictions. Defaults are the study's: 15 equal-width
    bins ``[a, b)`` on ``linspace(0, 1, 16)``, confidence 1 in the last bin, 0 in bin 0, empty
    bins contribute 0. ``norm="l2"`` is the l2 ECE of Karandikar et al. (2021, eq. 6, p = 2),
    ``norm="max"`` the MCE. ``binning="mass"`` uses equal-mass bins (see
    :mod:`calbench.metrics.binning` for how ties and N not divisible by M are split).
    """
    p, y, pred = check_probs_labels(probs, labels, with_argmax=True)
    n_bins = check_n_bins(n_bins)
    check_choice(norm, "norm", NORMS)
    check_choice(binning, "binning", BINNINGS)
    conf, correct = top_label(p, y, pred)
    return calibration_error_1d(conf, correct, n_bins, norm, binning)


def mce(probs, labels, n_bins: int = ECE_BINS) -> float:
    """Maximum calibration error (Guo et al. 2017, eq. 5): max over the 15 study bins of
    |acc_b - conf_b|; empty bins contribute 0."""
    return ece(probs, labels, n_bins=n_bins, norm="max")


def adaptive_ece(probs, labels, n_bins: int = ECE_BINS) -> float:
    """Adaptive (equal-mass) l1 ECE (Nguyen & O'Connor 2015; Mukhoti et al. 2020, "AdaECE").

    Same as ``ece(..., binning="mass")``. Mukhoti et al.'s code places bin edges by linear
    interpolation of the sorted confidences; here the edges are Kumar et al.'s midpoints
    (:mod:`calbench.metrics.binning`), which keep tied confidences in one bin. Both give bins of
    N/M samples up to ties and rounding.
    """
    return ece(probs, labels, n_bins=n_bins, norm="l1", binning="mass")


def classwise_binner(p: np.ndarray, y: np.ndarray, n_bins: int):
    """Prepare the one-vs-rest equal-width binning of every class (validated input).

    Returns ``sums(weights=None) -> (count, sum_conf, sum_label)``, each ``(K, n_bins)``, for
    column j binned against ``1[y == j]``; ``weights`` are per-sample multiplicities (a
    bootstrap resample is ``np.bincount(idx, minlength=N)``), ``None`` meaning all ones; an
    ``(r, N)`` array of ``r`` resamples gives ``(r, K, n_bins)`` sums
    (:func:`calbench.metrics.binning.onevsrest_binner`).

    Only entries >= 1/M (at most M per row, usually one or two) are binned explicitly; bin 0 of
    each class is the column total minus the other bins, so the cost is a few passes over the
    array and no ``(N, K)`` integer temporaries; a chunk of resamples costs one matrix product.
    """
    edges = width_edges(n_bins)
    threshold = float(edges[1]) if n_bins > 1 else 1.0
    return onevsrest_binner(p, y, n_bins, lambda v: width_bin_ids(v, n_bins), threshold)


def classwise_sums(
    p: np.ndarray, y: np.ndarray, n_bins: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One-vs-rest equal-width bin sums ``(count, sum_conf, sum_label)``, each ``(K, n_bins)``
    (validated input; see :func:`classwise_binner`)."""
    return classwise_binner(p, y, n_bins)()


def classwise_from_sums(count, sum_conf, sum_label) -> float:
    """cwECE (eq. 8) from one-vs-rest bin sums ``(K, B)`` (a float), or ``(r, K, B)`` sums of
    ``r`` resamples (an ``(r,)`` array)."""
    gap = _gaps(count, sum_conf, sum_label)
    n = count[..., 0, :].sum(axis=-1)[..., None]
    return _scalar(np.mean(np.sum(count * gap, axis=-1) / n, axis=-1))


def _scalar(x):
    """A 0-d result as a float; arrays (one value per resample) unchanged."""
    return float(x) if np.ndim(x) == 0 else x


def marginal_from_sums(count, sum_conf, sum_label, power=2.0, debiased=False) -> float:
    """Marginal l_p calibration error from one-vs-rest bin sums ``(K, B)`` (a float), or
    ``(r, K, B)`` sums of ``r`` resamples (an ``(r,)`` array)."""
    n = count[..., 0, :].sum(axis=-1)[..., None, None]
    if debiased:
        per_class = np.maximum(_debiased_sq(count, sum_conf, sum_label, n), 0.0)
    else:
        gap = _gaps(count, sum_conf, sum_label)
        per_class = np.sum(count / n * gap**power, axis=-1)
    return _scalar(np.mean(per_class, axis=-1) ** (1.0 / power))


def classwise_ece(probs, labels, n_bins: int = ECE_BINS) -> float:
    """Classwise ECE, the study's eq. 8 (after Kull et al. 2019):
    ``cwECE = (1/K) sum_j sum_b (|B_b^j| / N) |acc_b^j - conf_b^j|``.

    For each class j, column j of all N samples is binned (15 equal-width ``[a, b)`` bins)
    against ``1[y == j]`` with weights ``count / N``; the unweighted mean is taken over all K
    classes, classes absent from ``labels`` included.
    """
    p, y = check_probs_labels(probs, labels)
    return classwise_value(p, y, check_n_bins(n_bins))


def classwise_value(p: np.ndarray, y: np.ndarray, n_bins: int = ECE_BINS) -> float:
    """:func:`classwise_ece` of validated arrays."""
    return classwise_from_sums(*classwise_sums(p, y, n_bins))


def _debiased_sq(count: np.ndarray, sum_x: np.ndarray, sum_t: np.ndarray, n: int) -> np.ndarray:
    """Kumar et al. (2019) unbiased estimate of the squared l2 error, summed over the last axis:
    ``sum_b (n_b/N) [(acc_b - conf_b)^2 - acc_b (1 - acc_b) / (n_b - 1)]`` over bins with
    ``n_b >= 2`` (bins with fewer samples contribute 0)."""
    ok = count >= 2
    safe = np.maximum(count, 2)
    acc = sum_t / np.maximum(count, 1)
    gap = _gaps(count, sum_x, sum_t)
    term = np.where(ok, gap * gap - acc * (1.0 - acc) / (safe - 1.0), 0.0)
    return np.sum(count / n * term, axis=-1)


def debiased_from_values(
    x: np.ndarray, target: np.ndarray, n_bins: int = ECE_BINS, binning: str = "mass"
) -> float:
    """Debiased l2 calibration error of confidences ``x`` against 0/1 ``target``."""
    ids, edges = bin_ids(x, n_bins, binning)
    count, sum_x, sum_t = bin_sums(ids, x, target, edges.shape[0] - 1)
    return float(np.sqrt(max(float(_debiased_sq(count, sum_x, sum_t, x.shape[0])), 0.0)))


def debiased_ece(probs, labels, n_bins: int = ECE_BINS, binning: str = "mass") -> float:
    """Debiased top-label l2 calibration error (Kumar, Liang & Ma 2019, "Verified uncertainty
    calibration", sec. 5, the estimator of their Theorem 5.4 / ``unbiased_l2_ce``).

    ``sqrt(max(0, sum_b (n_b/N) [(acc_b - conf_b)^2 - acc_b (1 - acc_b) / (n_b - 1)]))``:
    the per-bin variance term removes the upward bias of the plug-in squared error. Bins with
    fewer than 2 samples contribute 0. Default bins are 15 equal-mass bins, as in the
    authors' ``get_top_calibration_error`` for continuous (scaling-method) outputs; that
    function switches to one bin per distinct value when outputs are discrete, which is not
    reproduced here.
    """
    p, y, pred = check_probs_labels(probs, labels, with_argmax=True)
    n_bins = check_n_bins(n_bins)
    check_choice(binning, "binning", BINNINGS)
    conf, correct = top_label(p, y, pred)
    return debiased_from_values(conf, correct, n_bins, binning)


def marginal_ce(
    probs,
    labels,
    n_bins: int = ECE_BINS,
    p: float = 2,
    debiased: bool = False,
    binning: str = "width",
) -> float:
    """Marginal (classwise) l_p calibration error of Kumar, Liang & Ma (2019, sec. 2):
    ``(1/K sum_j CE_j^p)^(1/p)`` with ``CE_j^p = sum_b (n_b/N) |acc_b^j - conf_b^j|^p`` for
    column j binned against ``1[y == j]``, all K classes included.

    ``debiased=True`` (p = 2 only) replaces each class's squared error by the debiased estimate
    of :func:`debiased_ece`, clamped at 0 per class before averaging (as their
    ``unbiased_l2_ce``). With p = 1 and ``binning="width"`` this equals :func:`classwise_ece`.
    Default bins are the study's 15 equal-width ``[a, b)`` bins (fast: no per-class loop); the
    authors' own default is equal-mass bins per class (``binning="mass"``, a sort of every
    column, slower for many classes). Their package's equal-width bins are ``(a, b]``; the two
    differ only for values exactly on an inner edge.
    """
    probs_, y = check_probs_labels(probs, labels)
    n_bins = check_n_bins(n_bins)
    power = check_power(p)
    check_choice(binning, "binning", BINNINGS)
    if debiased and power != 2:
        raise ValueError(f"debiased=True is defined for p=2 only, got p={p!r}; use p=2")
    return marginal_value(probs_, y, n_bins, power, bool(debiased), binning)


def marginal_value(
    p: np.ndarray,
    y: np.ndarray,
    n_bins: int = ECE_BINS,
    power: float = 2.0,
    debiased: bool = False,
    binning: str = "width",
) -> float:
    """:func:`marginal_ce` of validated arrays and options."""
    n, k = p.shape
    if binning == "width":
        count, sum_conf, sum_label = classwise_sums(p, y, n_bins)
    else:
        count_l, conf_l, lab_l = [], [], []
        for j in range(k):
            x = np.ascontiguousarray(p[:, j], dtype=np.float64)
            ids, edges = bin_ids(x, n_bins, "mass")
            c, s, t = bin_sums(ids, x, (y == j).astype(np.float64), n_bins)
            count_l.append(c)
            conf_l.append(s)
            lab_l.append(t)
        count, sum_conf, sum_label = np.stack(count_l), np.stack(conf_l), np.stack(lab_l)
    return marginal_from_sums(count, sum_conf, sum_label, power, debiased)


def ks_from_values(x: np.ndarray, target: np.ndarray) -> float:
    """KS calibration error of confidences ``x`` against 0/1 ``target`` (validated arrays)."""
    n = x.shape[0]
    order = np.argsort(x, kind="stable")
    xs = x[order]
    diff = np.cumsum(target[order] - xs)
    # evaluate only after each run of equal confidences, so tie order cannot matter
    ends = np.flatnonzero(np.append(xs[1:] != xs[:-1], True))
    return float(np.max(np.abs(diff[ends])) / n)


def ks_error(probs, labels) -> float:
    """Top-label Kolmogorov-Smirnov calibration error (Gupta et al. 2021, ICLR, "Calibration of
    neural networks using splines", sec. 4, eq. 5-6).

    Sort the samples by top-label confidence; ``KS = max_i |sum_{l<=i} (correct_l - conf_l)| / N``
    (the largest gap between the cumulative accuracy and cumulative confidence curves). Runs of
    equal confidence are one step of both curves, so only their ends are compared.
    """
    p, y, pred = check_probs_labels(probs, labels, with_argmax=True)
    conf, correct = top_label(p, y, pred)
    return ks_from_values(conf, correct)
