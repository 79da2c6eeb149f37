"""CalArena's packaged experiment indexes and published cv-multiclass results
(calbench.reference.calarena): consistency of the packaged files with each other and with the
independently transcribed CalArena cells of guo_kull_logits.csv; one model entry per experiment;
the reference rows keyed like those entries."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from calbench.calibrators import REGISTRY
from calbench.logits_sources.calarena import read_results_csv
from calbench.metrics import METRICS as CALBENCH_METRICS
from calbench.reference import calarena as C
from calbench.reference import load_reference, reference_csv_text

DATA = Path(C.__file__).parent


def _published(calibrator):
    path = DATA / "results" / "cv-multiclass" / f"{calibrator}.csv"
    return {(r["dataset"], r["model"]): r for r in read_results_csv(path)}


def test_packaged_files_are_the_benchmarks_twenty_experiments():
    index = [(r["dataset"], r["model"]) for r in C.experiments("cv-multiclass")]
    assert len(index) == 20 and len(set(index)) == 20
    for calibrator in C.METHODS:
        rows = _published(calibrator)
        assert sorted(rows) == sorted(index), calibrator
        for r in rows.values():
            assert set(r["metrics"]) == {"brier", "logloss", "ece-15", "accuracy", "time"}


def test_argmax_preserving_calibrators_keep_the_base_models_accuracy():
    base = _published("Base-model")
    for calibrator in ("TS", "ETS"):  # a positive temperature keeps every row's argmax
        for key, r in _published(calibrator).items():
            assert r["metrics"]["accuracy"] == base[key]["metrics"]["accuracy"], (calibrator, key)


def test_packaged_results_agree_with_the_transcribed_calarena_cells():
    """guo_kull_logits.csv's `calarena` cells were transcribed from the same files' printout."""
    names = {"acc": "accuracy", "logloss": "logloss", "ece15": "ece-15", "brier": "brier"}
    which = {"uncal": "Base-model", "TS": "TS"}
    ds = {"CIFAR-10": "c10", "CIFAR-100": "c100", "Birds": "birds", "SVHN": "SVHN"}
    checked = 0
    for r in load_reference("guo_kull_logits"):
        if r["source"] != "calarena" or r["dataset"] not in ds:
            continue
        pub = _published(which[r["method"]])[(ds[r["dataset"]], r["model"])]
        value = pub["metrics"][names[r["metric"]]]
        decimals = len(r["printed"].split(".")[1])
        assert round(value, decimals) == pytest.approx(r["value"], abs=10**-decimals / 2), r
        checked += 1
    assert checked == 28


def test_methods_and_metrics_name_calbenchs():
    assert set(C.METHODS.values()) <= set(REGISTRY)
    assert set(C.METRICS.values()) <= set(CALBENCH_METRICS)


def test_one_model_entry_per_experiment():
    datasets, models = C.experiment_entries(
        {"benchmark": "cv-multiclass", "logits": {"local_path": "h5"}}
    )
    assert len(models) == 20
    assert set(datasets) == {"c10", "c100", "birds", "svhn", "derma", "oct"}
    assert models["svhn_resnet152_sd"] == {
        "dataset": "svhn",
        "source": "logits",
        "num_classes": 10,
        "display": {"name": "resnet152_SD"},
        "logits": {
            "format": "calarena",
            "file": "cv-multiclass.h5",
            "group": "SVHN/resnet152_SD",
            "local_path": "h5",
        },
    }
    _, some = C.experiment_entries(
        {"benchmark": "cv-multiclass", "experiments": ["oct/vit", "c10/lenet5"]}
    )
    assert list(some) == ["oct_vit", "c10_lenet5"]
    _, binary = C.experiment_entries({"benchmark": "cv-binary"})
    assert {m["num_classes"] for m in binary.values()} == {2}


def test_expand_config_adds_to_what_the_config_has():
    cfg = {"calarena": {"benchmark": "imagenet-multiclass"}, "models": {"mine": {"dataset": "x"}}}
    C.expand_config(cfg)
    assert len(cfg["models"]) == 9 and "imagenet_vit" in cfg["models"]
    assert cfg["datasets"] == {"imagenet": {"display": "imagenet"}}
    assert C.expand_config({"models": {}}) == {"models": {}}  # no calarena: nothing


@pytest.mark.parametrize(
    "section, words",
    [
        ({"benchmark": "tabrepo-binary"}, "has no packaged experiment index"),
        (
            {"benchmark": "cv-multiclass", "experiments": ["c10/vgg"]},
            "'c10/vgg' is not an experiment",
        ),
        ({"benchmark": "cv-multiclass", "logits": {"group": "x/y"}}, "calarena.logits.group"),
        ({"benchmark": "cv-multiclass", "folds": 3}, "calarena.folds: unknown key"),
    ],
)
def test_bad_sections_are_refused_in_one_line(section, words):
    with pytest.raises(ValueError, match=words) as info:
        C.experiment_entries(section)
    assert "\n" not in str(info.value)


def test_an_entry_of_the_same_name_is_refused():
    cfg = {"calarena": {"benchmark": "cv-multiclass"}, "models": {"c10_lenet5": {}}}
    with pytest.raises(
        ValueError, match=r"^models\.c10_lenet5: also CalArena experiment c10/lenet5"
    ):
        C.expand_config(cfg)


def test_an_experiments_csv_you_downloaded(tmp_path):
    path = tmp_path / "tabrepo-binary-experiments.csv"
    path.write_text("dataset,model,cal_size,test_size\n2dplanes,CatBoost,36691,4077\n")
    _, models = C.experiment_entries({"benchmark": "tabrepo-binary", "experiments_csv": str(path)})
    assert list(models) == ["2dplanes_catboost"]
    assert models["2dplanes_catboost"]["logits"]["file"] == "tabrepo-binary.h5"


def test_reference_rows_are_keyed_like_the_entries():
    _, models = C.experiment_entries({"benchmark": "cv-multiclass"})
    rows = list(csv.DictReader(reference_csv_text("calarena_cv_multiclass").splitlines()))
    assert len(rows) == 20 * len(C.METHODS) * len(C.METRICS)
    assert {r["model"] for r in rows} == set(models)
    assert {r["dataset"] for r in rows} == {m["dataset"] for m in models.values()}
    ts = {(r["model"], r["metric"]): float(r["value"]) for r in rows if r["method"] == "ts"}
    # CalArena's TS on CIFAR-10 DenseNet-40: results/cv-multiclass/TS.csv, first row
    assert ts[("c10_densenet40", "nll")] == 0.22508591413497925
    assert ts[("c10_densenet40", "ece")] == 0.009467674419283867
    assert all(math.isfinite(float(r["value"])) for r in rows)


def test_results_of_a_checkout(tmp_path):
    d = tmp_path / "results" / "tabrepo-binary"
    d.mkdir(parents=True)
    (d / "TS.csv").write_text(
        "dataset,model,cal_size,test_size,TS_brier,TS_logloss,TS_ece-15,TS_accuracy,TS_time,TS_kuiper\n"
        "2dplanes,CatBoost,36691,4077,0.1,0.3,0.02,0.9,0.5,0.01\n"
    )
    rows = C.reference_rows("tabrepo-binary", tmp_path / "results")
    assert {(r["model"], r["method"], r["metric"]) for r in rows} == {
        ("2dplanes_catboost", "ts", m) for m in ("accuracy", "brier", "ece", "nll")
    }
    with pytest.raises(ValueError, match="no CalArena results of cv-binary"):
        C.reference_rows("cv-binary", tmp_path / "results")
