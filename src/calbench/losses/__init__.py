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

import inspect

from torch import nn

from calbench.losses._base import Loss, check_logits_targets
from calbench.losses.avuc import AvUCGSLoss, AvUCLoss, SoftAvUCLoss
from calbench.losses.classification import (
    BrierLoss,
    CrossEntropyLoss,
    FLSD53Loss,
    FocalLoss,
    LabelSmoothingLoss,
)
from calbench.losses.combined import CombinedLoss, build_loss, combined
from calbench.losses.interleaved import InterleavedObjective, epoch_phases, interleaved_split
from calbench.losses.mmce import MMCELoss, MMCEWeightedLoss, mmce_term, mmce_weighted_term
from calbench.losses.soft import DECELoss, SBECELoss

#: Registry ``{name: loss class}``; build instances with :func:`get_loss`.
LOSSES: dict[str, type[nn.Module]] = {
    cls.name: cls
    for cls in (
        CrossEntropyLoss,
        FocalLoss,
        FLSD53Loss,
        LabelSmoothingLoss,
        BrierLoss,
        MMCELoss,
        MMCEWeightedLoss,
        AvUCLoss,
        AvUCGSLoss,
        SBECELoss,
        SoftAvUCLoss,
        DECELoss,
    )
}


def get_loss(name: str, *, secondary=None, **kwargs) -> nn.Module:
    """Build the loss registered as ``name`` with keyword arguments ``kwargs``.

    ``secondary`` (optional) adds a secondary objective: a dict
    ``{"name": str, "beta": float (default 1), "kwargs": dict (optional)}`` or a loss module
    (then ``beta`` is 1); the result is a :class:`CombinedLoss` computing
    ``primary + beta * secondary`` (Karandikar et al. 2021, section 5.1).
    """
    if not isinstance(name, str) or name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose one of {sorted(LOSSES)}")
    cls = LOSSES[name]
    params = inspect.signature(cls.__init__).parameters
    accepted = [p for p in params if p != "self"]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ValueError(
            f"loss {name!r} does not take {unknown}; accepted keyword arguments: {accepted or 'none'}"
        )
    primary = cls(**kwargs)
    if secondary is None:
        return primary
    if isinstance(secondary, nn.Module):
        return CombinedLoss(primary, secondary, 1.0)
    if not isinstance(secondary, dict) or "name" not in secondary:
        raise ValueError(
            "secondary must be {'name': ..., 'beta': ..., 'kwargs': {...}} or a loss module, "
            f"got {secondary!r}"
        )
    extra = set(secondary) - {"name", "beta", "kwargs"}
    if extra:
        raise ValueError(
            f"secondary has unknown keys {sorted(extra)}; allowed keys are name, beta, kwargs"
        )
    sec = get_loss(secondary["name"], **dict(secondary.get("kwargs") or {}))
    return CombinedLoss(primary, sec, secondary.get("beta", 1.0))


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
