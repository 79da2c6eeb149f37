"""The calibration-during-training study configs: schema-valid, every training entry parses,
the paper-scale settings are the papers' (replication-sources section 6), seeds are complete."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import jsonschema
import pytest
import yaml

from calbench.training import parse_training

REPO = Path(__file__).resolve().parents[2]
CONFIGS = [
    "objectives_fmnist.yaml",
    "metacal_fmnist.yaml",
    "softcal_fmnist.yaml",
    "metacal_cifar.yaml",
    "softcal_cifar.yaml",
]


def _load(name):
    return yaml.safe_load((REPO / "config" / name).read_text())


@pytest.mark.parametrize("name", CONFIGS)
def test_config_is_valid_and_every_training_entry_parses(name):
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    cfg = _load(name)
    jsonschema.validate(cfg, schema)
    groups = Counter()
    for m, v in cfg["models"].items():
        parse_training(v["training"])
        d = v["display"]
        assert d["seed"] == v["training"]["seed"], m
        groups[(v["dataset"], d["name"], d["loss"])] += 1
    assert set(groups.values()) == {3}, groups  # three seeds of every objective
    metrics = set(cfg["evaluation"]["metrics"])
    assert set(cfg["report"]["losses_metrics"]) <= metrics


def test_metacal_cifar_has_the_paper_protocol():
    cfg = _load("metacal_cifar.yaml")
    assert {v["dataset"] for v in cfg["models"].values()} == {"cifar10", "cifar100"}
    for v in cfg["models"].values():
        t = parse_training(v["training"])
        assert v["arch"] == "resnet18"
        assert (t.lr, t.momentum, t.weight_decay, t.batch_size, t.epochs) == (
            0.1,
            0.9,
            5e-4,
            128,
            350,
        )
        assert t.milestones == (150, 250) and t.lr_decay == 0.1
        if t.method == "standard":  # MMCE baseline: the released loss, lamda 2, clip 2
            assert t.loss == "mmce" and t.loss_kwargs == {"lam": 2.0, "form": "released"}
            assert t.grad_clip == 2.0 and t.val_size == 10000
            continue
        assert t.method == "metacal"
        mc = t.metacal
        assert (mc["n_bins"], mc["tau_a"], mc["tau_b"], mc["meta_lr"]) == (15, 100.0, 0.01, 1e-3)
        assert (mc["reduction"], mc["clip_norm"], mc["split_seed"], mc["valid_size"]) == (
            "sum",
            2.0,
            1,
            0.1,
        )
    variants = Counter(
        v["training"]["metacal"]["variant"] if v["training"]["method"] == "metacal" else "mmce"
        for v in cfg["models"].values()
    )
    assert variants == {"m0": 6, "metacal": 6, "m1": 6, "m2": 6, "mmce": 6}


def test_softcal_cifar_has_the_paper_protocol():
    cfg = _load("softcal_cifar.yaml")
    methods = Counter()
    for v in cfg["models"].values():
        t = parse_training(v["training"])
        assert v["arch"] == "wrn28_10" and t.epochs == 200 and t.lr == 0.1 and t.momentum == 0.9
        if t.secondary:
            assert t.secondary["kwargs"].get("n_bins", 15) == 15  # M = 15 fixed in the paper
        methods[t.method] += 1
    assert methods["interleaved"] == 6  # NLL / SB-ECE interleaved, 2 datasets x 3 seeds
