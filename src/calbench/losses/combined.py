"""Primary + beta * secondary objectives (Karandikar et al. 2021, section 4, "Soft Calibration
Objectives for Neural Networks": the training loss is a primary loss such as NLL, focal or MSE plus
``beta`` times a secondary calibration loss such as SB-ECE or S-AvUC)."""

from __future__ import annotations

from torch import Tensor, nn

from calbench.losses._base import Loss, check_nonneg


class CombinedLoss(Loss):
    """``primary(logits, targets) + beta * secondary(logits, targets)``.

    Both parts are loss modules (see :func:`calbench.losses.get_loss`); ``beta >= 0``.
    The last evaluated parts are kept in ``last_parts`` (detached floats) for logging.
    """

    name = "combined"

    def __init__(self, primary: nn.Module, secondary: nn.Module, beta: float = 1.0):
        super().__init__()
        if not isinstance(primary, nn.Module) or not isinstance(secondary, nn.Module):
            raise ValueError(
                "primary and secondary must be loss modules; build them with calbench.losses.get_loss"
            )
        self.primary = primary
        self.secondary = secondary
        self.beta = check_nonneg(beta, "beta")
        self.last_parts: dict[str, float] = {}

    def compute(self, logits: Tensor, targets: Tensor) -> Tensor:
        a = self.primary(logits, targets)
        if self.beta == 0.0:
            self.last_parts = {"primary": float(a.detach()), "secondary": float("nan")}
            return a
        b = self.secondary(logits, targets)
        self.last_parts = {"primary": float(a.detach()), "secondary": float(b.detach())}
        return a + self.beta * b

    def extra_repr(self) -> str:
        return f"beta={self.beta}"
