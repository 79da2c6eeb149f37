"""``calbench aggregate`` is strict: a missing, empty, truncated or NaN-holding metrics CSV, or a
(model, calibrator) of the study without its file, is an error naming the file; a "–" in a table
means only "not computed by design" (a metric without an interval)."""

from __future__ import annotations

import pytest

from calbench.report.build import aggregate
from calbench.results import METRIC_COLUMNS, read_long_csv, write_long_csv

SPEC = {
    "models": {"m1": {"dataset": "d"}},
    "calibrators": {"uncalibrated": {}, "ts": {}},
    "table_metrics": ["ece", "nll"],
}


def _write(path, method, *, ece=0.05, ci=True):
    rows = [
        {"dataset": "d", "model": "m1", "method": method, "half": "test", "metric": metric,
         "value": value, "ci_low": value - 0.01 if ci else float("nan"),
         "ci_high": value + 0.01 if ci else float("nan")}
        for metric, value in (("ece", ece), ("nll", 0.3))
    ]  # fmt: skip
    write_long_csv(path, rows, METRIC_COLUMNS)
    return path


@pytest.fixture
def files(tmp_path):
    return [
        _write(tmp_path / "uncalibrated.csv", "uncalibrated", ece=0.08),
        _write(tmp_path / "ts.csv", "ts", ci=False),  # no interval by design
    ]


def _run(tmp_path, paths):
    return aggregate(paths, [], SPEC, tmp_path / "all.csv", None, tmp_path / "tables")


def test_complete_inputs_aggregate_and_only_absent_intervals_print_as_dash(tmp_path, files):
    _run(tmp_path, files)
    rows = read_long_csv([tmp_path / "all.csv"])
    assert len(rows) == 4
    md = (tmp_path / "tables" / "ece.md").read_text()
    assert "8.00" in md and "5.00" in md


def test_truncated_csv_is_an_error_naming_the_file(tmp_path, files):
    text = files[1].read_text()
    files[1].write_text(text[: text.rindex(",")])  # cut inside the last row
    with pytest.raises(ValueError, match=r"ts\.csv line 3 has a different number of fields"):
        _run(tmp_path, files)


def test_nan_or_blank_value_is_an_error(tmp_path, files):
    text = files[1].read_text().splitlines()
    for bad in ("nan", ""):
        cells = text[1].split(",")
        cells[5] = bad
        files[1].write_text("\n".join([text[0], ",".join(cells), text[2]]) + "\n")
        with pytest.raises(ValueError, match=r"ts\.csv line 2: value"):
            _run(tmp_path, files)
    cells = text[1].split(",")
    cells[5] = "0.0x"
    files[1].write_text("\n".join([text[0], ",".join(cells), text[2]]) + "\n")
    with pytest.raises(ValueError, match="is not a number"):
        _run(tmp_path, files)


def test_missing_empty_or_directory_inputs_are_errors(tmp_path, files):
    with pytest.raises(ValueError, match=r"results/metrics/d/m1/ts\.csv is not among the inputs"):
        _run(tmp_path, files[:1])
    with pytest.raises(ValueError, match="nope.csv does not exist"):
        _run(tmp_path, [*files, tmp_path / "nope.csv"])
    with pytest.raises(ValueError, match="is a directory"):
        _run(tmp_path, [*files, tmp_path])
    files[1].write_text(",".join(METRIC_COLUMNS) + "\n")
    with pytest.raises(ValueError, match=r"ts\.csv holds no rows"):
        _run(tmp_path, files)


def test_a_table_metric_missing_from_a_file_is_an_error(tmp_path, files):
    lines = files[1].read_text().splitlines()
    files[1].write_text("\n".join(lines[:2]) + "\n")  # the nll row lost at a line boundary
    with pytest.raises(ValueError, match=r"ts\.csv lacks the table metric\(s\) \['nll'\]"):
        _run(tmp_path, files)
