"""Proper-score calibration verdicts: a paired NLL or Brier difference against uncalibrated reads
as the change in calibration error when the calibrator's map is injective (Gruber & Buettner
2022), as a change in score otherwise; other rows carry no reading."""

from __future__ import annotations

from calbench.report import render
from calbench.report.context import build_context
from calbench.report.views import compare_view, proper_reading

PROV = {"config": "", "packages": {}, "logits": [], "splits": [], "datasets": []}
SPEC = {
    "title": "Proper scores",
    "description": "",
    "protocol": {"n_bins": 15, "plot_bins": 10, "n_bootstrap": 20, "level": 0.95},
    "datasets": {"ds": {"display": "DS"}},
    "models": {"m": {"dataset": "ds", "display": {"name": "net"}}},
    "calibrators": {
        "uncalibrated": {"display": "Uncal", "method": "uncalibrated"},
        "ts": {"display": "TS", "method": "ts"},
        "iso": {"display": "Isotonic", "method": "iso"},
        "mine": {"display": "Mine", "method": "not_registered"},
    },
    "table_metrics": ["nll"],
    "losses_metrics": [],
    "reference": None,
}


def _row(metric, method, baseline, family):
    return {"dataset": "ds", "model": "m", "half": "test", "metric": metric, "method": method,
            "baseline": baseline, "value": 0.5, "baseline_value": 0.6, "difference": -0.1,
            "ci_low": -0.12, "ci_high": -0.08, "p_value": 0.001, "n_resamples": 20,
            "interval": "percentile", "selected_on": "", "family": family, "family_size": 5,
            "test": "paired_t", "n_permutations": 0, "p_holm": 0.005, "min_p_holm": 0.0,
            "alpha": 0.05, "direction": "better", "p_floor": 0.0,
            "null_hypothesis": "equal expected per-sample score"}  # fmt: skip


def test_readings_of_proper_score_rows():
    ts = _row("nll", "ts", "uncalibrated", "vs:uncalibrated")
    assert proper_reading(ts, SPEC) == "calibration error change (injective)"
    # the mirrored row of the same pair reads the same
    back = _row("brier", "uncalibrated", "ts", "vs:ts")
    assert proper_reading(back, SPEC) == "calibration error change (injective)"
    iso = _row("nll", "iso", "uncalibrated", "vs:uncalibrated")
    assert proper_reading(iso, SPEC) == "score change only (not known injective)"
    mine = _row("nll", "mine", "uncalibrated", "vs:uncalibrated")
    assert proper_reading(mine, SPEC) == "score change only (unregistered)"
    # not a proper score, or not against uncalibrated: no reading
    assert proper_reading(_row("ece_ub", "ts", "uncalibrated", "vs:uncalibrated"), SPEC) == ""
    assert proper_reading(_row("nll", "iso", "ts", "vs:ts"), SPEC) == ""


def test_the_comparison_table_and_text_say_it_and_cite_the_source():
    compare = [
        _row("nll", "ts", "uncalibrated", "vs:uncalibrated"),
        _row("nll", "iso", "uncalibrated", "vs:uncalibrated"),
        _row("ece_ub", "ts", "uncalibrated", "vs:uncalibrated"),
    ]
    view = compare_view(compare, SPEC, 0.95)
    j = view["header"].index("Reads as")
    assert [r[j]["text"] for r in view["rows"]] == [
        "calibration error change (injective)",
        "score change only (not known injective)",
        "",
    ]
    assert view["n_proper"] == 2
    rows = [{"dataset": "ds", "model": "m", "method": c, "half": "test", "metric": "nll",
             "value": 0.5, "ci_low": 0.4, "ci_high": 0.6} for c in SPEC["calibrators"]]  # fmt: skip
    ctx = build_context(rows=rows, compare=compare, spec=SPEC, grids={}, provenance=PROV)
    html = render.render_html(ctx)
    assert "Gruber &amp; Buettner 2022" in html and "Gruber & Buettner 2022" in ctx["bibliography"]
