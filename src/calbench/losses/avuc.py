"""Accuracy-versus-uncertainty calibration losses.

* AvUC, Krishnan and Tickoo 2020 ("Improving model calibration with accuracy versus uncertainty
  optimization", NeurIPS), as restated in Karandikar et al. 2021 eq. 13-14::

      AvUC = log(1 + (n_AU + n_IC) / (n_AC + n_IU))      (= -log AvU)

  with samples split by accuracy (A/I: top-1 prediction correct or not) and certainty
  (C/U: entropy ``h_i <= kappa`` or ``> kappa``), and the relaxed counts
  ``n_AC = sum c_i (1 - tanh h_i)``, ``n_AU = sum c_i tanh h_i``,
  ``n_IC = sum (1 - c_i)(1 - tanh h_i)``, ``n_IU = sum (1 - c_i) tanh h_i``
  over the samples of each category (``c_i`` the confidence ``max_k p_ik``).
* AvUC-GS (Karandikar et al. 2021 appendix F): the same value, with the gradient stopped through the
  ``c_i`` and ``(1 - c_i)`` multiplicands.
* S-AvUC (Karandikar et al. 2021 section 4.2, eq. 15-16): the hard certain/uncertain split replaced by the soft
  uncertainty ``t = logistic((1/T) log(h*(1 - kappa) / ((1 - h*) kappa)))`` of the normalised
  entropy ``h* = h / log K``, and the confidence factors dropped::

      n'_AC = sum_{a_i=1} (1 - t_i)(1 - tanh h_i)   n'_AU = sum_{a_i=1} t_i tanh h_i
      n'_IC = sum_{a_i=0} (1 - t_i)(1 - tanh h_i)   n'_IU = sum_{a_i=0} t_i tanh h_i
      S-AvUC = log(1 + (n'_AU + n'_IC) / (n'_AC + n'_IU))

  As in the authors' released code (google/uncertainty-baselines ``experimental/caltrain``), the
  entropy is taken of ``(1 - 1e-5) p + 1e-5 / K`` and the denominator is floored at 1e-5. With
  ``kappa = 0.5, T = 1`` the soft uncertainty is the identity ``t = h*``.

These are secondary losses: combine them with a primary loss via ``secondary=`` in
:func:`calbench.losses.get_loss` (``primary + beta * secondary``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from calbench.losses._base import Loss, check_fraction, check_nonneg, check_positive

#: Floor under the denominator ``n_AC + n_IU`` (released S-AvUC code).
DENOM_FLOOR = 1e-5
#: Probability smoothing before the S-AvUC entropy (released code).
PROB_SMOOTHING = 1e-5
#: Clamp of the normalised entropy inside the S-AvUC log-odds (keeps h* near 0 or 1 finite).
_HSTAR_EPS = 1e-6


def _avuc_ratio(n_ac: Tensor, n_au: Tensor, n_ic: Tensor, n_iu: Tensor) -> Tensor:
    return torch.log1p((n_au + n_ic) / torch.clamp(n_ac + n_iu, min=DENOM_FLOOR))


def entropy(probs: Tensor) -> Tensor:
    """Shannon entropy (nats) of each row of ``probs``; ``0 log 0 = 0``."""
    logp = torch.log(probs.clamp_min(torch.finfo(probs.dtype).tiny))
    return -(probs * logp).sum(dim=1)


class AvUCLoss(Loss):
    """AvUC (Krishnan and Tickoo 2020; Karandikar et al. 2021 eq. 13-14); ``kappa`` is the entropy threshold in
    nats (default ``None``: half the maximum entropy, ``0.5 log K``; the paper tunes it)."""

    name = "avuc"
    stop_gradient = False

    def __init__(self, kappa: float | None = None):
        super().__init__()
        self.kappa = None if kappa is None else check_nonneg(kappa, "kappa")

    def compute(self, logits: Tensor, targets: Tensor) -> Tensor:
        logp = F.log_softmax(logits, dim=1)
        p = logp.exp()
        h = -(p * logp).sum(dim=1)
        conf, pred = p.max(dim=1)
        kappa = 0.5 * math.log(p.shape[1]) if self.kappa is None else self.kappa
        accurate = pred == targets
        uncertain = h.detach() > kappa
        c = conf.detach() if self.stop_gradient else conf
        th = torch.tanh(h)
        zero = torch.zeros_like(th)
        n_ac = torch.where(accurate & ~uncertain, c * (1 - th), zero).sum()
        n_au = torch.where(accurate & uncertain, c * th, zero).sum()
        n_ic = torch.where(~accurate & ~uncertain, (1 - c) * (1 - th), zero).sum()
        n_iu = torch.where(~accurate & uncertain, (1 - c) * th, zero).sum()
        return _avuc_ratio(n_ac, n_au, n_ic, n_iu)

    def extra_repr(self) -> str:
        return f"kappa={self.kappa}"


class AvUCGSLoss(AvUCLoss):
    """AvUC with gradient stopping through the ``c_i`` / ``(1 - c_i)`` factors (Karandikar et al. 2021 app. F)."""

    name = "avuc_gs"
    stop_gradient = True


class SoftAvUCLoss(Loss):
    """Soft AvUC (Karandikar et al. 2021 eq. 15-16) with temperature ``T`` and soft threshold ``kappa`` in (0, 1)
    on the normalised entropy (``theta`` is accepted as an alias of ``kappa``, the name used by the
    released code). Defaults ``kappa=0.5, temperature=1`` make ``t = h*``; the paper tunes both.
    """

    name = "savuc"

    def __init__(
        self, temperature: float = 1.0, kappa: float | None = None, theta: float | None = None
    ):
        super().__init__()
        if kappa is not None and theta is not None and float(kappa) != float(theta):
            raise ValueError("pass either kappa or theta (the same parameter), not both")
        k = kappa if kappa is not None else (theta if theta is not None else 0.5)
        self.kappa = check_fraction(k, "kappa")
        if self.kappa == 0.0:
            raise ValueError("kappa must lie strictly between 0 and 1, got 0")
        self.temperature = check_positive(temperature, "temperature")

    def soft_uncertainty(self, h_star: Tensor) -> Tensor:
        """``t_{kappa,T}(h*) = logistic((1/T) log(h*(1-kappa) / ((1-h*) kappa)))``."""
        hs = h_star.clamp(_HSTAR_EPS, 1.0 - _HSTAR_EPS)
        log_odds = torch.log(hs) - torch.log1p(-hs) + math.log((1.0 - self.kappa) / self.kappa)
        t = torch.sigmoid(log_odds / self.temperature)
        # the limits t(0) = 0 and t(1) = 1 exactly (h* = 1 for uniform predictions)
        t = torch.where(h_star >= 1.0, torch.ones_like(t), t)
        return torch.where(h_star <= 0.0, torch.zeros_like(t), t)

    def compute(self, logits: Tensor, targets: Tensor) -> Tensor:
        p = F.softmax(logits, dim=1)
        k = p.shape[1]
        pred = p.argmax(dim=1)
        ps = (1.0 - PROB_SMOOTHING) * p + PROB_SMOOTHING / k
        h = entropy(ps)
        t = self.soft_uncertainty(h / math.log(k))
        th = torch.tanh(h)
        accurate = pred == targets
        zero = torch.zeros_like(th)
        certain_part = (1 - t) * (1 - th)
        uncertain_part = t * th
        n_ac = torch.where(accurate, certain_part, zero).sum()
        n_au = torch.where(accurate, uncertain_part, zero).sum()
        n_ic = torch.where(~accurate, certain_part, zero).sum()
        n_iu = torch.where(~accurate, uncertain_part, zero).sum()
        return _avuc_ratio(n_ac, n_au, n_ic, n_iu)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, kappa={self.kappa}"
