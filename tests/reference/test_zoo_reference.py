"""The shipped coursework reference table: internal consistency and spot values."""

from collections import Counter
from pathlib import Path

import pytest
import yaml

from calbench.reference import load_reference, lookup


@pytest.fixture(scope="module")
def rows():
    return load_reference("coursework_2021")


def key(r):
    return (r["metric"], r["dataset"], r["model"], r["loss"], r["method"])


def test_shape(rows):
    assert len(rows) == 3504
    tables = Counter(r["table"] for r in rows)
    assert len(tables) == 18
    assert all(
        tables[f"metrics_{m}_1"] == 32 * 7 for m in ("ACC", "ECE", "cwECE", "MCE", "NLL", "BS")
    )
    assert all(
        tables[f"metrics_{m}_2"] == 45 * 7 for m in ("ACC", "ECE", "cwECE", "MCE", "NLL", "BS")
    )
    assert all(tables[f"fl_{m}"] == 45 for m in ("ACC", "ECE", "cwECE", "MCE", "NLL", "BS"))
    assert len({key(r) + (r["table"],) for r in rows}) == len(rows)  # no duplicate cell


def test_temperature_scaling_keeps_accuracy_in_every_row(rows):
    acc = {
        (r["table"], r["study_key"], r["method"]): r["printed"]
        for r in rows
        if r["metric"] == "ACC"
    }
    pairs = [(v, acc[(t, s, "Uncalibrated")]) for (t, s, m), v in acc.items() if m == "T-scaling"]
    assert len(pairs) == 32 + 45
    assert all(a == b for a, b in pairs)


def test_fl_tables_equal_group2_uncalibrated(rows):
    g2 = {
        (r["metric"], r["study_key"]): r["printed"]
        for r in rows
        if r["table"].startswith("metrics_") and r["group"] == 2 and r["method"] == "Uncalibrated"
    }
    fl = [r for r in rows if r["table"].startswith("fl_")]
    assert len(fl) == 270
    assert all(g2[(r["metric"], r["study_key"])] == r["printed"] for r in fl)


def test_value_ranges(rows):
    for r in rows:
        if r["metric"] in ("ACC", "ECE", "MCE", "cwECE"):
            assert 0 <= r["value"] <= 100
        elif r["metric"] == "BS":
            assert 0 <= r["value"] <= 2


@pytest.mark.parametrize(
    "where, printed",
    [
        (dict(table="metrics_ECE_1", model="ResNet20", method="T-scaling"), "2.48"),
        (dict(table="metrics_ECE_1", model="ResNet20", method="M-scaling-b"), "50.05"),
        (dict(table="metrics_ECE_1", model="EfficientNet_b8", method="Uncalibrated"), "8.98"),
        (dict(table="metrics_ECE_1", model="EfficientNet_b8", method="Isotonic"), "2.96"),
        (dict(table="fl_ECE", dataset="TinyImageNet", loss="FL 3"), "1.93"),
        (dict(table="fl_cwECE", dataset="TinyImageNet", loss="CE"), "0.250"),
        (
            dict(table="metrics_NLL_2", dataset="TinyImageNet", loss="CE", method="Uncalibrated"),
            "2.325",
        ),
        # cells the OCR text of the paper got wrong (it printed 76.12 and 79.80)
        (
            dict(
                table="metrics_ACC_2",
                dataset="CIFAR-100",
                model="ResNet50",
                loss="LS 0.05",
                method="Isotonic",
            ),
            "76.24",
        ),
        (
            dict(
                table="metrics_ACC_2",
                dataset="CIFAR-100",
                model="Wide-ResNet-26-10",
                loss="LS 0.05",
                method="V-scaling-b",
            ),
            "78.24",
        ),
    ],
)
def test_spot_values_from_the_paper(rows, where, printed):
    (hit,) = lookup(rows, **where)
    assert hit["printed"] == printed


def test_every_row_names_a_registry_model(rows):
    registry = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "config" / "coursework.yaml").read_text()
    )["models"]
    assert {r["calbench_model"] for r in rows} == set(registry)
    assert all(registry[r["calbench_model"]]["study_key"] == r["study_key"] for r in rows)


def test_unknown_table():
    with pytest.raises(ValueError, match="available"):
        load_reference("coursework_2020")
