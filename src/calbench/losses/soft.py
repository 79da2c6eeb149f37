"""Soft-binned calibration errors as training losses.

* SB-ECE, Karandikar et al. 2021 eq. 11 (``form="bin"``) and eq. 12
  (``form="label_binned"``, the form the paper trains with, appendix G): equal-width bins with
  soft membership ``softmax_j(-(c - xi_j)^2 / T)``.
* DECE, Bohdal, Yang and Hospedales 2021 (Bohdal et al. 2021) section 2.2: soft binning
  ``softmax((w c + b) / tau_b)`` and soft accuracy from all-pairs soft ranks with temperature
  ``tau_a``; 15 bins, ``tau_a = 100``, ``tau_b = 0.01``.

Both wrap the differentiable metrics of :mod:`calbench.metrics.soft` (applied to
``softmax(logits)``), so the training objective and the reported metric are one implementation.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from calbench._checks import check_choice, check_n_bins
from calbench.losses._base import Loss, check_positive
from calbench.metrics.soft import dece_torch, sb_ece_torch

SBECE_FORMS = ("bin", "label_binned")


class SBECELoss(Loss):
    """SB-ECE of the batch (Karandikar et al. 2021 eq. 11/12) via ``calbench.metrics.soft.sb_ece_torch``.

    ``form`` is ``"label_binned"`` (eq. 12, default, the training secondary loss) or ``"bin"``
    (eq. 11); ``n_bins`` M (15 in the paper), ``temperature`` T of the soft bins (the paper tunes
    it and publishes no value; the default is the metric's, 1e-3), ``p`` the order (2).
    ``root=True`` returns eq. 11/12 as written (the p-th root); ``root=False`` returns the value to
    the power p, which is what the authors' released training loss computes.
    """

    name = "sbece"

    def __init__(
        self,
        form: str = "label_binned",
        n_bins: int = 15,
        temperature: float = 1e-3,
        p: float = 2.0,
        root: bool = True,
    ):
        super().__init__()
        self.form = check_choice(form, "form", SBECE_FORMS)
        self.n_bins = check_n_bins(n_bins)
        self.temperature = check_positive(temperature, "temperature")
        self.p = check_positive(p, "p")
        if not isinstance(root, bool):
            raise ValueError(f"root must be True or False, got {root!r}")
        self.root = root

    def compute(self, logits: Tensor, targets: Tensor) -> Tensor:
        value = sb_ece_torch(
            F.softmax(logits, dim=1),
            targets,
            n_bins=self.n_bins,
            temperature=self.temperature,
            p=self.p,
            form=self.form,
        )
        return value if self.root else value**self.p

    def extra_repr(self) -> str:
        return (
            f"form={self.form!r}, n_bins={self.n_bins}, temperature={self.temperature}, p={self.p}"
        )


class DECELoss(Loss):
    """Differentiable ECE (Bohdal et al. 2021 section 2.2) via ``calbench.metrics.soft.dece_torch``."""

    name = "dece"

    def __init__(self, n_bins: int = 15, tau_a: float = 100.0, tau_b: float = 0.01):
        super().__init__()
        self.n_bins = check_n_bins(n_bins)
        self.tau_a = check_positive(tau_a, "tau_a")
        self.tau_b = check_positive(tau_b, "tau_b")

    def compute(self, logits: Tensor, targets: Tensor) -> Tensor:
        return dece_torch(
            F.softmax(logits, dim=1),
            targets,
            n_bins=self.n_bins,
            tau_a=self.tau_a,
            tau_b=self.tau_b,
        )

    def extra_repr(self) -> str:
        return f"n_bins={self.n_bins}, tau_a={self.tau_a}, tau_b={self.tau_b}"
