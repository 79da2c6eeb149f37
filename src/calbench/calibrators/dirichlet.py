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

Optimiser default: ``line_search="strong_wolfe"`` (float32, LBFGS lr 1, max_iter 1000 as for the
scaling family).  Dirichlet calibration is not part of the replicated study's protocol, so it
need not copy the study's line-search-free LBFGS; a Wolfe line search guarantees descent on each
step.  Measured on 5,000 x 100 synthetic logits (one thread; perf/bench_speed.py --only
denormal times the objective):
with or without the line search the fit needs ~400 objective evaluations and reaches the same
objective to 1e-6 (float64 + strong_wolfe too, at twice the cost per evaluation), so the line
search costs nothing here.  The fit's former 90 s of CPU time came from denormal floats: the
fitted weights grow to ~10 on log-probabilities down to -15, so many float32 softmax outputs of
the objective fall in the denormal range, where arithmetic was ~30x slower on the CPU of that
measurement (not on every CPU: see :func:`calbench.calibrators.fit_threads.cpu_fit_settings`);
the scaling family flushes denormals to zero.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calbench.calibrators.base import register
from calbench.calibrators.scaling import MatrixScalingBias, softmax_affine_injective
from calbench.functional import log_softmax

#: Default ODIR strengths (lambda for off-diagonal weights, mu for intercepts).
DEFAULT_ODIR = (1e-3, 1e-3)
#: Default LBFGS line search (see the module docstring for why it differs from ``ms_b``).
DEFAULT_LINE_SEARCH = "strong_wolfe"


@register
class DirichletCalibration(MatrixScalingBias):
    """Dirichlet calibration (Kull et al. 2019): ``softmax(log_softmax(z) @ W + b)`` with ODIR."""

    name = "dirichlet"
    reference = "Kull et al. 2019 (Dirichlet calibration, ODIR)"
    kind = "ms_b"

    def __init__(
        self,
        *,
        odir: tuple[float, float] | None = DEFAULT_ODIR,
        line_search: str | None = DEFAULT_LINE_SEARCH,
        **kwargs: Any,
    ) -> None:
        super().__init__(odir=odir, line_search=line_search, **kwargs)

    def _transform_input(self, logits: np.ndarray) -> np.ndarray:
        return log_softmax(logits)

    def is_injective(self) -> bool:
        """Whether ``softmax(log p @ W + b)`` is injective in ``p``
        (:func:`~calbench.calibrators.scaling.softmax_affine_injective` on log-probabilities:
        the vector ``u`` with ``u @ W`` constant across classes has entries of one sign)."""
        return softmax_affine_injective(self.linear_part(), "log_probs")
