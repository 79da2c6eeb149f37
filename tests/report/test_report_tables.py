"""Known-answer tests of calbench.report.tables (study table layout, bold rule, formats)."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest

from calbench.display import best_mask, format_value
from calbench.report import tables as T
from calbench.report.published import read_reference_table, reference_comparison
from calbench.results import METRIC_COLUMNS, REFERENCE_TABLE_COLUMNS, read_long_csv, write_long_csv


def _rows():
    # two models x three methods, test half; hand-chosen values
    data = {
        ("m1", "uncalibrated"): (0.9012, 0.0453, 0.0501),
        ("m1", "ts"): (0.9012, 0.0121, 0.0101),
        ("m1", "iso"): (0.9020, 0.0123, 0.0100),
        ("m2", "uncalibrated"): (0.8000, 0.1000, 0.2000),
        ("m2", "ts"): (0.8000, 0.0200, 0.0400),
        # m2/iso missing on purpose
    }
    rows = []
    for (model, method), (acc, ece, nll) in data.items():
        for metric, v in (("accuracy", acc), ("ece", ece), ("nll", nll)):
            rows.append(
                {
                    "dataset": "ds",
                    "model": model,
                    "method": method,
                    "half": "test",
                    "metric": metric,
                    "value": v,
                    "ci_low": v - 0.001,
                    "ci_high": v + 0.001,
                }
            )
            # a val row that must never leak into test tables
            rows.append({**rows[-1], "half": "val", "value": 99.0})
    return rows


def test_format_value_follows_study_scales():
    # ACC/ECE/MCE x100 %.2f; cwECE x100 %.3f; NLL/BS %.3f (replication-sources §2.5)
    assert format_value("accuracy", 0.94915) == "94.92"
    assert format_value("ece", 0.0453) == "4.53"
    assert format_value("mce", 0.4658) == "46.58"
    assert format_value("cwece", 0.00948) == "0.948"
    assert format_value("nll", 0.42212) == "0.422"
    assert format_value("brier", 0.0938) == "0.094"
    assert format_value("ece", float("nan")) == "–"


def test_best_mask_max_for_accuracy_min_otherwise_ties_all_bold():
    vals = np.array([[0.90, 0.91, 0.91], [0.5, np.nan, 0.4]])
    assert best_mask(vals, "accuracy").tolist() == [[False, True, True], [True, False, False]]
    assert best_mask(vals, "ece").tolist() == [[True, False, False], [False, False, True]]


def test_best_mask_compares_printed_values():
    # 0.012341 and 0.012344 both print as 1.23 (%) -> both bold; 0.0125 prints 1.25
    vals = np.array([[0.012341, 0.012344, 0.0125]])
    assert best_mask(vals, "ece").tolist() == [[True, True, False]]


def test_best_mask_row_without_values_has_no_bold():
    assert not best_mask(np.array([[np.nan, np.nan]]), "ece").any()


def test_metric_table_pivots_test_half_in_given_order():
    t = T.metric_table(_rows(), "ece", models=["m2", "m1"], methods=["uncalibrated", "ts", "iso"])
    assert t.row_keys == ["m2", "m1"]
    assert t.col_keys == ["uncalibrated", "ts", "iso"]
    np.testing.assert_array_equal(t.values[1], [0.0453, 0.0121, 0.0123])
    assert t.values[0, 0] == 0.1 and t.values[0, 1] == 0.02 and math.isnan(t.values[0, 2])
    assert t.bold.tolist() == [[False, True, False], [False, True, False]]
    assert t.cell(0, 2) == "–"
    assert t.ci(1, 0) == "[4.43, 4.63]"
    assert t.row_labels == [["ds", "m2"], ["ds", "m1"]]


def test_metric_table_accuracy_bold_is_max():
    t = T.metric_table(_rows(), "accuracy")
    # m1: 90.12, 90.12, 90.20 -> iso bold; m2: 80.00 tie -> both bold
    assert t.bold.tolist() == [[False, False, True], [True, True, False]]


def test_metric_table_unknown_metric_is_a_value_error():
    with pytest.raises(ValueError, match="no rows for metric 'foo'"):
        T.metric_table(_rows(), "foo")


def test_markdown_html_latex_csv():
    t = T.metric_table(
        _rows(), "ece", model_labels={"m1": ["DS", "Model_1 <x>"], "m2": ["DS", "M|2"]}
    )
    md = T.to_markdown(t)
    assert "| **1.21** [1.11, 1.31] |" in md
    assert "M\\|2" in md  # pipe escaped
    html_text = T.to_html(t)
    assert "Model_1 &lt;x&gt;" in html_text and "<x>" not in html_text
    assert "<b>1.21</b>" in html_text and "<b>2.00</b>" in html_text
    tex = T.to_latex(t)
    assert "Model\\_1" in tex and "\\textbf{1.21}" in tex and "\\%" in tex
    assert "--" in tex  # missing cell
    parsed = list(csv.reader(io.StringIO(T.to_csv(t))))
    assert parsed[0][:5] == [
        "Dataset",
        "Model",
        "uncalibrated",
        "uncalibrated ci_low",
        "uncalibrated ci_high",
    ]
    assert parsed[1][2:5] == ["4.53", "4.43", "4.63"]


def test_write_table_writes_four_formats(tmp_path):
    t = T.metric_table(_rows(), "nll")
    paths = T.write_table(t, tmp_path / "nll")
    assert sorted(p.rsplit(".", 1)[1] for p in paths) == ["csv", "html", "md", "tex"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_losses_table_pivots_by_training_loss():
    rows = []
    # ECE of uncalibrated models: arch A with CE/FL 2, arch B with CE only
    for model, v in (("a_ce", 0.05), ("a_fl2", 0.02), ("b_ce", 0.07)):
        rows.append(
            {
                "dataset": "ds",
                "model": model,
                "method": "uncalibrated",
                "half": "test",
                "metric": "ece",
                "value": v,
                "ci_low": math.nan,
                "ci_high": math.nan,
            }
        )
        rows.append({**rows[-1], "method": "ts", "value": 0.001})  # must be ignored
    displays = {
        "a_ce": {"name": "A", "loss": "CE"},
        "a_fl2": {"name": "A", "loss": "FL 2"},
        "b_ce": {"name": "B", "loss": "CE"},
        "c": {"name": "C"},  # no loss: not in the losses study
    }
    t = T.losses_table(rows, "ece", displays)
    assert t.row_labels == [["ds", "A"], ["ds", "B"]]
    assert t.col_labels == ["CE", "FL 2"]
    np.testing.assert_array_equal(t.values[0], [0.05, 0.02])
    assert t.values[1, 0] == 0.07 and math.isnan(t.values[1, 1])
    assert t.bold.tolist() == [[False, True], [True, False]]


def test_losses_table_needs_display_loss():
    with pytest.raises(ValueError, match="display.loss"):
        T.losses_table(_rows(), "ece", {"m1": {"name": "x"}})


def test_reference_comparison_units_and_tolerance():
    ref = [
        {
            "dataset": "ds",
            "model": "m1",
            "method": "ts",
            "metric": "ece",
            "value": "1.50",
        },  # percent
        {"dataset": "ds", "model": "m1", "method": "ts", "metric": "nll", "value": "0.0101"},
        {"dataset": "ds", "model": "zz", "method": "ts", "metric": "ece", "value": "1"},  # not ours
    ]
    out = reference_comparison(_rows(), ref, tolerances={"ece": 0.002}, units="display")
    assert len(out) == 2
    ece = out[0]
    assert ece["theirs"] == pytest.approx(0.015) and ece["ours"] == 0.0121
    assert ece["difference"] == pytest.approx(0.0121 - 0.015)
    assert ece["within"] is False  # |diff| = 0.0029 > 0.002
    assert out[1]["within"] is None and out[1]["difference"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="units"):
        reference_comparison(_rows(), ref, units="percent")


def test_reference_table_round_trip_is_exact(tmp_path):
    """aggregate writes the comparison once; render-report reads back the same rows."""
    ref = [
        {"dataset": "ds", "model": "m1", "method": "ts", "metric": "ece", "value": "1.50"},
        {"dataset": "ds", "model": "m1", "method": "ts", "metric": "nll", "value": "0.0101"},
    ]
    out = reference_comparison(_rows(), ref, tolerances={"ece": 0.002}, units="display")
    path = tmp_path / "reference.csv"
    write_long_csv(path, out, REFERENCE_TABLE_COLUMNS)
    back = read_reference_table(path)
    assert [{k: r[k] for k in out[0]} for r in back] == [
        {k: (v if v == v else pytest.approx(v, nan_ok=True)) for k, v in r.items()} for r in out
    ]
    assert back[0]["within"] is False and back[1]["within"] is None
    assert back[1]["tolerance"] is None
    (tmp_path / "bad.csv").write_text("dataset,model\n")
    with pytest.raises(ValueError, match="lacks columns"):
        read_reference_table(tmp_path / "bad.csv")


def test_long_csv_round_trip_is_exact(tmp_path):
    rows = _rows()
    rows[0]["ci_low"] = math.nan
    path = tmp_path / "m.csv"
    write_long_csv(path, rows, METRIC_COLUMNS)
    back = read_long_csv([path])
    assert len(back) == len(rows)
    assert back[1]["value"] == rows[1]["value"]
    assert math.isnan(back[0]["ci_low"])
    assert path.read_text().splitlines()[0] == ",".join(METRIC_COLUMNS)


def test_read_long_csv_missing_columns(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="lacks columns"):
        read_long_csv([p])


def test_report_cells_tied_for_best_are_all_bold_and_say_tie():
    from calbench.report.views import metric_view

    t = T.metric_table(_rows(), "accuracy")  # m1: iso alone best; m2: 80.00 shared by two
    view = metric_view(t, "accuracy")
    cells = [[c for c in row if c["sort"] is not None] for row in view["rows"]]
    assert [[c["tie"] for c in row] for row in cells] == [
        [False, False, False],
        [True, True, False],
    ]
    assert [[c["bold"] for c in row] for row in cells] == t.bold.tolist()
