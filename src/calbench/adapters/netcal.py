"""netcal (Küppers et al. 2020) calibrators as plug-ins: temperature scaling, histogram binning
(Zadrozny & Elkan 2001), isotonic regression (Zadrozny & Elkan 2002), BBQ (Naeini et al. 2015)
and ENIR (Naeini & Cooper 2016). netcal takes probabilities and maps multiclass input
one-vs-rest (binning methods) or jointly (temperature scaling)."""

from __future__ import annotations

from typing import Any

import numpy as np

from calbench.adapters.base import Adapter
from calbench.calibrators.base import register


class _Netcal(Adapter):
    requires = ("netcal",)
    install = "'calbench[arena]' (netcal)"

    def _make(self) -> Any:
        raise NotImplementedError

    def _fit_lib(self, p: np.ndarray, y: np.ndarray) -> Any:
        model = self._make()
        model.fit(p, y)
        return model

    def _predict_lib(self, model: Any, p: np.ndarray) -> np.ndarray:
        out = np.asarray(model.transform(p), dtype=np.float64)
        if out.ndim == 1:  # binary input: netcal returns the positive class's probability
            out = np.stack([1.0 - out, out], axis=1)
        return out


@register
class NetcalTS(_Netcal):
    """netcal.scaling.TemperatureScaling (Guo et al. 2017, sec. 4.2), netcal's default MLE fit."""

    name = "netcal.ts"
    same_as = "ts"
    reference = "Guo et al. 2017, sec. 4.2; netcal (Küppers et al. 2020)"

    def _make(self) -> Any:
        from netcal.scaling import TemperatureScaling  # lazy: pulls torch

        return TemperatureScaling()


@register
class NetcalHist(_Netcal):
    """netcal.binning.HistogramBinning with ``bins`` equal-width bins (calbench's hist: 20)."""

    name = "netcal.hist"
    same_as = "hist"
    reference = "Zadrozny & Elkan 2001; netcal (Küppers et al. 2020)"

    def __init__(self, *, bins: int = 20) -> None:
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
            raise ValueError(f"bins must be an integer >= 1, got {bins!r}")
        super().__init__(bins=bins)

    def _make(self) -> Any:
        from netcal.binning import HistogramBinning  # lazy: pulls torch

        return HistogramBinning(bins=self._params["bins"])


@register
class NetcalIso(_Netcal):
    """netcal.binning.IsotonicRegression (one-vs-rest, scikit-learn's PAV inside)."""

    name = "netcal.iso"
    same_as = "iso"
    reference = "Zadrozny & Elkan 2002; netcal (Küppers et al. 2020)"

    def _make(self) -> Any:
        from netcal.binning import IsotonicRegression  # lazy: pulls torch

        return IsotonicRegression()


@register
class NetcalBBQ(_Netcal):
    """netcal.binning.BBQ, Bayesian binning into quantiles with the BIC score."""

    name = "netcal.bbq"
    same_as = "bbq"
    reference = "Naeini, Cooper & Hauskrecht 2015; netcal (Küppers et al. 2020)"

    def _make(self) -> Any:
        from netcal.binning import BBQ  # lazy: pulls torch

        return BBQ()


@register
class NetcalENIR(_Netcal):
    """netcal.binning.ENIR, ensemble of near-isotonic regressions (no calbench counterpart)."""

    name = "netcal.enir"
    reference = "Naeini & Cooper 2016; netcal (Küppers et al. 2020)"

    def _make(self) -> Any:
        from netcal.binning import ENIR  # lazy: pulls torch

        return ENIR()
