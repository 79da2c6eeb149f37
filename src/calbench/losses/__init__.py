"""Training objectives (torch, differentiable): ``get_loss(name, **kwargs) -> nn.Module``.

Every loss's ``forward(logits, targets)`` takes logits ``(B, K)`` and integer targets ``(B,)`` and
returns a scalar batch loss. Names (:data:`LOSSES`) and keyword arguments:

=================== ============================================================================
``ce``              cross-entropy
``focal``           focal loss, ``gamma`` (default 3) - Lin et al. 2017, Mukhoti et al. 2020
``flsd53``          sample-dependent focal loss FLSD-53 (``gamma_low=5``, ``gamma_high=3``,
                    ``threshold=0.2``) - Mukhoti et al. 2020
``label_smoothing`` label smoothing, ``alpha`` (default 0.05) - Mueller et al. 2019
``brier``           Brier score (summed over classes, batch mean)
``mmce``            ``CE + lam * MMCE`` (``lam=2``, ``width=0.4``, ``ce_weight=1``; ``ce_weight=0``
                    leaves the bare MMCE term for use as a secondary; ``form="released"``: the
                    released code's squared MMCE, no root) - Kumar et al. 2018
``mmce_weighted``   ``CE + lam * MMCE_w`` (``form="paper"|"released"``) - Kumar et al. 2018
``avuc``            AvUC (``kappa`` entropy threshold) - Krishnan & Tickoo 2020; Karandikar et al. 2021 eq. 13-14
``avuc_gs``         AvUC with gradient stopping on the confidence factors - Karandikar et al. 2021 appendix F
``sbece``           SB-ECE (``form="bin"|"label_binned"``, ``n_bins``, ``temperature``, ``p``,
                    ``root``) - Karandikar et al. 2021 eq. 11-12
``savuc``           soft AvUC (``temperature``, ``kappa``; ``theta`` is an alias of ``kappa``)
                    - Karandikar et al. 2021 eq. 15-16
``dece``            differentiable ECE (``n_bins=15``, ``tau_a=100``, ``tau_b=0.01``) - Bohdal et al. 2021
=================== ============================================================================

Secondary losses combine as ``primary + beta * secondary`` (Karandikar et al. 2021 section 5.1)::

    get_loss("ce", secondary={"name": "sbece", "beta": 0.5, "kwargs": {"temperature": 0.01}})
    combined("focal", {"name": "savuc", "kwargs": {"kappa": 0.2}}, beta=1.0)
    CombinedLoss(get_loss("ce"), get_loss("dece"), beta=1.0)

The interleaved training of Karandikar et al. 2021 appendix B is :class:`InterleavedObjective`.
"""

from __future__ import annotations

from calbench.losses._base import Loss, check_logits_targets
from calbench.losses.avuc import AvUCGSLoss, AvUCLoss, SoftAvUCLoss
from calbench.losses.classification import (
    BrierLoss,
    CrossEntropyLoss,
    FLSD53Loss,
    FocalLoss,
    LabelSmoothingLoss,
)
from calbench.losses.combined import CombinedLoss
from calbench.losses.interleaved import InterleavedObjective, epoch_phases, interleaved_split
from calbench.losses.mmce import MMCELoss, MMCEWeightedLoss, mmce_term, mmce_weighted_term
from calbench.losses.registry import LOSSES, build_loss, combined, get_loss
from calbench.losses.soft import DECELoss, SBECELoss

__all__ = [
    "LOSSES",
    "get_loss",
    "combined",
    "Loss",
    "check_logits_targets",
    "CrossEntropyLoss",
    "FocalLoss",
    "FLSD53Loss",
    "LabelSmoothingLoss",
    "BrierLoss",
    "MMCELoss",
    "MMCEWeightedLoss",
    "mmce_term",
    "mmce_weighted_term",
    "AvUCLoss",
    "AvUCGSLoss",
    "SoftAvUCLoss",
    "SBECELoss",
    "DECELoss",
    "CombinedLoss",
    "InterleavedObjective",
    "interleaved_split",
    "epoch_phases",
    "build_loss",
]
