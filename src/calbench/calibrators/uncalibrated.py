"""The identity calibrator: plain softmax of the logits (the "Uncalibrated" column of the study)."""

from __future__ import annotations

from typing import Any

import numpy as np

from calbench.calibrators.base import Calibrator, register
from calbench.calibrators.precision import check_precision, softmax_in


@register
class Uncalibrated(Calibrator):
    """``softmax(z)``: the baseline every calibrator is compared with (Guo et al. 2017, eq. 1).

    ``precision="float32"`` computes it as the study's ``scipy.special.softmax`` of float32
    logits (float32 output; see :mod:`calbench.calibrators.precision`).
    """

    name = "uncalibrated"
    reference = ""
    state_schema: dict = {}
    injective = True  # the identity map of softmax(z)

    def __init__(self, *, precision: str = "float64") -> None:
        super().__init__(precision=check_precision(precision))

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        """Nothing to learn; ``fit`` only records the number of classes."""

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        return softmax_in(logits, self._params["precision"])

    def _get_state(self) -> dict[str, Any]:
        return {}

    def _set_state(self, state: dict[str, Any]) -> None:
        """No state."""
