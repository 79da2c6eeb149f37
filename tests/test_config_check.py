"""Config checks made when the workflow starts (calbench.config_check): names the library must
know, and one-line schema errors."""

from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import pytest
import yaml

from calbench.config_check import (
    check_config,
    loss_names,
    package_architectures,
    schema_error_line,
    zoo_architectures,
)

REPO = Path(__file__).resolve().parents[1]
SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())


@pytest.fixture
def cfg():
    return yaml.safe_load((REPO / "config" / "test.yaml").read_text())


def test_static_names_equal_the_registries():
    from calbench.losses import LOSSES
    from calbench.models import ZOOS, architectures
    from calbench.models.cifar import ARCHITECTURES as HUY
    from calbench.models.focal import ARCHITECTURES as FOCAL

    assert loss_names() == sorted(LOSSES)
    for dataset in ZOOS:
        assert zoo_architectures(dataset) == list(architectures(dataset))
    assert zoo_architectures("imagenet") is None
    assert package_architectures() == [f"huyvnphan_{a}" for a in HUY] + [
        f"focal_{a}" for a in FOCAL
    ]


@pytest.mark.parametrize("path", sorted((REPO / "config").glob("*.yaml")) + [REPO / "config.yaml"])
def test_shipped_configs_pass(path):
    assert check_config(yaml.safe_load(path.read_text())) == []


@pytest.mark.parametrize(
    "edit, key, words",
    [
        (lambda c: c["calibrators"].update(foo={}), "calibrators.foo", "unknown calibrator 'foo'"),
        (lambda c: c["calibrators"].update(x={"method": "tss"}), "calibrators.x.method", "'tss'"),
        (
            lambda c: c["calibrators"]["ts"].update(params={"max_iters": 5}),
            "calibrators.ts.params",
            "accepted: [",
        ),
        (
            lambda c: c["calibrators"]["hist"].update(params={"n_bins": 0}),
            "calibrators.hist.params",
            "n_bins must be an integer >= 1",
        ),
        (
            lambda c: c["evaluation"]["metrics"].append("ecee"),
            "evaluation.metrics",
            "unknown metric 'ecee'",
        ),
        (
            lambda c: c["compare"].update(metrics=["nlll"]),
            "compare.metrics",
            "unknown metric 'nlll'",
        ),
        (
            lambda c: c.update(shift={"corruptions": ["gaussian_noise"], "compare_metrics": ["ecce"]}),
            "shift.compare_metrics",
            "unknown metric 'ecce'",
        ),
        (
            lambda c: c["compare"].update(metrics=["ece", "nll"]),
            "compare.metrics",
            "'ece' is a plug-in estimate whose bias depends on the predictions' sharpness, so no "
            "test or rank may be drawn from it; use 'ece_ub'",
        ),
        (
            lambda c: c["compare"].update(select_exclude=["nope"]),
            "compare.select_exclude",
            "'nope' is not a key of calibrators",
        ),
        (
            lambda c: c["evaluation"].update(calibrated_within=2),
            "evaluation.calibrated_within",
            "must be a calibration error in (0, 1)",
        ),
        (lambda c: c["models"]["tiny_mlp"].update(arch="mlpp"), "models.tiny_mlp.arch", "'mlpp'"),
        (
            lambda c: c["models"]["tiny_mlp"]["training"].update(loss="focall"),
            "models.tiny_mlp.training.loss",
            "unknown loss 'focall'",
        ),
        (
            lambda c: c["models"]["tiny_mlp"]["training"].update(method="meta"),
            "models.tiny_mlp.training",
            "method",
        ),
        (
            lambda c: c["models"]["tiny_mlp"].update(source="checkpoint", arch="focal_resnet5"),
            "models.tiny_mlp.arch",
            "'focal_resnet5'",
        ),
    ],
)
def test_unknown_names_are_named_by_key(cfg, edit, key, words):
    assert check_config(cfg) == []
    bad = copy.deepcopy(cfg)
    edit(bad)
    problems = check_config(bad)
    assert len(problems) == 1, problems
    assert problems[0].startswith(key + ":") and words in problems[0], problems[0]


def _schema_error(config):
    with pytest.raises(jsonschema.ValidationError) as exc:
        jsonschema.validate(config, SCHEMA)
    return exc.value


def test_schema_error_is_one_line_naming_the_key(cfg):
    cfg["foo"] = 1
    err = _schema_error(cfg)
    assert len(str(err).splitlines()) > 100  # what Snakemake used to print
    line = schema_error_line(err)
    assert "\n" not in line and len(line) < 300
    assert (
        line.startswith("invalid config at (top level): Additional properties") and "'foo'" in line
    )


def test_schema_error_inside_a_wrapper_names_the_path(cfg):
    cfg["models"]["tiny_mlp"]["training"]["epochs"] = "one"
    err = _schema_error(cfg)
    try:
        try:
            raise err
        except jsonschema.ValidationError as inner:
            raise RuntimeError("Error validating config file.\n" + str(inner)) from None
    except RuntimeError as wrapped:
        line = schema_error_line(wrapped)
    assert line.startswith(
        "invalid config at models.tiny_mlp.training.epochs: 'one' is not of type"
    )
