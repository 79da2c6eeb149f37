"""One estimate per metric: the report's average ranks (and the findings drawn from them) rank
the unbiased errors on the same signed statistic as the robustness section, so both name the
same best calibrator even where several calibrators' estimates fall below 0 (the reported
``sqrt(max(T, 0))`` ties them all at 0)."""

from __future__ import annotations

import numpy as np
import pytest

from calbench.functional import softmax
from calbench.metrics import METRICS
from calbench.report.context import build_context
from calbench.stats import ranks_nan_last
from calbench.stats.robustness import (
    DEFAULT_VARIANT,
    SIGNED_ESTIMATES,
    VARIANTS,
    robustness_rows,
    signed_estimates,
)

METHODS = ("a", "b", "c")
PROV = {"config": "", "packages": {}, "logits": [], "splits": [], "datasets": []}
SPEC = {
    "title": "One estimate",
    "description": "",
    "protocol": {"n_bins": 15, "plot_bins": 10, "n_bootstrap": 20, "level": 0.95},
    "datasets": {"ds": {"display": "DS"}},
    "models": {f"m{i}": {"dataset": "ds", "display": {"name": f"net {i}"}} for i in range(8)},
    "calibrators": {m: {"display": m.upper()} for m in METHODS},
    "table_metrics": ["ece_ub"],
    "losses_metrics": [],
    "reference": None,
}


def _study():
    """8 models: ``a`` and ``b`` below 0 on every model (``b`` further), ``c`` above."""
    rng = np.random.default_rng(0)
    rows, robust = [], []
    for i in range(8):
        signed = {"a": -0.01 - rng.uniform(0, 0.004), "b": -0.03, "c": 0.04 + i / 1000}
        r = dict(zip(METHODS, ranks_nan_last([signed[m] for m in METHODS]), strict=True))
        for m in METHODS:
            v = max(signed[m], 0.0)  # what the metric reports
            rows.append({"dataset": "ds", "model": f"m{i}", "method": m, "half": "test",
                         "metric": "ece_ub", "value": v, "ci_low": 0.0, "ci_high": v + 0.01})  # fmt: skip
            for variant in VARIANTS:
                default = variant == DEFAULT_VARIANT
                robust.append({"dataset": "ds", "model": f"m{i}", "method": m, "variant": variant,
                               "value": signed[m], "rank": float(r[m]),
                               "p_first": float(m == "b") if default else float("nan"),
                               "p_runner_up": 0.01 if default and m == "b" else float("nan")})  # fmt: skip
    return rows, robust


def test_ranks_and_robustness_name_the_same_best_calibrator():
    rows, robust = _study()
    ctx = build_context(
        rows=rows, compare=[], spec=SPEC, grids={}, provenance=PROV, robustness=robust
    )
    (ece,) = [r for r in ctx["ranks"] if r["metric"] == "ece_ub"]
    assert [m["key"] for m in ece["methods"]] == ["b", "a", "c"]
    assert [m["rank"] for m in ece["methods"]] == [1.0, 2.0, 3.0]
    assert ece["methods"][0]["wins"] == 8 and ece["methods"][1]["wins"] == 0
    assert ctx["robustness"]["sentence"].startswith(("Robust: B ", "Not shown robust: B "))


def test_a_signed_value_that_does_not_clip_to_the_reported_one_is_an_error():
    rows, robust = _study()
    for r in robust:
        if r["model"] == "m3" and r["method"] == "c":
            r["value"] += 0.01
    with pytest.raises(ValueError, match="ece_ub of m3/c: the robustness rows' signed value"):
        build_context(
            rows=rows, compare=[], spec=SPEC, grids={}, provenance=PROV, robustness=robust
        )


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_each_signed_estimate_clips_to_its_metric(dtype):
    """The robustness variant of each metric of SIGNED_ESTIMATES is the metric's own ``T``,
    signed: clipped at 0 it is the reported value, to the last bit."""
    rng = np.random.default_rng(3)
    z = rng.normal(size=(150, 4)) * 2.0
    p = softmax(z)
    y = (p.cumsum(1) > rng.random((150, 1))).argmax(1)  # labels drawn from p: calibrated
    by = {"good": p, "over": softmax(3 * z), "under": softmax(z / 3)}
    by = {m: v.astype(dtype) for m, v in by.items()}
    rows = robustness_rows(by, y, dataset="d", model="m", n_resamples=0)
    signed = signed_estimates(rows)
    assert {r["metric"] for r in signed} == set(SIGNED_ESTIMATES)
    for r in signed:
        assert max(r["value"], 0.0) == METRICS[r["metric"]](by[r["method"]], y)
    assert min(r["value"] for r in signed) < 0  # the case the clipping ties
