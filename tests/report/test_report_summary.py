"""The findings summary: ranks, winner counts, Friedman/Nemenyi and anomalies from the rows."""

from __future__ import annotations

import numpy as np
import pytest

from calbench.report import summary as SU


def _rows(values: dict) -> list[dict]:
    """``{(model, method, metric): value}`` -> long test-half rows."""
    return [
        {"dataset": "d", "model": m, "method": c, "half": "test", "metric": k, "value": v}
        for (m, c, k), v in values.items()
    ]


MODELS = ["a", "b", "c"]
METHODS = ["uncalibrated", "ts", "vs"]
LABELS = {"uncalibrated": "Uncalibrated", "ts": "TS", "vs": "VS"}


def _study(acc_vs_b=0.80, ece_unc_c=0.05):
    v = {}
    for m, acc in zip(MODELS, (0.70, 0.80, 0.90), strict=True):
        v[(m, "uncalibrated", "accuracy")] = acc
        v[(m, "ts", "accuracy")] = acc
        v[(m, "vs", "accuracy")] = acc
    v[("b", "vs", "accuracy")] = acc_vs_b
    for m, e in zip(MODELS, (0.10, 0.08, ece_unc_c), strict=True):
        v[(m, "uncalibrated", "ece")] = e
        v[(m, "ts", "ece")] = 0.01
        v[(m, "vs", "ece")] = 0.02
    return _rows(v)


def test_ranks_wins_and_friedman():
    rows = _study()
    (ece,) = SU.rank_summaries(rows, ["ece"], MODELS, METHODS, LABELS)
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
    rows = _study(acc_vs_b=0.84, ece_unc_c=0.004)
    ranks = SU.rank_summaries(rows, ["accuracy", "ece"], MODELS, METHODS, LABELS)
    out = SU.findings(rows, ranks, MODELS, METHODS, {"b": "ResNet"}, LABELS)
    heads, anomalies = out["headlines"], out["anomalies"]
    assert heads[0].startswith(
        "TS has the best average rank on ECE (1.33 over 3 models; best on 2/3)"
    )
    assert "TS never changes accuracy: 3/3 models identical to uncalibrated." in heads
    assert "Accuracy changes with VS on 1/3 models." in heads
    moved = "VS moves the accuracy of ResNet from 80.0% to 84.0% (+4.0 points)"
    assert any(moved in a for a in anomalies)
    calibrated = "c is already calibrated before calibration (ECE 0.40%)"
    assert any(a.startswith(calibrated) for a in anomalies)
    # a 1-point change is not flagged
    rows = _study(acc_vs_b=0.81, ece_unc_c=0.05)
    ranks = SU.rank_summaries(rows, ["ece"], MODELS, METHODS, LABELS)
    out = SU.findings(rows, ranks, MODELS, METHODS, {}, LABELS)
    assert not [a for a in out["anomalies"] if "moves the accuracy" in a or "already" in a]


def test_format_p():
    assert SU.format_p(0.0) == "< 0.001" and SU.format_p(0.0009) == "< 0.001"
    assert SU.format_p(0.001) == "0.001" and SU.format_p(0.04567) == "0.046"
    assert SU.format_p(float("nan")) == "–"
