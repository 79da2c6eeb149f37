"""The findings summary: ranks, winner counts, Friedman/Nemenyi and anomalies from the rows."""

from __future__ import annotations

import numpy as np
import pytest

from calbench.report import summary as SU
from calbench.report.ranks import rank_summaries


def _rows(values: dict) -> list[dict]:
    """``{(model, method, metric): value}`` -> long test-half rows."""
    return [
        {"dataset": "d", "model": m, "method": c, "half": "test", "metric": k, "value": v}
        for (m, c, k), v in values.items()
    ]


MODELS = ["a", "b", "c"]
METHODS = ["uncalibrated", "ts", "vs"]
LABELS = {"uncalibrated": "Uncalibrated", "ts": "TS", "vs": "VS"}


def _study(acc_vs_b=0.80, ece_unc_c=0.05, bound_unc_c=None):
    v = {}
    for m, acc in zip(MODELS, (0.70, 0.80, 0.90), strict=True):
        v[(m, "uncalibrated", "accuracy")] = acc
        v[(m, "ts", "accuracy")] = acc
        v[(m, "vs", "accuracy")] = acc
    v[("b", "vs", "accuracy")] = acc_vs_b
    for m, e in zip(MODELS, (0.10, 0.08, ece_unc_c), strict=True):
        v[(m, "uncalibrated", "ece_ub")] = e
        v[(m, "ts", "ece_ub")] = 0.01
        v[(m, "vs", "ece_ub")] = 0.02
    rows = _rows(v)
    for r in rows:  # the unbiased ECE's interval: [value / 2, value + 0.003]
        if r["metric"] == "ece_ub":
            r["ci_low"], r["ci_high"] = r["value"] / 2, r["value"] + 0.003
            if bound_unc_c is not None and (r["model"], r["method"]) == ("c", "uncalibrated"):
                r["ci_high"] = bound_unc_c
    return rows


def test_ranks_wins_and_friedman():
    rows = _study()
    # the plug-in ECE gives no ranks (its bias depends on sharpness); the unbiased one does
    assert (
        rank_summaries(_rows({("a", "ts", "ece"): 0.1}), ["ece"], MODELS, ["ts"], LABELS) == []
    )
    (ece,) = rank_summaries(rows, ["ece", "ece_ub"], MODELS, METHODS, LABELS)
    assert [(d["label"], d["rank"], d["wins"]) for d in ece["methods"]] == [
        ("TS", 1.0, 3),
        ("VS", 2.0, 0),
        ("Uncalibrated", 3.0, 0),
    ]
    # every model ranks the three alike: chi2 = 12n/(k(k+1)) (sum R^2 - k(k+1)^2/4) = 6
    assert ece["friedman"].chi2 == pytest.approx(6.0)
    assert ece["cd"] == pytest.approx(2.343 * np.sqrt(3 * 4 / 18), abs=1e-3)
    assert ece["figure"].startswith("data:image/svg+xml;base64,")
    # CD = 1.91: Uncalibrated (rank gap 2.0) differs from TS, VS (gap 1.0) does not
    assert ece["worse_than_best"] == ["Uncalibrated"]


def test_findings_headlines_and_anomalies_come_from_the_data():
    rows = _study(acc_vs_b=0.84, ece_unc_c=0.004, bound_unc_c=0.008)
    ranks = rank_summaries(rows, ["accuracy", "ece_ub"], MODELS, METHODS, LABELS)
    out = SU.findings(rows, ranks, MODELS, METHODS, {"b": "ResNet"}, LABELS)
    heads, anomalies = out["headlines"], out["anomalies"]
    assert "TS never changes accuracy: 3/3 models identical to uncalibrated." in heads
    assert (
        "Accuracy changes with VS on 1/3 (+0.00 to +4.00) models (the change over models in "
        "points; not tested)." in heads
    )
    # three models cannot make the Iman-Davenport test reject: the rank headline is "to check"
    assert anomalies[0].startswith(
        "TS has the best average rank on Unbiased ECE (1.33 over 3 models; best on 2/3)"
    )
    moved = "VS moves the accuracy of ResNet from 80.0% to 84.0% (+4.0 points)"
    assert any(moved in a for a in anomalies)
    calibrated = "c is calibrated within 1.00 points before calibration (unbiased ECE 0.40%"
    assert any(a.startswith(calibrated) for a in anomalies)
    # a 1-point change is not flagged; an upper bound above 1 point is not "calibrated within"
    rows = _study(acc_vs_b=0.81, ece_unc_c=0.004, bound_unc_c=0.012)
    ranks = rank_summaries(rows, ["ece_ub"], MODELS, METHODS, LABELS)
    out = SU.findings(rows, ranks, MODELS, METHODS, {}, LABELS)
    assert not [a for a in out["anomalies"] if "moves the accuracy" in a or "within" in a]
    assert [d["text"] for d in out["items"] if d["support"] == "supported"] == out["headlines"]


def _cmp(model, method, metric, diff, p_holm, direction, family="vs:uncalibrated"):
    base = family[3:] if family.startswith("vs:") else "uncalibrated"
    return {"dataset": "d", "model": model, "metric": metric, "family": family,
            "method": method, "baseline": base, "difference": diff, "p_holm": p_holm,
            "direction": direction}  # fmt: skip


def test_finding_items_lead_with_supported_results_with_size_and_direction():
    compare = [
        # TS lowers NLL significantly on 2/3 models, never raises it: supported, median -0.05
        _cmp("a", "ts", "nll", -0.05, 0.001, "better"),
        _cmp("b", "ts", "nll", -0.08, 0.01, "better"),
        _cmp("c", "ts", "nll", -0.01, 0.30, "better"),
        # VS: better on one model, worse on another: to check, mixed
        _cmp("a", "vs", "nll", -0.02, 0.01, "better"),
        _cmp("b", "vs", "nll", 0.03, 0.02, "worse"),
        _cmp("c", "vs", "nll", 0.00, 0.90, "equal"),
        # the cross-fitted pick beaten on model b: to check
        _cmp("b", "vs", "ece_ub", 0.004, 0.03, "worse", family="best"),
    ]
    items = SU.finding_items(_study(), [], MODELS, METHODS, {"b": "ResNet"}, LABELS, compare)
    assert {frozenset(d) for d in items} == {
        frozenset({"family", "text", "direction", "size", "support", "pairs"})
    }
    first = items[0]
    assert first["text"] == (
        "TS lowers NLL vs Uncalibrated on 2/3 models (significant after Holm; median "
        "difference -0.050)."
    )
    assert (first["direction"], first["size"], first["support"]) == ("better", -0.05, "supported")
    vs = next(d for d in items if d["text"].startswith("VS vs Uncalibrated on NLL"))
    assert (vs["direction"], vs["support"]) == ("mixed", "to check")
    assert "better on 1/3 and worse on 1/3" in vs["text"]
    best = next(d for d in items if d["family"] == "best")
    assert best["support"] == "to check" and best["direction"] == "worse"
    assert best["text"].startswith("ResNet: VS, the best-on-validation pick for Unbiased ECE")
    support = [d["support"] for d in items]
    assert support == sorted(support, key=lambda s: s != "supported")  # supported first


def test_supported_results_of_one_kind_are_one_finding_listing_each_size():
    compare = [_cmp(m, c, "ece_ub", d, 0.001, "better") for m in MODELS for c, d in
               (("ts", -0.03), ("vs", -0.05))]  # fmt: skip
    (item,) = SU.finding_items([], [], MODELS, METHODS, {}, LABELS, compare)
    assert item["text"] == (
        "2 calibrators lower Unbiased ECE vs Uncalibrated on 3/3 models (significant after "
        "Holm; median difference VS -5.00 points; TS -3.00 points)."
    )
    assert (item["direction"], item["support"]) == ("better", "supported")
    assert item["size"] == pytest.approx(-0.04)


def test_a_worse_result_says_raises_for_an_error_and_lowers_for_a_score():
    compare = [_cmp(m, "iso", "nll", 0.1, 0.001, "worse") for m in MODELS]
    compare += [_cmp(m, "iso", "accuracy", -0.02, 0.001, "worse") for m in MODELS]
    items = SU.finding_items([], [], MODELS, METHODS, {}, {}, compare)
    texts = [d["text"] for d in items]
    assert any(t.startswith("iso raises NLL vs uncalibrated on 3/3 models") for t in texts)
    assert any(t.startswith("iso lowers Accuracy vs uncalibrated on 3/3 models") for t in texts)
    assert {d["direction"] for d in items} == {"worse"}


def test_format_p():
    assert SU.format_p(0.0) == "< 0.001" and SU.format_p(0.0009) == "< 0.001"
    assert SU.format_p(0.001) == "0.001" and SU.format_p(0.04567) == "0.046"
    assert SU.format_p(float("nan")) == "–"


def test_format_p_at_the_resolution_floor():
    # a sign-flip p-value of 1/(B+1) with B = 719 is at most that, not equal to it
    assert SU.format_p(1 / 720, 1 / 720) == "≤ 0.00139"
    assert SU.format_p(5 / 720, 5 / 720) == "≤ 0.00694"  # Holm over 5: m / (B + 1)
    assert SU.format_p(2 / 720, 1 / 720) == "0.003"  # above the floor: exact
    assert SU.format_p(1 / 100_001, 1 / 100_001) == "≤ 1e-05"
    assert SU.format_p(0.0001, 0.0) == "< 0.001"  # an analytic p-value has no floor


def test_findings_of_a_cross_fitted_study_name_its_samples_not_the_halves():
    """A cross-fitted study's rows (half ``oof``) have no validation or test half: the "best"
    finding names the nested pick and the out-of-fold predictions, the accuracy anomaly the
    folds a calibrator was trained on; a holdout study keeps its halves."""
    rows = _study(acc_vs_b=0.84)
    oof = [{**r, "half": "oof"} for r in rows]
    compare = [_cmp("b", "vs", "ece_ub", 0.004, 0.03, "worse", family="best")]
    for study, want, gone in (
        (oof, ("out-of-fold predictions", "nested cross-fitted pick", "folds it was trained on"),
         ("test half", "validation half", "best-on-validation")),
        (rows, ("test half", "best-on-validation pick", "validation half"), ("out-of-fold",)),
    ):  # fmt: skip
        items = SU.finding_items(study, [], MODELS, METHODS, {"b": "ResNet"}, LABELS, compare)
        text = " ".join(d["text"] for d in items if d["family"] in ("best", "accuracy"))
        assert all(w in text for w in want), text
        assert not any(g in text for g in gone), text
