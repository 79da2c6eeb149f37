"""One optimiser step of each training method, and the objects a step needs.

* ``standard`` / ``interleaved`` (:class:`ObjectiveStep`): forward pass (bfloat16 autocast on a
  GPU with ``amp``), the objective of :func:`build_objective` (for ``interleaved`` the loss of
  the batch's phase, Karandikar et al. 2021 appendix B), backward pass, optional gradient-norm
  clipping, optimiser step;
* ``metacal`` (:class:`MetaCalibrationStep`): one step of Bohdal et al. 2021 Algorithm 1
  (:meth:`calbench.metacal.MetaCalibration.step`) on a training batch and a meta-validation
  batch.

A step is called as ``step(xb, yb, phase, meta)`` (``meta``: the preprocessed meta-validation
batch ``(x, y)`` or ``None``) and returns ``(loss, logits)``: the batch's mean loss per sample
(a tensor) and its logits. :meth:`epoch_columns` gives the method's extra history columns of the
epoch that just ended.
"""

from __future__ import annotations

import math

from calbench._torch import eager_optimizers, eager_step
from calbench.metacal import MetaCalibration
from calbench.training.options import TrainingConfig


def build_objective(config: TrainingConfig):
    """The training objective of ``config`` (``standard`` and ``interleaved`` methods).

    ``standard``: ``get_loss(loss, **loss_kwargs)``, combined with ``beta * secondary`` when
    ``config.secondary`` is set; ``interleaved``: an
    :class:`calbench.losses.InterleavedObjective` of the primary and secondary losses.
    """
    from calbench.losses import InterleavedObjective, get_loss  # lazy: pulls torch

    if config.method == "interleaved":
        sec = config.secondary
        return InterleavedObjective(
            {"name": config.loss, "kwargs": dict(config.loss_kwargs)},
            {"name": sec["name"], "kwargs": dict(sec["kwargs"])},
            beta=sec["beta"],
        )
    if config.secondary is not None:
        return get_loss(config.loss, secondary=dict(config.secondary), **config.loss_kwargs)
    return get_loss(config.loss, **config.loss_kwargs)


def final_linear(model) -> str:
    """Dotted name of the last ``nn.Linear`` of ``model`` (its classifier, for Meta-Calibration)."""
    from torch import nn

    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not names:
        raise ValueError(
            "method: metacal needs a network ending in nn.Linear (the meta-learned classifier)"
        )
    return names[-1]


def make_optimizer(config: TrainingConfig, params):
    """``torch.optim.SGD`` (``momentum``) or ``Adam`` over ``params`` with ``config``'s ``lr``
    and ``weight_decay``."""
    import torch

    eager_optimizers(torch.optim.SGD, torch.optim.Adam)
    if config.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
        )
    return torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)


class ObjectiveStep:
    """A step of the ``standard`` / ``interleaved`` methods: minimise ``loss_fn``."""

    def __init__(self, model, opt, params, loss_fn, config: TrainingConfig, device):
        self.model, self.opt, self.params, self.loss_fn = model, opt, params, loss_fn
        self.interleaved = config.method == "interleaved"
        self.grad_clip = config.grad_clip
        self.use_amp = bool(config.amp) and str(device).startswith("cuda")

    def __call__(self, xb, yb, phase: str, meta=None):
        import torch

        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.use_amp):
            logits = self.model(xb)
            if self.interleaved:
                loss = self.loss_fn(logits.float(), yb, phase=phase)
            else:
                loss = self.loss_fn(logits.float(), yb)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.grad_clip)
        eager_step(self.opt)
        return loss, logits

    def epoch_columns(self) -> dict:
        return {}


class MetaCalibrationStep:
    """A step of the ``metacal`` method (:class:`calbench.metacal.MetaCalibration` with
    ``config.metacal``'s options on the last ``nn.Linear`` of the model); it averages the
    finite meta-losses of each epoch."""

    def __init__(self, model, opt, config: TrainingConfig):
        kwargs = {k: v for k, v in config.metacal.items() if k not in ("split_seed", "valid_size")}
        self.trainer = MetaCalibration(model, opt, classifier=final_linear(model), **kwargs)
        self._meta_sum, self._meta_n = 0.0, 0

    def __call__(self, xb, yb, phase: str, meta=None):
        import torch

        stats = self.trainer.step((xb, yb), meta)
        per_sample = stats["loss"] / (xb.shape[0] if self.trainer.reduction == "sum" else 1)
        if math.isfinite(stats["meta_loss"]):
            self._meta_sum += stats["meta_loss"]
            self._meta_n += 1
        return torch.tensor(per_sample, dtype=torch.float64), self.trainer.last_logits

    def epoch_columns(self) -> dict:
        """:data:`calbench.training.META_COLUMNS` of the epoch; starts the next epoch's mean."""
        omega = self.trainer.omega
        row = {
            "meta_loss": self._meta_sum / self._meta_n if self._meta_n else float("nan"),
            "omega_abs_mean": float(
                sum(w.detach().abs().sum() for w in omega) / sum(w.numel() for w in omega)
            ),
        }
        self._meta_sum, self._meta_n = 0.0, 0
        return row


def make_step(model, opt, params, loss_fn, config: TrainingConfig, device):
    """The step of ``config.method`` (see the module docstring)."""
    if config.method == "metacal":
        return MetaCalibrationStep(model, opt, config)
    return ObjectiveStep(model, opt, params, loss_fn, config, device)
