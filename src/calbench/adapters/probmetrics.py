"""probmetrics (Berta et al. 2025) calibrators as plug-ins: its temperature scaling (bisection on
the inverse temperature) and structured vector / matrix scaling (SVS, SMS). probmetrics takes
probabilities."""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np

from calbench.adapters.base import Adapter
from calbench.calibrators.base import register


def probmetrics_calibrators():
    """``probmetrics.calibrators``. probmetrics imports numba at module level for its SAGA
    solver without declaring the dependency; these adapters use its bisection and BFGS paths
    only, so when numba is absent a stand-in ``numba.njit`` (identity decorator) is in
    ``sys.modules`` while probmetrics is imported, and removed afterwards."""
    if "probmetrics.calibrators" in sys.modules:
        return sys.modules["probmetrics.calibrators"]
    stub = None
    try:
        import numba  # noqa: F401
    except ImportError:
        stub = types.ModuleType("numba")
        stub.njit = lambda *a, **k: a[0] if a and callable(a[0]) else (lambda f: f)
        sys.modules["numba"] = stub
    try:
        import probmetrics.calibrators as pc  # lazy: pulls torch
    finally:
        if stub is not None and sys.modules.get("numba") is stub:
            del sys.modules["numba"]
    return pc


class _Probmetrics(Adapter):
    requires = ("probmetrics",)
    install = "'calbench[arena]' (probmetrics)"
    method = ""
    options: dict = {}

    def _fit_lib(self, p: np.ndarray, y: np.ndarray) -> Any:
        import torch  # lazy: pulls torch

        torch.manual_seed(0)
        model = probmetrics_calibrators().get_calibrator(self.method, **self.options)
        model.fit(p, y)
        return model

    def _predict_lib(self, model: Any, p: np.ndarray) -> np.ndarray:
        return np.asarray(model.predict_proba(p), dtype=np.float64)


@register
class ProbmetricsTS(_Probmetrics):
    """probmetrics' temperature scaling: 30 bisection steps on log(1/T) of the NLL's gradient."""

    name = "probmetrics.ts"
    same_as = "ts"
    method = "temp-scaling"
    reference = "Guo et al. 2017, sec. 4.2; probmetrics (Berta et al. 2025)"


@register
class ProbmetricsSVS(_Probmetrics):
    """probmetrics' structured vector scaling (ridge penalties, BFGS)."""

    name = "probmetrics.svs"
    same_as = "svs"
    method = "svs"
    options = {"svs_print_init_info": False}
    reference = "Berta et al. 2025 (structured vector scaling); probmetrics"


@register
class ProbmetricsSMS(_Probmetrics):
    """probmetrics' structured matrix scaling (ridge penalties, BFGS)."""

    name = "probmetrics.sms"
    same_as = "sms"
    method = "sms"
    options = {"sms_print_init_info": False}
    reference = "Berta et al. 2025 (structured matrix scaling); probmetrics"
