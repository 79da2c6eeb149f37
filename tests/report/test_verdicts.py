"""The report's "calibrated within delta?" table: a calibrator is shown within delta only when
the upper bound of its unbiased ECE's interval lies below delta, with no multiplicity
adjustment (calbench.report.verdicts.verdict_view)."""

import math

import numpy as np
import pytest

from calbench.report.verdicts import VERDICT_METRIC, detectable_error, verdict_view

SPEC = {
    "models": {"m1": {"dataset": "d", "display": {"name": "Net"}}},
    "calibrators": {"a": {"display": "A"}, "b": {"display": "B"}, "c": {"display": "C"}},
    "protocol": {"calibrated_within": 0.01, "level": 0.95},
}


def _rows(bounds, metric=VERDICT_METRIC, half="test", model="m1"):
    """``{method: (value, ci_high)}`` -> metric rows."""
    return [
        {
            "dataset": "d",
            "model": model,
            "method": m,
            "half": half,
            "metric": metric,
            "value": v,
            "ci_low": 0.0,
            "ci_high": hi,
        }  # fmt: skip
        for m, (v, hi) in bounds.items()
    ]


def test_within_delta_only_when_the_upper_bound_is_below_delta():
    # a: bound 0.009 < 0.01 -> within; b: bound exactly 0.01 -> not shown; c: estimate 0 but
    # bound 0.02 (too few samples) -> not shown within, never "miscalibrated"
    view = verdict_view(_rows({"a": (0.004, 0.009), "b": (0.002, 0.01), "c": (0.0, 0.02)}), SPEC)
    cells = view["rows"][0]["cells"]
    assert [c["ok"] for c in cells] == [True, False, False]
    assert cells[0]["text"] == "within (bound 0.90%)"
    assert cells[1]["text"] == "not shown within (bound 1.00%)"
    assert cells[2]["text"] == "not shown within (bound 2.00%)"
    assert not any("calibrated" in c["text"] for c in cells)
    assert (view["n_within"], view["n"], view["m"]) == (1, 3, 3)
    assert view["delta"] == "1.00" and view["level"] == "97.5"
    assert view["header"] == ["A", "B", "C"] and view["rows"][0]["label"] == "Net"


def test_no_multiplicity_adjustment_more_calibrators_do_not_change_a_verdict():
    one = verdict_view(_rows({"a": (0.004, 0.009)}), SPEC)
    many = {f"x{i}": (0.004, 0.012) for i in range(15)}
    more = verdict_view(_rows({"a": (0.004, 0.009), **many}), SPEC)
    assert one["rows"][0]["cells"][0]["ok"] is True
    assert more["rows"][0]["cells"][0]["ok"] is True
    assert [c["ok"] for c in more["rows"][0]["cells"][1:]] == [False] * 15


def test_delta_comes_from_the_config_and_is_validated():
    rows = _rows({"a": (0.004, 0.009)})
    spec = {**SPEC, "protocol": {"calibrated_within": 0.005}}
    assert verdict_view(rows, spec)["rows"][0]["cells"][0]["ok"] is False
    with pytest.raises(ValueError, match="calibrated_within must lie in"):
        verdict_view(rows, {**SPEC, "protocol": {"calibrated_within": 1.5}})


def test_smallest_detectable_error_known_answers():
    # estimate 0.03, bound 0.05: sqrt(0.05^2 - 0.03^2) = 0.04
    assert detectable_error(0.03, 0.05) == pytest.approx(0.04)
    assert detectable_error(0.0, 0.02) == pytest.approx(0.02)
    assert math.isnan(detectable_error(0.01, float("nan")))
    view = verdict_view(_rows({"a": (0.03, 0.05), "b": (0.0, 0.02), "c": (0.0, 0.06)}), SPEC)
    assert view["rows"][0]["detectable"] == "2.00%"  # the smallest of 4, 2, 6 points


def test_no_interval_rows_no_section_and_validation_half_ignored():
    assert verdict_view(_rows({"a": (0.01, 0.02)}, metric="ece"), SPEC) is None
    assert verdict_view(_rows({"a": (0.01, 0.02)}, half="val"), SPEC) is None
    assert verdict_view(_rows({"a": (0.01, float("nan"))}), SPEC) is None


def test_bound_from_the_registered_interval_matches_stats():
    # the metrics CSV's ci_high of ece_ub is the upper end of stats.ub_interval at the level
    from calbench.functional import softmax
    from calbench.metrics import METRICS
    from calbench.stats import ub_interval
    from calbench.steps import evaluate_rows

    rng = np.random.default_rng(0)
    p = softmax(rng.normal(size=(3000, 5)) * 3)
    y = (p.cumsum(1) > rng.random((3000, 1))).argmax(1)
    halves = {"test": (None, y), "meta": {"dataset": "d", "model": "m1"}}
    rows = evaluate_rows(halves, {"test": p}, "a", {VERDICT_METRIC: METRICS[VERDICT_METRIC]},
                         half_names=["test"], n_bootstrap=10, level=0.95, seed=0)  # fmt: skip
    _, _, hi = ub_interval(VERDICT_METRIC, p, y, 0.95)
    assert rows[0]["ci_high"] == pytest.approx(hi)
    view = verdict_view(rows, SPEC)
    assert view["rows"][0]["cells"][0]["ok"] == (hi < 0.01)


@pytest.mark.parametrize("half, samples", [("test", "these test halves"), ("oof", "these samples")])
def test_the_finding_names_the_samples_the_bound_is_computed_on(half, samples):
    """A cross-fitted study's bounds are computed on every labelled sample's out-of-fold
    prediction, not on a test half: the finding says so."""
    from calbench.report.verdicts import add_findings

    view = verdict_view(_rows({"a": (0.004, 0.009), "b": (0.002, 0.03)}, half=half), SPEC)
    found = {"items": [], "headlines": [], "anomalies": []}
    add_findings(found, view, None)
    (item,) = [d for d in found["items"] if d["family"] == "calibrated"]
    assert f"The smallest error {samples} can show is" in item["text"]
