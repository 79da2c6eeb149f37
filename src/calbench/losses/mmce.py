"""Maximum mean calibration error (MMCE) and its weighted form, Kumar, Sarawagi and Jain 2018,
"Trainable calibration measures for neural networks from kernel mean embeddings" (ICML).

With confidences ``r_i = max_k p_ik``, correctness ``c_i = [argmax_k p_ik = y_i]`` and the
Laplacian kernel ``k(r, r') = exp(-|r - r'| / width)`` (width 0.4 in the paper):

* MMCE (section 4, eq. 2 and the minibatch estimate below it)::

      MMCE^2 = (1/m^2) sum_{i,j} (c_i - r_i)(c_j - r_j) k(r_i, r_j)

* weighted MMCE (section 4.1), computed separately on the correct set ``D_c`` (``m_c`` samples)
  and the incorrect set ``D_ic`` (``m_ic`` samples)::

      MMCE_w^2 = sum_{i,j in D_c} (1 - r_i)(1 - r_j) k / m_c^2
               + sum_{i,j in D_ic} r_i r_j k / m_ic^2
               - 2 sum_{i in D_c, j in D_ic} (1 - r_i) r_j k / (m_c m_ic)

  (a set that is empty in the batch contributes no terms).

The value used in training is the square root, and the training objective is
``NLL + lam * MMCE`` (Kumar et al. eq. 5); Meta-Calibration (Bohdal et al. 2021) uses weighted MMCE with
``lam = 2``. The correctness ``c_i`` is a constant; gradients flow through ``r_i``.

``form="released"`` reproduces the loss code released with focal_calibration and reused by
Meta-Calibration (``Losses/mmce.py``), with which Bohdal et al. 2021's MMCE baselines were trained
(objective ``mean CE + lam * term``, ``lam = 2``):

* MMCE: the squared estimate ``MMCE^2`` itself, **no square root**;
* weighted MMCE: each of the three sums is divided twice by its pair count,
  ``S_cc / (m_c^2 (m_c^2 + 1e-5)) + S_ii / (m_ic^2 (m_ic^2 + 1e-5))
  - 2 S_ci / (m_c m_ic (m_c m_ic + 1e-5))`` (``S`` the kernel-weighted sums above), plus
  ``1e-10``, then the square root; the term is 0 when the batch is all correct or all wrong.
  (The released code takes the square root of that sum as is; here a sum rounded below 0 is
  clamped to 0 first, where the released code would give NaN.)

``form="paper"`` (default) is the text's estimate above.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from calbench._checks import check_choice
from calbench.losses._base import Loss, check_nonneg, check_positive

#: Floor under the squared estimate before the square root (keeps the gradient finite at 0).
_SQRT_FLOOR = 1e-12
#: ``form`` values: Kumar et al.'s text, or the released loss code (module docstring).
FORMS = ("paper", "released")


def _laplacian_kernel(r: Tensor, width: float) -> Tensor:
    return torch.exp(-(r[:, None] - r[None, :]).abs() / width)


def _conf_correct(logits: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    probs = F.softmax(logits, dim=1)
    conf, pred = probs.max(dim=1)
    return conf, (pred == targets).to(conf.dtype)


def mmce_term(
    logits: Tensor, targets: Tensor, *, width: float = 0.4, form: str = "paper"
) -> Tensor:
    """MMCE of a batch of logits: the square root of the minibatch MMCE^2 estimate
    (``form="paper"``), or MMCE^2 itself (``form="released"``, module docstring)."""
    r, c = _conf_correct(logits, targets)
    d = c - r
    m = r.shape[0]
    mmce2 = (d[:, None] * d[None, :] * _laplacian_kernel(r, width)).sum() / (m * m)
    if form == "released":
        return mmce2
    return torch.sqrt(mmce2.clamp_min(_SQRT_FLOOR))


def mmce_weighted_term(
    logits: Tensor, targets: Tensor, *, width: float = 0.4, form: str = "paper"
) -> Tensor:
    """Weighted MMCE_w of a batch: the square root of Kumar et al. section 4.1's estimate
    (``form="paper"``) or the released code's normalisation (``form="released"``, module doc)."""
    r, c = _conf_correct(logits, targets)
    kern = _laplacian_kernel(r, width)
    correct = c > 0.5
    m_c = int(correct.sum())
    m_ic = r.shape[0] - m_c
    # a_i = 1 - r_i on correct samples, b_j = r_j on incorrect ones, zero elsewhere.
    a = torch.where(correct, 1.0 - r, torch.zeros_like(r))
    b = torch.where(correct, torch.zeros_like(r), r)
    if form == "released":
        if not (m_c and m_ic):
            return (r * 0.0).sum()  # 0, connected to the graph
        cc, ii, ci = m_c * m_c, m_ic * m_ic, m_c * m_ic
        total = (a[:, None] * a[None, :] * kern).sum() / (cc * (cc + 1e-5))
        total = total + (b[:, None] * b[None, :] * kern).sum() / (ii * (ii + 1e-5))
        total = total - 2.0 * (a[:, None] * b[None, :] * kern).sum() / (ci * (ci + 1e-5))
        return torch.sqrt((total + 1e-10).clamp_min(0.0))
    total = r.new_zeros(())
    if m_c:
        total = total + (a[:, None] * a[None, :] * kern).sum() / (m_c * m_c)
    if m_ic:
        total = total + (b[:, None] * b[None, :] * kern).sum() / (m_ic * m_ic)
    if m_c and m_ic:
        total = total - 2.0 * (a[:, None] * b[None, :] * kern).sum() / (m_c * m_ic)
    return torch.sqrt(total.clamp_min(_SQRT_FLOOR))


class MMCELoss(Loss):
    """``ce_weight * CE + lam * MMCE`` (Kumar et al. 2018 eq. 5; kernel width 0.4).

    ``ce_weight=0, lam=1`` gives the bare MMCE term, e.g. for use as a secondary loss.
    ``form="released"``: the released loss code's term (module docstring), as in Bohdal et al. 2021's
    baselines (``lam=2`` on the batch-mean CE).
    """

    name = "mmce"

    def __init__(
        self, lam: float = 2.0, width: float = 0.4, ce_weight: float = 1.0, form: str = "paper"
    ):
        super().__init__()
        self.lam = check_nonneg(lam, "lam")
        self.width = check_positive(width, "width")
        self.ce_weight = check_nonneg(ce_weight, "ce_weight")
        self.form = check_choice(form, "form", FORMS)

    def _term(self, logits: Tensor, targets: Tensor) -> Tensor:
        return mmce_term(logits, targets, width=self.width, form=self.form)

    def compute(self, logits: Tensor, targets: Tensor) -> Tensor:
        out = logits.new_zeros(())
        if self.ce_weight:
            out = out + self.ce_weight * F.cross_entropy(logits, targets)
        if self.lam:
            out = out + self.lam * self._term(logits, targets)
        return out

    def extra_repr(self) -> str:
        return f"lam={self.lam}, width={self.width}, ce_weight={self.ce_weight}, form={self.form!r}"


class MMCEWeightedLoss(MMCELoss):
    """``ce_weight * CE + lam * MMCE_w`` (Kumar et al. 2018 section 4.1; Bohdal et al. 2021 uses lam=2)."""

    name = "mmce_weighted"

    def _term(self, logits: Tensor, targets: Tensor) -> Tensor:
        return mmce_weighted_term(logits, targets, width=self.width, form=self.form)
