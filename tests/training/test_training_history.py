"""Tests of calbench.training.history: validation metrics and the history CSV."""

import csv
import math

import numpy as np
import pytest

from calbench.training import HISTORY_COLUMNS, validation_metrics, write_history


def test_write_history_csv(tmp_path):
    rows = [{"epoch": 1, "loss": 0.25, "accuracy": 0.5, "lr": 0.1}]
    write_history(tmp_path / "h.csv", rows)
    with open(tmp_path / "h.csv") as fh:
        read = list(csv.DictReader(fh))
    assert tuple(read[0]) == HISTORY_COLUMNS
    assert {k: float(v) for k, v in read[0].items()} == rows[0]


def test_validation_metrics_match_the_library_metrics():
    from calbench.functional import softmax
    from calbench.metrics import dece, ece

    rng = np.random.default_rng(0)
    z = rng.normal(size=(300, 4)) * 3
    y = rng.integers(0, 4, 300)
    got = validation_metrics(z, y)
    p = softmax(z, axis=1)
    assert got["val_ece"] == pytest.approx(ece(p, y))
    assert got["val_dece"] == pytest.approx(dece(p, y))
    assert got["val_accuracy"] == pytest.approx(np.mean(z.argmax(1) == y))
    assert got["val_nll"] == pytest.approx(-np.mean(np.log(p[np.arange(300), y])), rel=1e-6)


def test_write_history_adds_validation_columns(tmp_path):
    rows = [
        {"epoch": 1, "loss": 0.5, "accuracy": 0.5, "lr": 0.1, "val_ece": 0.1},
        {"epoch": 2, "loss": 0.4, "accuracy": 0.6, "lr": 0.1},
    ]
    write_history(tmp_path / "h.csv", rows)
    with open(tmp_path / "h.csv") as fh:
        read = list(csv.DictReader(fh))
    assert list(read[0]) == [*HISTORY_COLUMNS, "val_ece"]
    assert float(read[0]["val_ece"]) == 0.1 and math.isnan(float(read[1]["val_ece"]))
