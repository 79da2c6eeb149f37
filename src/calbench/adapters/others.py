"""betacal, venn-abers and scikit-learn calibrators as plug-ins, one-vs-rest on the softmax
probabilities (binary: the positive class), as each library's own multiclass wrapper does."""

from __future__ import annotations

from typing import Any

import numpy as np

from calbench.adapters.base import Adapter, apply_one_vs_rest, one_vs_rest
from calbench.calibrators.base import register


@register
class BetacalBeta(Adapter):
    """betacal.BetaCalibration("abm") per class (Kull, Silva Filho & Flach 2017)."""

    name = "betacal.beta"
    same_as = "beta"
    requires = ("betacal",)
    reference = "Kull, Silva Filho & Flach 2017; betacal"

    def _fit_lib(self, p: np.ndarray, y: np.ndarray) -> Any:
        from betacal import BetaCalibration  # lazy: pulls scipy

        return one_vs_rest(lambda s, t: BetaCalibration("abm").fit(s, t), p, y)

    def _predict_lib(self, model: Any, p: np.ndarray) -> np.ndarray:
        return apply_one_vs_rest(lambda m, s: m.predict(s), model, p)


@register
class VennAbersIVAP(Adapter):
    """venn_abers.VennAbersCalibrator, inductive Venn-Abers one-vs-rest (Vovk & Petej 2014):
    the merged probability p1 / (1 - p0 + p1) of each class, renormalised."""

    name = "venn_abers.ivap"
    same_as = "venn_abers"
    requires = ("venn_abers",)
    reference = "Vovk & Petej 2014 (inductive Venn-Abers); venn-abers"

    def _fit_lib(self, p: np.ndarray, y: np.ndarray) -> Any:
        from venn_abers import VennAbersCalibrator  # lazy: pulls scipy

        return VennAbersCalibrator(), p, y

    def _predict_lib(self, model: Any, p: np.ndarray) -> np.ndarray:
        va, p_cal, y_cal = model
        return va.predict_proba(p_cal=p_cal, y_cal=y_cal, p_test=p, va_type="one_vs_rest")


@register
class SklearnIsotonic(Adapter):
    """sklearn.isotonic.IsotonicRegression per class (clipped out of range), renormalised: what
    ``CalibratedClassifierCV(method="isotonic")`` does with predict_proba scores."""

    name = "sklearn.iso"
    same_as = "iso"
    requires = ("sklearn",)
    install = "scikit-learn"
    reference = "Zadrozny & Elkan 2002; scikit-learn (Pedregosa et al. 2011)"

    def _fit_lib(self, p: np.ndarray, y: np.ndarray) -> Any:
        from sklearn.isotonic import IsotonicRegression  # lazy: pulls scipy

        def fit(s, t):
            return IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(s, t)

        return one_vs_rest(fit, p, y)

    def _predict_lib(self, model: Any, p: np.ndarray) -> np.ndarray:
        return apply_one_vs_rest(lambda m, s: m.predict(s), model, p)


@register
class SklearnSigmoid(Adapter):
    """scikit-learn's sigmoid calibration (Platt 1999) per class on the probabilities, the map of
    ``CalibratedClassifierCV(method="sigmoid")`` with predict_proba scores, renormalised."""

    name = "sklearn.sigmoid"
    same_as = "platt"
    requires = ("sklearn",)
    install = "scikit-learn"
    reference = "Platt 1999; scikit-learn (Pedregosa et al. 2011)"

    def _fit_lib(self, p: np.ndarray, y: np.ndarray) -> Any:
        from sklearn.calibration import _SigmoidCalibration  # lazy: pulls scipy

        return one_vs_rest(lambda s, t: _SigmoidCalibration().fit(s, t), p, y)

    def _predict_lib(self, model: Any, p: np.ndarray) -> np.ndarray:
        return apply_one_vs_rest(lambda m, s: m.predict(s), model, p)
