"""calbench.arena: implementations of one method side by side (known answers)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from calbench.arena import (
    disagreements,
    implementation_groups,
    largest,
    run_comparison,
    write_disagreements,
)
from calbench.metrics import METRICS
from calbench.results import ARENA_COLUMNS


def test_groups_follow_same_as():
    names = ["ts", "netcal.ts", "iso", "sklearn.iso", "netcal.iso", "hist", "netcal.enir"]
    assert implementation_groups(names) == {
        "ts": ["ts", "netcal.ts"],
        "iso": ["iso", "sklearn.iso", "netcal.iso"],
    }


def test_disagreements_by_hand():
    y = np.array([0, 1])
    pa = np.array([[0.9, 0.1], [0.2, 0.8]])
    pb = np.array([[0.6, 0.4], [0.2, 0.8]])
    rows = disagreements({"a": pa, "b": pb}, y, ["accuracy", "brier"], {"m": ["a", "b"]})
    prob, acc, brier = rows
    assert prob["quantity"] == "probability" and prob["max_abs_diff"] == pytest.approx(0.3)
    assert acc["max_abs_diff"] == 0.0 and acc["value_a"] == acc["value_b"] == 1.0
    # Brier (sum over classes, mean over samples): a = (0.02 + 0.08) / 2, b = (0.32 + 0.08) / 2
    assert brier["value_a"] == pytest.approx(METRICS["brier"](pa, y))
    assert brier["max_abs_diff"] == pytest.approx(abs(0.05 - 0.20))


def test_largest_keeps_the_worst_model():
    rows = [dict(method="m", a="a", b="b", quantity="q", max_abs_diff=d, value_a=None,
                 value_b=None, model=i) for i, d in enumerate([0.1, 0.3, 0.2])]  # fmt: skip
    (row,) = largest(rows)
    assert row["max_abs_diff"] == 0.3 and row["model"] == 1


def test_written_tables_are_exact_and_escaped(tmp_path):
    rows = [dict(method="<m>", a="a&b", b="b", quantity="ece", max_abs_diff=0.1 + 0.2,
                 value_a=0.5, value_b=None)]  # fmt: skip
    write_disagreements(rows, tmp_path / "t.csv", tmp_path / "t.html")
    (back,) = list(csv.DictReader(open(tmp_path / "t.csv")))
    assert list(back) == list(ARENA_COLUMNS) and float(back["max_abs_diff"]) == 0.1 + 0.2
    html = (tmp_path / "t.html").read_text()
    assert "&lt;m&gt;" in html and "a&amp;b" in html and "<m>" not in html


def test_temperature_scaling_implementations_agree_on_synthetic_logits(tmp_path):
    pytest.importorskip("netcal")
    rows = run_comparison(["ts", "netcal.ts"], ["ece", "nll"], tmp_path / "ts.csv",
                          synthetic=(1000, 4), seed=0)  # fmt: skip
    prob = next(r for r in rows if r["quantity"] == "probability")
    # one convex parameter: both land next to the optimum; calbench's defaults are the study's
    # LBFGS (PyTorch's stopping rules), which stops ~3e-5 short in 1/T here (NLL 2e-10 above the
    # minimum), netcal's optimiser closer: probabilities differ by ~1e-5, test NLL by < 1e-6
    assert prob["max_abs_diff"] < 1e-4
    nll = next(r for r in rows if r["quantity"] == "nll")
    assert nll["max_abs_diff"] < 1e-6
    with pytest.raises(ValueError, match="no method among"):
        run_comparison(["ts", "iso"], ["ece"], tmp_path / "x.csv", synthetic=(100, 3))
