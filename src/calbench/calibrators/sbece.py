"""Temperature scaling fitted to soft-binned ECE instead of NLL (``ts_sbece``).

Karandikar, Cain, Tran, Lakshminarayanan, Shlens, Mozer, Roelofs 2021, "Soft Calibration
Objectives for Neural Networks" (NeurIPS), sec. 5 "TS-SB-ECE": the temperature of temperature
scaling is chosen to minimise the soft-binned ECE (SB-ECE, their eq. 5 with soft bin membership
``softmax_m(-(c - xi_m)^2 / T_b)``) of the validation set instead of its NLL.  Defaults: 15 bins,
``T_b = 1e-3`` (``bin_temperature``, the metrics' default), order ``p = 2``, the binned form.

SB-ECE comes from :func:`calbench.metrics.soft.sb_ece_torch`.  Optimisation (our choice, the paper
does not fix one): the log-temperature ``log T`` starts at the NLL-fitted temperature
(:class:`~calbench.calibrators.scaling.TemperatureScaling`, study defaults) and takes ``n_steps``
full-batch Adam steps (learning rate ``lr``) in float64; the temperature with the lowest SB-ECE
seen (initial one included) is kept, so the result is never worse than the NLL temperature on the
validation objective.  Adam is used rather than LBFGS because SB-ECE is non-convex and piecewise
flat in places, where LBFGS's curvature estimates are unreliable.  Calibrated probabilities are
``softmax(z / T)``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from calbench._torch import eager_optimizers, eager_step
from calbench.calibrators.base import Calibrator, Field, register
from calbench.calibrators.fit_guard import FitGuardWarning, describe, diverged, fail, warn_refit
from calbench.calibrators.scaling import TemperatureScaling, resolve_device
from calbench.functional import softmax
from calbench.metrics.soft import sb_ece_torch


def _positive(name: str, value, integer: bool = False):
    kind = int if integer else (int, float)
    if (
        isinstance(value, bool)
        or not isinstance(value, kind)
        or not np.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"{name} must be a {'positive integer' if integer else 'number > 0'}, got {value!r}"
        )
    return value


@register
class TemperatureScalingSBECE(Calibrator):
    """TS-SB-ECE (Karandikar et al. 2021): temperature minimising soft-binned ECE."""

    name = "ts_sbece"
    reference = "Karandikar et al. 2021 (temperature fitted to soft-binned ECE)"
    injective = True  # softmax(z / T), T > 0 (the state's bound)
    state_schema = {
        "temperature": Field(low=0.0, low_open=True),
        "nll_temperature": Field(low=0.0, low_open=True),
    }

    def __init__(
        self,
        *,
        n_bins: int = 15,
        bin_temperature: float = 1e-3,
        p: int = 2,
        form: str = "bin",
        n_steps: int = 300,
        lr: float = 0.02,
        device: str = "auto",
    ) -> None:
        _positive("n_bins", n_bins, integer=True)
        _positive("bin_temperature", bin_temperature)
        _positive("p", p)
        _positive("n_steps", n_steps, integer=True)
        _positive("lr", lr)
        if form not in ("bin", "label_binned"):
            raise ValueError(f"form must be 'bin' or 'label_binned', got {form!r}")
        super().__init__(
            n_bins=n_bins,
            bin_temperature=float(bin_temperature),
            p=p,
            form=form,
            n_steps=n_steps,
            lr=float(lr),
            device=device,
        )
        self.temperature_: float | None = None
        self.nll_temperature_: float | None = None
        #: how a diverged fit was redone (:mod:`calbench.calibrators.fit_guard`), else None
        self.fit_note_: str | None = None

    def objective(self, logits, labels, temperature: float) -> float:
        """SB-ECE of ``softmax(logits / temperature)`` with this calibrator's options."""
        import torch

        z = torch.as_tensor(np.asarray(logits, dtype=np.float64))
        y = torch.as_tensor(np.asarray(labels, dtype=np.int64))
        with torch.no_grad():
            return float(self._sbece(sb_ece_torch, torch.softmax(z / temperature, dim=1), y))

    def _sbece(self, fn, probs, labels):
        p = self._params
        return fn(
            probs,
            labels,
            n_bins=p["n_bins"],
            temperature=p["bin_temperature"],
            p=p["p"],
            form=p["form"],
        )

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        import torch

        self.fit_note_ = None
        # the outer fit already applied (or was told to skip) the probability-input check
        with warnings.catch_warnings():  # its divergence note is re-issued below, named ts_sbece
            warnings.simplefilter("ignore", FitGuardWarning)
            ts = TemperatureScaling(device=self._params["device"]).fit(
                logits, labels, allow_probabilities=True
            )
        notes = []
        if ts.fit_note_:
            notes.append("ts_sbece: initial NLL temperature: " + ts.fit_note_.removeprefix("ts: "))
        self.nll_temperature_ = ts.temperature_
        dev = resolve_device(self._params["device"])
        z = torch.as_tensor(np.asarray(logits, dtype=np.float64), device=dev)
        y = torch.as_tensor(labels, device=dev)
        best, best_t = self._descend(z, y, np.log(self.nll_temperature_))
        # divergence guard (calbench.calibrators.fit_guard): never end above SB-ECE at T = 1
        start = self.objective(logits, labels, 1.0)
        if diverged(best, start):
            note = describe(
                "ts_sbece", f"Adam from the NLL temperature T={self.nll_temperature_:.4g}",
                "SB-ECE", best, start, "T=1",
            )  # fmt: skip
            best, best_t = self._descend(z, y, 0.0)
            if diverged(best, start):  # cannot happen: the restart keeps T = 1 if nothing beats it
                raise fail(note, best, "check the logits for extreme values")
            notes.append(f"{note}; restarted from T=1 (SB-ECE {best:.4g})")
        self.temperature_ = float(np.exp(best_t))
        self.sbece_ = best
        if notes:
            self.fit_note_ = "; ".join(notes)
            warn_refit(self.fit_note_)

    def _descend(self, z, y, log_t0: float) -> tuple[float, float]:
        """``n_steps`` Adam steps on ``log T`` from ``log_t0``: ``(lowest SB-ECE, its log T)``
        (the starting point included)."""
        import torch

        log_t = torch.tensor(log_t0, dtype=torch.float64, device=z.device)
        log_t.requires_grad_(True)
        eager_optimizers(torch.optim.Adam)
        opt = torch.optim.Adam([log_t], lr=self._params["lr"])
        best_t, best = float(log_t.detach()), np.inf
        for _ in range(self._params["n_steps"] + 1):
            opt.zero_grad()
            loss = self._sbece(sb_ece_torch, torch.softmax(z / torch.exp(log_t), dim=1), y)
            value = float(loss.detach())
            if value < best:
                best, best_t = value, float(log_t.detach())
            loss.backward()
            eager_step(opt)
        return best, best_t

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        return softmax(np.asarray(logits, dtype=np.float64) / self.temperature_)

    def _get_state(self) -> dict[str, Any]:
        return {"temperature": self.temperature_, "nll_temperature": self.nll_temperature_}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.temperature_ = float(state["temperature"])
        self.nll_temperature_ = float(state["nll_temperature"])
