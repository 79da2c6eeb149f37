"""Internal consistency of the packaged Guo et al. 2017 / Kull et al. 2019 published numbers
(src/calbench/reference/guo_kull_logits.csv): row counts per source, relations that hold between
the publications' own tables, and the join keys to config/guo_kull_logits.yaml."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
import yaml

from calbench.reference import AVAILABLE, load_reference, workflow_rows
from calbench.reference import guo_kull as G

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rows():
    return load_reference("guo_kull_logits")


def _cells(rows, **where):
    return {(r["model"], r["method"]): r for r in rows if all(r[k] == v for k, v in where.items())}


def test_available_and_columns(rows):
    assert "guo_kull_logits" in AVAILABLE
    assert set(rows[0]) >= {
        "table",
        "metric",
        "group",
        "dataset",
        "model",
        "loss",
        "method",
        "value",
        "study_key",
        "calbench_model",
        "source",
        "printed",
    }
    assert set(r["source"] for r in rows) == set(G.SOURCES)


def test_counts_per_source(rows):
    counts = Counter(r["source"] for r in rows)
    # Guo: 15 (dataset, model) rows x 7 methods per table; Kull: Table 3 (14 x 6), full precision
    # (14 models x 4 methods x 6 metrics), Table 4 (14 x 6); Kängsepp: 10 models x 2 metrics x 4
    # methods; CalArena: 6 models x (accuracy + 3 metrics x 2 methods); slides: 2 parts x 4
    # methods x 4 metrics.
    assert counts == {
        "guo17_T1": 105,
        "guo17_S2": 105,
        "guo17_S3": 105,
        "kull19_nb": 84 + 336,
        "kull19_nb_table4": 84,
        "kangsepp_nb": 80,
        "calarena": 42,
        "guo17_slides": 32,
    }
    # the only cells printed "NA": Guo's matrix scaling on ImageNet (did not converge)
    na = [r for r in rows if r["printed"] == "NA"]
    assert len(na) == 6
    assert {(r["dataset"], r["method"]) for r in na} == {("ImageNet", "matrix_scaling")}
    assert all(math.isnan(r["value"]) for r in na)
    # no duplicated cell within a (source, table)
    keys = [
        (r["source"], r["table"], r["dataset"], r["model"], r["method"], r["metric"]) for r in rows
    ]
    assert len(keys) == len(set(keys))


def test_guo_s2_temperature_scaling_keeps_the_error(rows):
    # temperature scaling does not change the argmax: Guo et al.'s S2 TS column = uncalibrated
    s2 = [r for r in rows if r["source"] == "guo17_S2"]
    by = {(r["dataset"], r["model"], r["method"]): r["value"] for r in s2}
    pairs = {(d, m) for d, m, _ in by}
    assert len(pairs) == 15
    for d, m in pairs:
        assert by[(d, m, "temp_scaling")] == by[(d, m, "uncal")], (d, m)


def test_guo_table1_values_are_percentages(rows):
    for r in rows:
        if r["source"] == "guo17_T1" and r["printed"] != "NA":
            assert 0 < r["value"] < 30
        if r["source"] == "guo17_S3" and r["printed"] != "NA":
            assert 0 < r["value"] < 3


def test_kull_table3_equals_full_precision_log_loss(rows):
    t3 = _cells(rows, source="kull19_nb", table="table3")
    full = _cells(rows, source="kull19_nb", table="full_precision", metric="logloss")
    assert len(t3) == 84 and len(full) == 56
    for key, r in full.items():
        assert t3[key]["printed"] == r["printed"], key


def test_kull_table4_is_the_full_precision_cwece_rounded(rows):
    t4 = {(r["model"], r["method"]): r for r in rows if r["source"] == "kull19_nb_table4"}
    full = _cells(rows, source="kull19_nb", table="full_precision", metric="classwise_ece_sum")
    checked = 0
    for (model, method), r in full.items():
        if model.startswith("pretrained_"):
            dset, arch = model.split("_")[1], "convnet"
        else:
            arch, dset = model.rsplit("_", 1)
        key = ({"svhn": "SVHN", "SVHN": "SVHN"}.get(dset, dset) + "_" + arch, method)
        assert key in t4, key
        assert f"{r['value']:.3f}" == t4[key]["printed"], (key, r["printed"])
        checked += 1
    assert checked == 56


def test_kull_temperature_scaling_keeps_the_error(rows):
    full = _cells(rows, source="kull19_nb", table="full_precision", metric="error_pct")
    for (model, method), r in full.items():
        if method == "TempS":
            assert r["value"] == full[(model, "Uncal")]["value"], model


def test_independent_runs_agree_with_kull(rows):
    """Kängsepp's notebook and CalArena ran the same pickles: their uncalibrated / TS ECE agree
    with Kull et al.'s full-precision rows to their printed digits (CalArena's to ~1e-4)."""
    full = {
        (r["study_key"], r["method"], r["metric"]): r["value"]
        for r in rows
        if r["source"] == "kull19_nb" and r["table"] == "full_precision" and r["study_key"]
    }
    n = 0
    for r in rows:
        if r["source"] == "kangsepp_nb" and r["metric"] == "ece_frac_M15":
            m = {"uncal": "Uncal", "temp_scaling": "TempS"}.get(r["method"])
            if m and (r["study_key"], m, "ece") in full:
                assert abs(r["value"] - full[(r["study_key"], m, "ece")]) < 1e-6
                n += 1
        if r["source"] == "calarena" and r["metric"] == "ece15":
            m = {"uncal": "Uncal", "TS": "TempS"}[r["method"]]
            if (r["study_key"], m, "ece") in full:
                assert abs(r["value"] - full[(r["study_key"], m, "ece")]) < 2e-4
                n += 1
    assert n == 20 + 4


def test_calarena_brier_is_kull_brier_times_k(rows):
    full = {
        (r["study_key"], r["method"]): r["value"]
        for r in rows
        if r["source"] == "kull19_nb" and r["metric"] == "brier_div_k"
    }
    k = {"CIFAR-10": 10, "CIFAR-100": 100, "SVHN": 10}
    n = 0
    for r in rows:
        if r["source"] == "calarena" and r["metric"] == "brier" and r["dataset"] in k:
            m = {"uncal": "Uncal", "TS": "TempS"}[r["method"]]
            assert abs(r["value"] - k[r["dataset"]] * full[(r["study_key"], m)]) < 1e-4
            n += 1
    assert n == 6


def test_join_keys_match_the_config(rows):
    cfg = yaml.safe_load((ROOT / "config" / "guo_kull_logits.yaml").read_text())
    models = cfg["models"]
    stems = {r["study_key"]: r["calbench_model"] for r in rows if r["study_key"]}
    assert len(set(stems.values())) == 14
    for stem, model in stems.items():
        assert model in models, model
        assert models[model]["logits"]["file"] == f"probs_{stem}_logits.p"
    methods = {p["method"] for p in G.published_rows()}
    assert methods <= set(cfg["calibrators"])

    # the pinned checksums and sizes are the published LFS object ids (published-logits §2.1)
    assert models["c10_resnet110"]["logits"]["size"] == 685390
    assert models["imagenet_resnet152"]["logits"]["sha256"].startswith("1bbc1a84")
    assert all(v["logits"]["format"] == "kull_pickle" for v in models.values())
    g = cfg["report"]["guo_kull"]
    assert g["summary_model"] in models and set(g["summary_calibrators"]) <= set(cfg["calibrators"])


def test_published_rows_scale_to_fractions():
    rows = G.published_rows()
    ece = [r for r in rows if r["source"] == "guo17_T1" and r["published_model"] == "DenseNet 40"]
    assert any(abs(r["published"] - 0.0328) < 1e-12 for r in ece)
    assert all(r["decimals"] == 2 for r in ece)
    t3 = [r for r in rows if r["table"] == "full_precision" and r["printed"] == "30"]
    assert t3 and all(r["decimals"] == 6 and r["published"] == 0.30 for r in t3)


def test_workflow_rows_refuses_the_multi_source_table():
    with pytest.raises(ValueError, match="guo-kull-tables"):
        workflow_rows("guo_kull_logits")
