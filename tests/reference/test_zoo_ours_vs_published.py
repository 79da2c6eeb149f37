"""Ours-vs-published tables and the accuracy check (calbench.reference.ours_vs_published), by hand."""

import math

import pytest

from calbench.reference import ours_vs_published as C

SPEC = {
    "title": "t",
    "datasets": {"cifar10": {"display": "CIFAR-10"}},
    "models": {
        "a": {"dataset": "cifar10", "group": 1, "display": {"name": "A"}, "expected_acc": 90.0},
        "b": {
            "dataset": "cifar10",
            "group": 2,
            "display": {"name": "B", "loss": "CE"},
            "expected_acc": 80.0,
        },
    },
    "calibrators": {"ts": {"display": "T-scaling"}, "ms_b": {"display": "M-scaling-b"}},
    "table_metrics": ["ece"],
    "reference": {"units": "display", "tolerances": {"ece": 0.001}},
}


def _ours(model, method, value):
    return {
        "dataset": "cifar10",
        "model": model,
        "method": method,
        "half": "test",
        "metric": "ece",
        "value": value,
    }


def _ref(model, method, value):
    return {"dataset": "cifar10", "model": model, "method": method, "metric": "ece", "value": value}


def test_cells_in_printed_units_with_tolerance_and_expected_differences():
    ours = [_ours("a", "ts", 0.0250), _ours("a", "ms_b", 0.40), _ours("b", "ts", 0.0300)]
    ours.append({**_ours("a", "ts", 0.9), "half": "val"})  # other half: ignored
    ref = [_ref("a", "ts", "2.48"), _ref("a", "ms_b", "50.05"), _ref("b", "ts", "2.80")]
    rows = {(r["model"], r["method"]): r for r in C.comparison_rows(ours, ref, SPEC)}
    # 2.50 % vs 2.48 %: |0.0002| <= 0.001 -> ok; 3.00 vs 2.80: 0.002 > 0.001 -> differs
    assert rows[("a", "ts")]["status"] == C.OK
    assert rows[("a", "ts")]["difference"] == pytest.approx(0.0002)
    assert rows[("b", "ts")]["status"] == C.FLAGGED
    assert rows[("a", "ms_b")]["status"] == C.EXPECTED  # 40 % vs 50.05 %, but M-scaling-b
    assert rows[("b", "ms_b")]["status"] == C.MISSING
    tabs = C.tables(list(rows.values()), SPEC)
    assert [(t["metric"], t["group"]) for t in tabs] == [("ece", 1), ("ece", 2)]
    assert tabs[0]["header"] == ["Dataset", "Model"] and tabs[1]["header"][-1] == "Loss"
    assert tabs[0]["columns"] == ["T-scaling", "M-scaling-b"]
    cell = tabs[0]["rows"][0]["cells"][0]
    assert (cell["ours"], cell["published"], cell["difference"]) == ("2.50", "2.48", "+0.02")
    assert tabs[1]["rows"][0]["labels"] == ["CIFAR-10", "B", "CE"]
    md = C.to_markdown(tabs, [], SPEC)
    assert "| CIFAR-10 | B | CE | 3.00 / 2.80 / +0.20 ⚠ | – / – / – |" in md
    assert "M-scaling-b is expected to differ" in md and "ece 0.10" in md


def test_fraction_units_and_bad_units():
    spec = {**SPEC, "reference": {"units": "fraction", "tolerances": {}}}
    rows = C.comparison_rows([_ours("a", "ts", 0.02)], [_ref("a", "ts", 0.5)], spec)
    assert rows[0]["published"] == 0.5 and rows[0]["status"] == C.OK  # no tolerance: not flagged
    with pytest.raises(ValueError, match="units"):
        C.comparison_rows([], [], {**SPEC, "reference": {"units": "percent"}})


def test_accuracy_check():
    rows = C.accuracy_check({"a": (10000, 0.9004), "b": (10000, 0.7950)}, SPEC, tolerance_pp=0.1)
    a, b = rows
    assert a["ours"] == pytest.approx(90.04) and a["difference"] == pytest.approx(0.04)
    assert a["status"] == C.OK and b["status"] == C.FLAGGED  # 79.50 vs 80.00
    rows = C.accuracy_check({}, SPEC)
    assert all(r["status"] == C.MISSING and math.isnan(r["ours"]) for r in rows)
    with pytest.raises(ValueError, match="tolerance_pp"):
        C.accuracy_check({}, SPEC, tolerance_pp=-1)
