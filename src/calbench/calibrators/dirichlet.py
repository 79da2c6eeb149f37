"""Dirichlet calibration with ODIR regularisation (``dirichlet``).

Kull, Perello-Nieto, Kängsepp, Silva Filho, Song, Flach 2019, "Beyond temperature scaling:
Obtaining well-calibrated multiclass probabilities with Dirichlet calibration" (NeurIPS):
``q = softmax(W ln p + b)`` with ``p = softmax(z)`` (their eq. 4 in its "linear layer on
log-probabilities" form), fitted by minimising the mean NLL plus Off-Diagonal and Intercept
Regularisation (section 4)::

    lambda / (K (K-1)) * sum_{i != j} W_ij^2 + mu / K * sum_j b_j^2

It is matrix scaling (:class:`calbench.calibrators.scaling.MatrixScalingBias`) applied to the
log-softmax of the logits, so it shares that implementation and its options (LBFGS, dtype, device,
line search).  Defaults: ``odir=(1e-3, 1e-3)``; Kull et al. choose (lambda, mu) by cross-validation,
which a user can do by passing other values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calbench.calibrators.base import register
from calbench.calibrators.scaling import MatrixScalingBias
from calbench.functional import log_softmax

#: Default ODIR strengths (lambda for off-diagonal weights, mu for intercepts).
DEFAULT_ODIR = (1e-3, 1e-3)


@register
class DirichletCalibration(MatrixScalingBias):
    """Dirichlet calibration (Kull et al. 2019): ``softmax(log_softmax(z) @ W + b)`` with ODIR."""

    name = "dirichlet"
    kind = "ms_b"

    def __init__(self, *, odir: tuple[float, float] | None = DEFAULT_ODIR, **kwargs: Any) -> None:
        super().__init__(odir=odir, **kwargs)

    def _transform_input(self, logits: np.ndarray) -> np.ndarray:
        return log_softmax(logits)
