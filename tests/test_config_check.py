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
    from calbench._yaml import load_yaml_file
    from calbench.study_config import complete

    # as the Snakefile reads it: what the config leaves out filled in first
    assert check_config(complete(load_yaml_file(path), REPO), SCHEMA) == []


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
            lambda c: (
                c.update(shift={"corruptions": ["gaussian_noise"]}),
                c["evaluation"].update(scheme="crossfit"),
            ),
            "shift",
            "on which evaluation.scheme crossfit fits them",
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
        (
            lambda c: c["calibrators"].update(ts={"method": "vs"}),
            "calibrators.ts.method",
            "the key 'ts' is temperature scaling in the report (fitted temperatures, comparisons "
            "with TS) but names method 'vs'; name the entry after its method (vs: {method: vs})",
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


# --- values the schema accepts but no job can use (issue 33, group 12) ------------------------
@pytest.mark.parametrize(
    "section, key, value, words",
    [
        ("evaluation", "n_bootstrap", 20.0, "evaluation.n_bootstrap: 20.0 is not a whole number (YAML reads it as a float); write 20"),
        ("evaluation", "n_bootstrap", 1e9, "evaluation.n_bootstrap: 1000000000.0 is not a whole number"),
        ("evaluation", "n_bootstrap", 10**9, "evaluation.n_bootstrap: 1000000000 is too large; use at most 100,000"),
        ("compare", "n_bootstrap", 10**7, "compare.n_bootstrap: 10000000 is too large"),
        ("evaluation", "level", float("nan"), "evaluation.level: nan is not a finite number; write a number"),
        ("evaluation", "seed", 1000.0, "evaluation.seed: 1000.0 is not a whole number (YAML reads it as a float); write 1000"),
        ("plots", "n_bins", 10**9, "plots.n_bins: 1000000000 is too large; use at most 10,000"),
    ],
)  # fmt: skip
def test_values_jobs_would_reject_fail_before_any_job(cfg, section, key, value, words):
    cfg[section][key] = value
    jsonschema.validate(cfg, SCHEMA)  # the schema alone lets each of them through
    problems = check_config(cfg, SCHEMA)
    assert any(words in p for p in problems), problems
    assert not any("--" in p for p in problems), problems  # config keys, never CLI flags


def test_nan_and_float_integers_deep_in_the_config_are_named(cfg):
    model = next(iter(cfg["models"]))
    cfg["models"][model]["training"]["epochs"] = 2.0
    cfg["models"][model]["training"]["lr"] = float("inf")
    problems = check_config(cfg, SCHEMA)
    assert f"models.{model}.training.epochs: 2.0 is not a whole number (YAML reads it as a float); write 2" in problems
    assert f"models.{model}.training.lr: inf is not a finite number; write a number" in problems


@pytest.mark.parametrize(
    "where, edit",
    [
        ("calibrators.ts.display", lambda c: c["calibrators"]["ts"].update(display="T $\\alpha")),
        ("models.tiny_mlp.display.name", lambda c: c["models"]["tiny_mlp"]["display"].update(name="$x$")),
        ("datasets.fashion_mnist.display", lambda c: c["datasets"]["fashion_mnist"].update(display="F\nM")),
    ],
)
def test_labels_the_diagrams_cannot_draw_are_refused(cfg, where, edit):
    edit(cfg)
    problems = check_config(cfg)
    assert len(problems) == 1 and problems[0].startswith(where + ": "), problems
    assert "\n" not in problems[0].replace("\\n", "")


def test_validate_is_one_line_naming_the_key(cfg, tmp_path):
    from calbench.config_check import validate

    cfg["evaluation"]["level"] = float("nan")
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA))
    with pytest.raises(ValueError) as exc:
        validate(cfg, schema)
    assert str(exc.value).count("\n") == 0 and "evaluation.level" in str(exc.value)


def test_config_files_are_read_with_the_checking_loader(tmp_path):
    from calbench.config_check import check_config_files

    text = (REPO / "config" / "test.yaml").read_text()
    good = tmp_path / "good.yaml"
    good.write_text(text)
    check_config_files([good])
    dup = tmp_path / "dup.yaml"
    dup.write_text(text.replace("  ts: {display: T-scaling}\n", "  ts: {display: T-scaling}\n  ts: {}\n"))
    with pytest.raises(ValueError, match=r"dup.yaml line \d+: duplicate key 'ts' \(first at line \d+\)"):
        check_config_files([good, dup])


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda c: c["datasets"]["fashion_mnist"].update(archive="../../x.tar"), "datasets.fashion_mnist.archive"),
        (lambda c: c["models"]["tiny_mlp"].update(source="checkpoint", arch="huyvnphan_resnet18", checkpoint={"urls": [], "filename": "../../../X/w.zip"}), "models.tiny_mlp.checkpoint.filename"),
        (lambda c: c["models"]["tiny_mlp"].update(source="checkpoint", arch="huyvnphan_resnet18", checkpoint={"urls": [], "filename": "w.zip", "archive_member": "/etc/passwd"}), "models.tiny_mlp.checkpoint.archive_member"),
    ],
)  # fmt: skip
def test_file_names_in_the_config_stay_in_their_folder(cfg, edit, key):
    edit(cfg)
    problems = [p for p in check_config(cfg) if p.startswith(key + ": ")]
    assert len(problems) == 1 and ("holds '..'" in problems[0] or "absolute" in problems[0])


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda c: c["models"]["tiny_mlp"]["display"].update(name="M" * 201),
         "models.tiny_mlp.display.name: 'MMMM"),
        (lambda c: c["calibrators"]["ts"].update(display="T" * 300), "calibrators.ts.display: 'TTT"),
        (lambda c: c["datasets"]["fashion_mnist"].update(display=" F"), "starts or ends with a space"),
        (lambda c: c["calibrators"]["ts"].update(display="=1+1"), "formula"),
        (lambda c: c["calibrators"]["hist"].update(display="T-scaling"),
         "calibrators.ts and calibrators.hist are both displayed as 'T-scaling'"),
        (lambda c: c["models"]["tiny_mlp_fl2"]["display"].update(loss="CE"),
         "models.tiny_mlp and models.tiny_mlp_fl2 are both displayed as 'MLP (CE)'"),
    ],
)  # fmt: skip
def test_labels_the_tables_would_refuse_fail_before_any_job(cfg, edit, words):
    """Every display name the calibrate and aggregate steps refuse (calbench._checks.check_text:
    length, spaces, formula characters; two entries shown alike) is refused by the config check,
    before any job runs, in the steps' own words."""
    edit(cfg)
    problems = check_config(cfg)
    assert len(problems) == 1 and words in problems[0], problems
    if words.endswith(("MMMM", "TTT")):  # too long: the limit is named, the label cut short
        assert "characters (at most 200)" in problems[0] and len(problems[0]) < 300


@pytest.mark.parametrize("limit, folds, ok", [(40, 10, True), (39, 10, False), (400, 20, True)])
def test_select_folds_against_a_dataset_s_limit(cfg, limit, folds, ok):
    """The cross-fitted selection needs two validation samples a fold: with ``limit`` samples the
    study's validation half is ``limit // 2``; too many folds are refused before any job."""
    cfg["datasets"]["fashion_mnist"]["limit"] = limit
    cfg["compare"]["select_folds"] = folds
    problems = check_config(cfg, SCHEMA)
    if ok:
        assert problems == []
    else:
        assert problems == [
            "compare.select_folds: 10 folds need at least 20 validation samples, but "
            "datasets.fashion_mnist.limit: 39 gives a validation half of 19; lower "
            "compare.select_folds or raise the limit"
        ]
