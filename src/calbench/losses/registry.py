"""The losses by name: :data:`LOSSES` (``{name: loss class}``), :func:`get_loss` and the builders
of named and combined losses (:func:`build_loss`, :func:`combined`). The classes stay in their
modules; ``calbench.config_check.loss_names`` reads :data:`LOSSES`' literal here without
importing torch."""

from __future__ import annotations

import inspect

from torch import nn

from calbench.losses.avuc import AvUCGSLoss, AvUCLoss, SoftAvUCLoss
from calbench.losses.classification import (
    BrierLoss,
    CrossEntropyLoss,
    FLSD53Loss,
    FocalLoss,
    LabelSmoothingLoss,
)
from calbench.losses.combined import CombinedLoss
from calbench.losses.mmce import MMCELoss, MMCEWeightedLoss
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


def build_loss(spec, what: str = "loss") -> nn.Module:
    """Return ``spec`` as a loss module: a module as is, a registry name, or a
    ``{"name": ..., "kwargs": {...}}`` dict (built with :func:`get_loss`)."""
    if isinstance(spec, nn.Module):
        return spec
    if isinstance(spec, str):
        return get_loss(spec)
    if isinstance(spec, dict) and "name" in spec:
        extra = set(spec) - {"name", "kwargs"}
        if extra:
            raise ValueError(
                f"{what} spec has unknown keys {sorted(extra)}; use {{'name': ..., 'kwargs': {{...}}}}"
            )
        return get_loss(spec["name"], **dict(spec.get("kwargs") or {}))
    raise ValueError(
        f"{what} must be a loss module, a loss name or {{'name': ..., 'kwargs': {{...}}}}, got {spec!r}"
    )


def combined(primary, secondary, beta: float = 1.0) -> CombinedLoss:
    """Build ``primary + beta * secondary``; each part is a loss module, a registry name, or a
    ``{"name": ..., "kwargs": {...}}`` dict."""
    return CombinedLoss(build_loss(primary, "primary"), build_loss(secondary, "secondary"), beta)
