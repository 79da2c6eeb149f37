"""Interleaved training, Karandikar et al. 2021 appendix B.

When the primary loss (NLL) memorises the training set, a soft calibration objective computed on
that same set has nothing left to correct. Interleaved training therefore splits the training set
into a *majority* part and a *held-out* part, and splits every epoch into two phases: first the
primary loss on the majority batches, then the soft calibration objective on the held-out
batches. The paper does not state the held-out fraction; :func:`interleaved_split` defaults to 10%.

Typical loop::

    obj = InterleavedObjective("ce", {"name": "savuc", "kwargs": {"kappa": 0.2}}, beta=1.0)
    major, held = interleaved_split(len(train_set), holdout_fraction=0.1, seed=0)
    for epoch in range(epochs):
        for phase, (x, y) in obj.epoch(major_loader, held_loader):
            loss = obj(model(x), y, phase=phase)
            ...
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from torch import Tensor, nn

from calbench._checks import check_choice
from calbench.losses._base import check_fraction, check_logits_targets, check_nonneg
from calbench.losses.registry import build_loss

PHASES = ("primary", "secondary")


def interleaved_split(
    n: int, holdout_fraction: float = 0.1, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Split ``range(n)`` into sorted (majority, held-out) int64 index arrays.

    The held-out part has ``round(n * holdout_fraction)`` samples (at least 1, at most n - 1),
    drawn by ``np.random.default_rng(seed).permutation(n)``.
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
        raise ValueError(f"n must be an integer >= 2 (the training-set size), got {n!r}")
    frac = check_fraction(holdout_fraction, "holdout_fraction")
    if frac == 0.0:
        raise ValueError("holdout_fraction must be > 0; interleaving needs a held-out part")
    n_hold = min(max(int(round(n * frac)), 1), int(n) - 1)
    perm = np.random.default_rng(seed).permutation(int(n))
    return np.sort(perm[n_hold:]).astype(np.int64), np.sort(perm[:n_hold]).astype(np.int64)


def epoch_phases(n_majority_batches: int, n_holdout_batches: int) -> list[str]:
    """The phase of each step of one interleaved epoch: all ``"primary"`` steps, then all
    ``"secondary"`` steps (Karandikar et al. 2021 appendix B)."""
    for v, nm in (
        (n_majority_batches, "n_majority_batches"),
        (n_holdout_batches, "n_holdout_batches"),
    ):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
            raise ValueError(f"{nm} must be an integer >= 0, got {v!r}")
    return ["primary"] * int(n_majority_batches) + ["secondary"] * int(n_holdout_batches)


class InterleavedObjective(nn.Module):
    """Primary loss on the majority split, ``beta * secondary`` on the held-out split.

    ``primary`` / ``secondary`` are loss modules, registry names or
    ``{"name": ..., "kwargs": {...}}`` dicts. ``forward(logits, targets, phase)`` evaluates the
    loss of ``phase`` (``"primary"`` or ``"secondary"``); :meth:`epoch` yields
    ``(phase, batch)`` pairs in the interleaved order. ``counts`` tallies evaluated steps per phase.
    """

    def __init__(self, primary, secondary, beta: float = 1.0):
        super().__init__()
        self.primary = build_loss(primary, "primary")
        self.secondary = build_loss(secondary, "secondary")
        self.beta = check_nonneg(beta, "beta")
        self.counts = {p: 0 for p in PHASES}

    def forward(self, logits: Tensor, targets: Tensor, phase: str = "primary") -> Tensor:
        check_choice(phase, "phase", PHASES)
        check_logits_targets(logits, targets)
        self.counts[phase] += 1
        if phase == "primary":
            return self.primary(logits, targets)
        return self.beta * self.secondary(logits, targets)

    @staticmethod
    def epoch(
        majority_batches: Iterable[Any], holdout_batches: Iterable[Any]
    ) -> Iterator[tuple[str, Any]]:
        """Yield ``("primary", b)`` for each majority batch, then ``("secondary", b)`` for each
        held-out batch: one interleaved epoch."""
        for b in majority_batches:
            yield "primary", b
        for b in holdout_batches:
            yield "secondary", b

    def extra_repr(self) -> str:
        return f"beta={self.beta}"
