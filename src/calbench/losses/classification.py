"""Proper-scoring and focal-family training losses on logits.

* cross-entropy (negative log-likelihood of the softmax);
* focal loss, Lin et al. 2017 "Focal loss for dense object detection", eq. (5):
  ``FL = -(1 - p_y)^gamma * log p_y``; used for calibration by Mukhoti et al. 2020,
  "Calibrating deep neural networks using focal loss" (NeurIPS), eq. (3);
* FLSD-53, Mukhoti et al. 2020 section 5: sample-dependent gamma, ``gamma = 5`` when
  ``p_y < 0.2`` and ``gamma = 3`` otherwise (gamma is chosen from the detached probability);
* label smoothing, Mueller, Kornblith and Hinton 2019 "When does label smoothing help?", eq. (1)
  target ``(1 - alpha) * onehot + alpha / K``;
* Brier score, Brier 1950: ``sum_k (p_k - onehot_k)^2`` per sample (summed over classes, as in
  Vasilev 2021 eq. 10 and in the Meta-Calibration baselines), averaged over the batch.

All return the batch mean.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from calbench.losses._base import Loss, check_fraction, check_nonneg


class CrossEntropyLoss(Loss):
    """Mean cross-entropy ``-log softmax(z)_y`` over the batch."""

    name = "ce"

    def compute(self, logits: Tensor, targets: Tensor) -> Tensor:
        return F.cross_entropy(logits, targets)


def _log_pt(logits: Tensor, targets: Tensor) -> Tensor:
    """``log softmax(logits)[i, y_i]`` for every row."""
    return F.log_softmax(logits, dim=1).gather(1, targets[:, None]).squeeze(1)


def _focal_weight(pt: Tensor, gamma) -> Tensor:
    """``(1 - p_t)^gamma`` with ``1 - p_t`` floored at the dtype's smallest normal number, so a
    saturated ``p_t = 1`` with ``gamma < 1`` gives a zero (not NaN) gradient."""
    return (1.0 - pt).clamp_min(torch.finfo(pt.dtype).tiny) ** gamma


class FocalLoss(Loss):
    """Focal loss ``-(1 - p_y)^gamma log p_y`` (Lin et al. 2017 eq. 5; Mukhoti et al. 2020 eq. 3).

    ``gamma = 0`` is cross-entropy. Mukhoti et al. and the study's group-2 models use gamma 1, 2, 3.
    """

    name = "focal"

    def __init__(self, gamma: float = 3.0):
        super().__init__()
        self.gamma = check_nonneg(gamma, "gamma")

    def compute(self, logits: Tensor, targets: Tensor) -> Tensor:
        logpt = _log_pt(logits, targets)
        if self.gamma == 0.0:
            return -logpt.mean()
        return -(_focal_weight(logpt.exp(), self.gamma) * logpt).mean()

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}"


class FLSD53Loss(Loss):
    """Sample-dependent focal loss FLSD-53 (Mukhoti et al. 2020, section 5).

    ``gamma_i = gamma_low`` (5) if ``p_{i,y_i} < threshold`` (0.2), else ``gamma_high`` (3). The
    choice of gamma is made on the detached probability, so it acts as a piecewise constant.
    """

    name = "flsd53"

    def __init__(self, gamma_low: float = 5.0, gamma_high: float = 3.0, threshold: float = 0.2):
        super().__init__()
        self.gamma_low = check_nonneg(gamma_low, "gamma_low")
        self.gamma_high = check_nonneg(gamma_high, "gamma_high")
        self.threshold = check_fraction(threshold, "threshold", closed_right=True)

    def compute(self, logits: Tensor, targets: Tensor) -> Tensor:
        logpt = _log_pt(logits, targets)
        pt = logpt.exp()
        gamma = torch.where(
            pt.detach() < self.threshold,
            torch.full_like(pt, self.gamma_low),
            torch.full_like(pt, self.gamma_high),
        )
        return -(_focal_weight(pt, gamma) * logpt).mean()

    def extra_repr(self) -> str:
        return (
            f"gamma_low={self.gamma_low}, gamma_high={self.gamma_high}, threshold={self.threshold}"
        )


class LabelSmoothingLoss(Loss):
    """Cross-entropy against smoothed targets ``(1 - alpha) onehot + alpha / K`` (Mueller et al. 2019).

    ``alpha = 0`` is cross-entropy; the study's group-2 models use ``alpha = 0.05``.
    """

    name = "label_smoothing"

    def __init__(self, alpha: float = 0.05):
        super().__init__()
        self.alpha = check_fraction(alpha, "alpha", closed_right=True)

    def compute(self, logits: Tensor, targets: Tensor) -> Tensor:
        logp = F.log_softmax(logits, dim=1)
        nll = -logp.gather(1, targets[:, None]).squeeze(1)
        uniform = -logp.mean(dim=1)
        return ((1.0 - self.alpha) * nll + self.alpha * uniform).mean()

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class BrierLoss(Loss):
    """Brier score ``sum_k (softmax(z)_k - [k = y])^2`` per sample, averaged over the batch."""

    name = "brier"

    def compute(self, logits: Tensor, targets: Tensor) -> Tensor:
        p = F.softmax(logits, dim=1)
        onehot = F.one_hot(targets, p.shape[1]).to(p.dtype)
        return ((p - onehot) ** 2).sum(dim=1).mean()
