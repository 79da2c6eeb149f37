"""Soft (differentiable) calibration errors: SB-ECE and DECE, in numpy and in torch.

SB-ECE -- Karandikar et al. (NeurIPS 2021), "Soft Calibration Objectives for Neural Networks",
eq. 11 (binned form) and eq. 12 (label-binned form). A sample with top-label confidence c
belongs to bin j with weight ``u_j(c) = softmax_j(-(c - xi_j)^2 / T)``, xi_j the bin centres.

* ``form="bin"`` (eq. 11, used for TS-SB-ECE): M equal-width bins on [0, 1], centres
  ``(2j + 1) / (2M)``; ``S_j = sum_i u_j(c_i)``, ``C_j`` and ``A_j`` the u-weighted means of
  confidence and correctness with denominators floored at 1e-5; weights ``S_j / sum S``;
  result ``(sum_j w_j |A_j - C_j|^p)^(1/p)``. As T -> 0 this is the hard l_p ECE on the
  study's equal-width bins.
* ``form="label_binned"`` (eq. 12, the training loss of the authors' code): M + 1 edges
  ``linspace(1/K, 1, M + 1)``, centres halfway between them; memberships are mixed with a
  uniform 1e-5: ``u <- (1 - 1e-5) u + 1e-5 / M``; ``A_j`` is the u-weighted mean correctness
  and the result is ``((1/N) sum_i sum_j u_j(c_i) |A_j - c_i|^p)^(1/p)``. (The authors'
  training loss is this value to the power p, i.e. without the root.)

DECE -- Bohdal, Yang & Hospedales (2021), "Meta-Calibration", sec. 3 (differentiable ECE):

* soft binning after Yang et al. (2018, deep neural decision trees): cut points
  ``0, 1/M, ..., (M-1)/M``, weights ``w = (1, ..., M)``, biases ``b = cumsum(-cut points)``;
  memberships ``o(c) = softmax((c w + b) / tau_b)``, then ``o <- (o + 1e-6) / (1 + (M + 1) 1e-6)``
  (the authors' normaliser, with M + 1, kept as is, so rows sum to slightly less than 1);
* soft accuracy from the all-pairs soft rank of the true class (Qin et al. 2010), on
  probabilities: ``rank_y = 0.5 + sum_k sigmoid(tau_a (p_k - p_y))`` (the k = y term is 0.5),
  ``acc = relu(2 - rank_y)``; only the true class's rank is computed, O(N K);
* ``conf_m = sum_i o_m c_i / sum_i o_m``, ``acc_m`` likewise; ``DECE = sum_m (sum_i o_m / N)
  |acc_m - conf_m|``. As tau_b -> 0 and tau_a -> inf this tends to the hard l1 ECE on M
  equal-width bins (up to the 1e-6 smoothing).

The numpy functions are plain numpy (no torch import); the ``*_torch`` functions are their
differentiable twins (tensors in, scalar tensor out) and agree with them to rounding.
"""

from __future__ import annotations

import numpy as np

from calbench._checks import check_choice, check_n_bins, check_probs_labels
from calbench.metrics.binning import ECE_BINS, top_label
from calbench.metrics.ece import check_power

#: Default SB-ECE temperature: membership of the neighbouring bin centre is exp(-1/(M^2 T)),
#: ~0.012 for M = 15 -- close to hard binning while keeping useful gradients.
DEFAULT_SB_TEMPERATURE = 1e-3
SB_FORMS = ("bin", "label_binned")
SB_EPS = 1e-5  # denominator floor (bin form) and uniform mix (label-binned form)
DECE_EPS = 1e-6  # DECE membership smoothing
_BLOCK = 2048


def _check_positive(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def _sb_options(n_bins, temperature, p, form) -> tuple[int, float, float, str]:
    return (
        check_n_bins(n_bins),
        _check_positive(temperature, "temperature"),
        check_power(p),
        check_choice(form, "form", SB_FORMS),
    )


def sb_centres(n_bins: int, form: str = "bin", n_classes: int = 2) -> np.ndarray:
    """Soft-bin centres: ``(2j + 1) / (2M)`` (bin form) or the midpoints of
    ``linspace(1/K, 1, M + 1)`` (label-binned form)."""
    if form == "bin":
        return (2.0 * np.arange(n_bins) + 1.0) / (2.0 * n_bins)
    edges = np.linspace(1.0 / n_classes, 1.0, n_bins + 1)
    return edges[1:] * 0.5 + edges[:-1] * 0.5


def _softmax_rows(g: np.ndarray) -> np.ndarray:
    g = g - g.max(axis=1, keepdims=True)
    np.exp(g, out=g)
    g /= g.sum(axis=1, keepdims=True)
    return g


def sb_ece_from_values(
    conf: np.ndarray,
    correct: np.ndarray,
    n_bins: int = ECE_BINS,
    temperature: float = DEFAULT_SB_TEMPERATURE,
    p: float = 2,
    form: str = "bin",
    n_classes: int = 2,
) -> float:
    """SB-ECE of top-label confidences and 0/1 correctness (validated arrays, numpy)."""
    centres = sb_centres(n_bins, form, n_classes)
    u = _softmax_rows(-((conf[:, None] - centres[None, :]) ** 2) / temperature)
    if form == "bin":
        s = u.sum(axis=0)
        den = np.maximum(s, SB_EPS)
        gap = np.abs(correct @ u / den - conf @ u / den)
        return float(np.dot(s / s.sum(), gap**p) ** (1.0 / p))
    u = (1.0 - SB_EPS) * u + SB_EPS / n_bins
    a_bar = correct @ u / u.sum(axis=0)
    val = np.sum(u * np.abs(a_bar[None, :] - conf[:, None]) ** p) / conf.shape[0]
    return float(val ** (1.0 / p))


def sb_ece(
    probs,
    labels,
    n_bins: int = ECE_BINS,
    temperature: float = DEFAULT_SB_TEMPERATURE,
    p: float = 2,
    form: str = "bin",
) -> float:
    """Soft-binned ECE (Karandikar et al. 2021, eq. 11 ``form="bin"``, eq. 12
    ``form="label_binned"``); see the module docstring for both forms exactly."""
    probs_, y, pred = check_probs_labels(probs, labels, with_argmax=True)
    n_bins, temperature, p, form = _sb_options(n_bins, temperature, p, form)
    conf, correct = top_label(probs_, y, pred)
    return sb_ece_from_values(conf, correct, n_bins, temperature, p, form, probs_.shape[1])


def soft_accuracy(p: np.ndarray, y: np.ndarray, tau_a: float = 100.0) -> np.ndarray:
    """DECE soft accuracy ``relu(2 - rank_y)``, ``rank_y = 0.5 + sum_k sigmoid(tau_a (p_k - p_y))``
    (validated input; O(N K) in row blocks, sigmoid as ``(1 + tanh(x / 2)) / 2``)."""
    n, k = p.shape
    py = p[np.arange(n), y].astype(np.float64)
    tanh_sum = np.empty(n, dtype=np.float64)
    half = 0.5 * tau_a
    for i in range(0, n, _BLOCK):
        d = p[i : i + _BLOCK] - py[i : i + _BLOCK, None]
        d *= half
        np.tanh(d, out=d)
        tanh_sum[i : i + _BLOCK] = d.sum(axis=1)
    rank = 0.5 + 0.5 * k + 0.5 * tanh_sum
    return np.maximum(2.0 - rank, 0.0)


def dece_memberships(conf: np.ndarray, n_bins: int, tau_b: float) -> np.ndarray:
    """DECE soft-bin memberships ``(N, M)`` after the 1e-6 smoothing (numpy)."""
    cuts = np.linspace(0.0, 1.0, n_bins + 1)[:-1]
    w = np.arange(1, n_bins + 1, dtype=np.float64)
    b = np.cumsum(-cuts)
    o = _softmax_rows((conf[:, None] * w[None, :] + b[None, :]) / tau_b)
    return (o + DECE_EPS) / (1.0 + (n_bins + 1) * DECE_EPS)


def dece_from_values(
    conf: np.ndarray, acc: np.ndarray, n_bins: int = ECE_BINS, tau_b: float = 0.01
) -> float:
    """DECE from top-label confidences and soft accuracies (numpy)."""
    o = dece_memberships(conf, n_bins, tau_b)
    s = o.sum(axis=0)
    gap = np.abs(acc @ o / s - conf @ o / s)
    return float(np.dot(s, gap) / conf.shape[0])


def dece(probs, labels, n_bins: int = ECE_BINS, tau_a: float = 100.0, tau_b: float = 0.01) -> float:
    """Differentiable ECE of Meta-Calibration (Bohdal et al. 2021, sec. 3; defaults M = 15,
    tau_a = 100, tau_b = 0.01 as in the paper); see the module docstring."""
    p, y, pred = check_probs_labels(probs, labels, with_argmax=True)
    n_bins = check_n_bins(n_bins)
    tau_a = _check_positive(tau_a, "tau_a")
    tau_b = _check_positive(tau_b, "tau_b")
    conf, _ = top_label(p, y, pred)
    return dece_from_values(conf, soft_accuracy(p, y, tau_a), n_bins, tau_b)


# ----------------------------------------------------------------------------- torch versions


def _check_tensors(probs, labels):
    import torch

    if not isinstance(probs, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise ValueError(
            "probs and labels must be torch tensors; use sb_ece / dece for numpy arrays"
        )
    if probs.ndim != 2 or probs.shape[0] == 0 or probs.shape[1] < 2:
        raise ValueError(
            f"probs must be a (N, K) tensor with N >= 1 and K >= 2, got shape {tuple(probs.shape)}"
        )
    if not probs.dtype.is_floating_point:
        raise ValueError(f"probs must be a floating tensor, got {probs.dtype}")
    if labels.ndim != 1 or labels.shape[0] != probs.shape[0]:
        raise ValueError(
            f"labels must have shape ({probs.shape[0]},) to match probs, got {tuple(labels.shape)}"
        )
    if labels.dtype.is_floating_point or labels.dtype == torch.bool or labels.is_complex():
        raise ValueError(f"labels must be an integer tensor of class indices, got {labels.dtype}")
    with torch.no_grad():
        k = probs.shape[1]
        if int(labels.min()) < 0 or int(labels.max()) >= k:
            raise ValueError(f"labels must lie in [0, {k - 1}] for {k} classes")
        if not bool(torch.isfinite(probs).all()):
            raise ValueError("probs contain NaN or infinite values; pass finite probabilities")
        if float(probs.min()) < 0 or float(probs.max()) > 1:
            raise ValueError(
                "probs must lie in [0, 1]; did you pass logits? apply torch.softmax first"
            )
        dev = float((probs.sum(dim=1, dtype=torch.float64) - 1).abs().max())
        if dev > 1e-4:
            raise ValueError(
                f"probs rows must sum to 1 (largest deviation {dev:.3g}); apply torch.softmax"
            )


def sb_ece_torch(
    probs,
    labels,
    *,
    n_bins: int = ECE_BINS,
    temperature: float = DEFAULT_SB_TEMPERATURE,
    p: float = 2,
    form: str = "bin",
):
    """Differentiable SB-ECE (Karandikar et al. 2021, eq. 11-12): torch ``(N, K)`` probabilities
    and ``(N,)`` labels in, scalar tensor out, gradients through the top-label confidence.
    Same definition as :func:`sb_ece` (see the module docstring)."""
    import torch

    _check_tensors(probs, labels)
    n_bins, temperature, p, form = _sb_options(n_bins, temperature, p, form)
    conf, pred = probs.max(dim=1)
    correct = (pred == labels).to(probs.dtype)
    centres = torch.as_tensor(
        sb_centres(n_bins, form, probs.shape[1]), dtype=probs.dtype, device=probs.device
    )
    u = torch.softmax(-((conf[:, None] - centres[None, :]) ** 2) / temperature, dim=1)
    if form == "bin":
        s = u.sum(dim=0)
        den = torch.clamp(s, min=SB_EPS)
        gap = (correct @ u / den - conf @ u / den).abs()
        return (torch.dot(s / s.sum(), gap**p)) ** (1.0 / p)
    u = (1.0 - SB_EPS) * u + SB_EPS / n_bins
    a_bar = correct @ u / u.sum(dim=0)
    val = (u * (a_bar[None, :] - conf[:, None]).abs() ** p).sum() / conf.shape[0]
    return val ** (1.0 / p)


def dece_torch(probs, labels, *, n_bins: int = ECE_BINS, tau_a: float = 100.0, tau_b: float = 0.01):
    """Differentiable DECE (Bohdal et al. 2021): torch ``(N, K)`` probabilities and ``(N,)``
    labels in, scalar tensor out. Same definition as :func:`dece` (see the module docstring)."""
    import torch

    _check_tensors(probs, labels)
    n_bins = check_n_bins(n_bins)
    tau_a = _check_positive(tau_a, "tau_a")
    tau_b = _check_positive(tau_b, "tau_b")
    dt, dev = probs.dtype, probs.device
    conf = probs.max(dim=1).values
    py = probs.gather(1, labels.long()[:, None])
    rank = 0.5 + torch.sigmoid(tau_a * (probs - py)).sum(dim=1)
    acc = torch.relu(2.0 - rank)
    cuts = torch.linspace(0.0, 1.0, n_bins + 1, dtype=dt, device=dev)[:-1]
    w = torch.arange(1, n_bins + 1, dtype=dt, device=dev)
    b = torch.cumsum(-cuts, dim=0)
    o = torch.softmax((conf[:, None] * w[None, :] + b[None, :]) / tau_b, dim=1)
    o = (o + DECE_EPS) / (1.0 + (n_bins + 1) * DECE_EPS)
    s = o.sum(dim=0)
    gap = (acc @ o / s - conf @ o / s).abs()
    return torch.dot(s, gap) / conf.shape[0]
