"""Shared plumbing for the training objectives: input checks and the loss base class.

Every loss is a :class:`torch.nn.Module` whose ``forward(logits, targets)`` takes logits of shape
``(B, K)`` and integer class targets of shape ``(B,)`` and returns a scalar (the batch mean unless
a loss's docstring says otherwise). Input problems raise a one-line :class:`ValueError` naming the
problem and the fix, like :mod:`calbench._checks` does for numpy arrays.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def check_logits_targets(logits: Tensor, targets: Tensor) -> None:
    """Raise a one-line ``ValueError`` unless ``logits`` (B, K) and ``targets`` (B,) fit together."""
    if not isinstance(logits, Tensor) or not isinstance(targets, Tensor):
        raise ValueError(
            f"logits and targets must be torch tensors, got {type(logits).__name__} and "
            f"{type(targets).__name__}; convert with torch.as_tensor"
        )
    if logits.ndim != 2:
        raise ValueError(
            f"logits must have shape (B, K), got {tuple(logits.shape)}; flatten to (batch, classes)"
        )
    if logits.shape[0] == 0:
        raise ValueError("logits are empty (batch of 0); pass at least one sample")
    if logits.shape[1] < 2:
        raise ValueError(f"logits must have at least 2 classes, got shape {tuple(logits.shape)}")
    if not logits.is_floating_point():
        raise ValueError(f"logits must be floating point, got {logits.dtype}; cast with .float()")
    if targets.ndim != 1 or targets.shape[0] != logits.shape[0]:
        raise ValueError(
            f"targets must have shape ({logits.shape[0]},) to match logits {tuple(logits.shape)}, "
            f"got {tuple(targets.shape)}; pass one class index per row"
        )
    if targets.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise ValueError(
            f"targets must be integer class indices, got {targets.dtype}; cast with .long()"
        )
    lo, hi = int(targets.min()), int(targets.max())
    if lo < 0 or hi >= logits.shape[1]:
        raise ValueError(
            f"targets must lie in [0, {logits.shape[1] - 1}] for {logits.shape[1]} classes, "
            f"got range [{lo}, {hi}]"
        )


def check_nonneg(value, name: str) -> float:
    """Return ``value`` as a float after checking it is a finite number >= 0."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}") from None
    if not (v >= 0.0 and v < float("inf")):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return v


def check_positive(value, name: str) -> float:
    """Return ``value`` as a float after checking it is a finite number > 0."""
    v = check_nonneg(value, name)
    if v == 0.0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return v


def check_fraction(value, name: str, *, closed_right: bool = False) -> float:
    """Return ``value`` as a float in [0, 1) (or [0, 1] when ``closed_right``)."""
    v = check_nonneg(value, name)
    if v > 1.0 or (v == 1.0 and not closed_right):
        bound = "[0, 1]" if closed_right else "[0, 1)"
        raise ValueError(f"{name} must lie in {bound}, got {value!r}")
    return v


class Loss(nn.Module):
    """Base class: validates ``(logits, targets)`` then calls :meth:`compute`.

    Subclasses set ``name`` (the key in :data:`calbench.losses.LOSSES`) and implement
    ``compute(logits, targets) -> scalar``.
    """

    name: str = ""

    def forward(self, logits: Tensor, targets: Tensor) -> Tensor:
        check_logits_targets(logits, targets)
        return self.compute(logits, targets.long())

    def compute(self, logits: Tensor, targets: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError
