"""Tests of calbench.training.options: the training options, their checks and the config schema."""

from pathlib import Path

import pytest
import yaml

from calbench.training import TrainingConfig, parse_training
from calbench.training.options import METACAL_KEYS, checks, defaults


def test_parse_training_defaults_and_errors():
    cfg = parse_training(
        {"loss": "focal", "loss_kwargs": {"gamma": 3}, "epochs": 2, "lr": 1, "train_subset": 100}
    )
    assert cfg.loss == "focal" and cfg.loss_kwargs == {"gamma": 3} and cfg.lr == 1.0
    assert cfg.optimizer == "sgd" and cfg.weight_decay == 0.0 and cfg.train_subset == 100
    assert parse_training({}).train_subset is None
    for bad, match in [
        ({"epochs": 0}, "epochs must be an integer >= 1"),
        ({"epochs": 2.5}, "epochs must be an integer"),
        ({"lr": 0}, "lr must be > 0"),
        ({"lr": float("nan")}, "lr must be a finite number"),
        ({"weight_decay": -1}, "weight_decay must be >= 0"),
        ({"optimizer": "rmsprop"}, "optimizer must be one of"),
        ({"schedule": "step"}, "schedule must be one of"),
        ({"epoch": 3}, r"unknown training keys \['epoch'\]"),
        ({"loss_kwargs": [1]}, "loss_kwargs must be a mapping"),
        ("ce", "training must be a mapping"),
    ]:
        with pytest.raises(ValueError, match=match):
            parse_training(bad)


def test_parse_training_calibration_keys_and_errors():
    cfg = parse_training(
        {
            "method": "interleaved",
            "secondary": {"name": "sbece", "beta": 0.5, "kwargs": {"temperature": 0.01}},
            "holdout_fraction": 0.2,
            "schedule": "multistep",
            "milestones": [2, 4],
            "val_size": 10,
        }
    )
    assert cfg.method == "interleaved" and cfg.secondary["beta"] == 0.5
    assert cfg.milestones == (2, 4) and cfg.holdout_fraction == 0.2 and cfg.val_size == 10
    mc = parse_training({"method": "metacal", "metacal": {"variant": "m2", "split_seed": 3}})
    assert mc.metacal == {"variant": "m2", "split_seed": 3}
    for bad, match in [
        ({"method": "maml"}, "method must be one of"),
        ({"method": "interleaved"}, "interleaved needs training.secondary"),
        ({"secondary": {"beta": 1}}, "secondary must be a mapping"),
        ({"secondary": {"name": "sbece", "lam": 1}}, r"unknown keys \['lam'\]"),
        ({"secondary": {"name": "sbece", "beta": -1}}, "secondary.beta must be >= 0"),
        (
            {"secondary": {"name": "sbece"}, "loss_kwargs": {"secondary": {"name": "dece"}}},
            "give the secondary loss once",
        ),
        ({"metacal": {"variant": "m1"}}, "need method: metacal"),
        ({"method": "metacal", "metacal": {"lr": 1}}, r"unknown training.metacal keys \['lr'\]"),
        ({"method": "metacal", "loss": "focal"}, "method: metacal trains cross-entropy"),
        ({"milestones": [3]}, "needs schedule: multistep"),
        ({"schedule": "multistep", "milestones": [4, 2]}, "must increase strictly"),
        ({"holdout_fraction": 1.0}, "holdout_fraction must be < 1"),
        ({"val_size": -1}, "val_size must be an integer >= 0"),
        ({"amp": "yes"}, "amp must be true or false"),
    ]:
        with pytest.raises(ValueError, match=match):
            parse_training(bad)


# ------------------------------------------------------------------ one source of truth
REPO = Path(__file__).resolve().parents[2]


def _schema_training_block() -> dict:
    """The ``training`` block of a model spec in the workflow's config schema."""
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    found = []

    def walk(node):
        if isinstance(node, dict):
            block = node.get("properties", {}).get("training")
            if isinstance(block, dict) and "epochs" in block.get("properties", {}):
                found.append(block)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    assert len(found) == 1, "the schema should state the training block once"
    return found[0]


def test_the_config_schema_states_the_dataclass_options():
    """Keys, enums, bounds and defaults of the schema's ``training`` block agree with
    TrainingConfig's fields and their checks (the schema may be stricter, e.g. momentum <= 1)."""
    block = _schema_training_block()
    props = block["properties"]
    assert block.get("additionalProperties") is False
    assert set(props) == set(TrainingConfig.__dataclass_fields__)
    assert set(block.get("required", [])) <= set(props)
    base = defaults()
    for name, check in checks().items():
        for key, want in check.schema.items():
            assert props[name].get(key) == want, (name, key, props[name].get(key), want)
        if "default" in props[name]:
            assert props[name]["default"] == base[name], name
    metacal = props["metacal"]
    assert metacal.get("additionalProperties") is False
    assert set(metacal["properties"]) == set(METACAL_KEYS)
    assert set(props["secondary"]["properties"]) == {"name", "beta", "kwargs"}
    assert props["secondary"]["properties"]["beta"]["minimum"] == 0
    assert props["secondary"]["required"] == ["name"]


def test_defaults_are_the_dataclass_defaults_and_parse_to_them():
    cfg = parse_training({})
    assert cfg == TrainingConfig() and cfg.to_dict() == defaults()
    assert TrainingConfig().loss_kwargs is not TrainingConfig().loss_kwargs  # fresh mappings
    assert set(checks()) == set(defaults()) == set(TrainingConfig.__dataclass_fields__)
