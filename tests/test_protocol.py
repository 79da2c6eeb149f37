"""calbench.protocol: one calibrate spec with one check, and every default of its settings once
(the config schema's, the CLI verbs' and the library functions' defaults agree)."""

from __future__ import annotations

import copy
import inspect
from pathlib import Path

import pytest
import yaml

from calbench.calibrate_spec import CALIBRATE_SPEC, DEFAULTS
from calbench.protocol import CalibrateSpec

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
SECTIONS = ("evaluation", "compare", "plots")


def _lists(value):
    """Tuples as lists, as JSON and YAML give them."""
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return value


def _schema_defaults() -> dict:
    props = yaml.safe_load(SCHEMA.read_text())["properties"]
    return {
        s: {k: props[s]["properties"][k]["default"] for k in CALIBRATE_SPEC[s]} for s in SECTIONS
    }


def test_the_spec_defaults_are_the_schemas_and_a_config_carries_them_into_the_spec():
    from snakemake.utils import validate

    assert _lists(DEFAULTS) == _schema_defaults()
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    for section in SECTIONS:
        cfg.pop(section, None)
    validate(cfg, str(SCHEMA))  # fills the schema's defaults, as the workflow's config
    spec = CalibrateSpec.from_config(cfg).to_dict()
    assert {s: spec[s] for s in SECTIONS} == _lists(DEFAULTS)


def _called(monkeypatch, tmp_path, verb: str, argv: list) -> dict:
    """The keyword arguments ``calbench <argv>`` passes to ``calbench.steps.<verb>``."""
    from calbench import steps
    from calbench.cli import main

    seen: dict = {}
    monkeypatch.setattr(steps, verb, lambda *a, **k: seen.update(k))
    files = ["--logits", tmp_path / "l.npz", "--split", tmp_path / "s.npz"]
    assert main([str(a) for a in [argv[0], *files, *argv[1:]]]) == 0
    return seen


def test_the_cli_verbs_defaults_are_the_schemas(monkeypatch, tmp_path):
    schema = _schema_defaults()
    ev, cmp = schema["evaluation"], schema["compare"]
    got = _called(monkeypatch, tmp_path, "evaluate",
                  ["evaluate", "--calibrator", tmp_path / "ts.json", "--out", tmp_path / "m.csv",
                   "--plot", tmp_path / "ts.png"])  # fmt: skip
    assert {k: got[k] for k in ev} == ev
    assert {k: got["plot_options"][k] for k in schema["plots"]} == schema["plots"]
    got = _called(monkeypatch, tmp_path, "compare",
                  ["compare", "--calibrators", tmp_path / "ts.json", tmp_path / "uncalibrated.json",
                   "--out", tmp_path / "c.csv"])  # fmt: skip
    assert {k: got[k] for k in cmp} == cmp
    assert (got["level"], got["seed"]) == (ev["level"], ev["seed"])  # the evaluation's


def test_the_library_functions_defaults_are_the_schemas():
    from calbench import steps

    schema = _schema_defaults()
    ev, cmp = schema["evaluation"], schema["compare"]
    evaluate = inspect.signature(steps.evaluate).parameters
    assert {k: _lists(evaluate[k].default) for k in ev} == ev
    compare = inspect.signature(steps.compare).parameters
    assert {k: _lists(compare[k].default) for k in cmp} == cmp
    assert (compare["level"].default, compare["seed"].default) == (ev["level"], ev["seed"])


SPEC = {
    "calibrators": {
        "uncalibrated": {"method": "uncalibrated", "params": {}, "display": "uncalibrated"},
        "ts": {"method": "ts", "params": {}, "display": "TS"},
    },
    **copy.deepcopy(_lists(DEFAULTS)),
}


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s["compare"].update(baselines=["ts", "hist"]),
         "compare.baselines names 'hist', which is not among the calibrators"),
        (lambda s: s["evaluation"].update(halves=["val"]),
         r"evaluation.halves must name test \(and optionally val\), got \['val'\]"),
        (lambda s: s["evaluation"].update(ci_metrics=["mce", "aurc"]),
         r"evaluation.ci_metrics names \['aurc'\], which are not in evaluation.metrics"),
        (lambda s: s["compare"].update(metrics=["ece"]), "compare.metrics"),
        (lambda s: s["compare"].update(n_bootstrap=0), "compare.n_bootstrap must be >= 1"),
        (lambda s: s["plots"].update(style="nope"), "style"),
        (lambda s: s["calibrators"]["ts"].update(params={"nope": 1}), "calibrator 'ts'"),
        (lambda s: s["compare"].pop("select_folds"), "compare: missing key 'select_folds'"),
    ],
)  # fmt: skip
def test_one_check_names_the_specs_setting_before_any_work(tmp_path, edit, message):
    spec = copy.deepcopy(SPEC)
    edit(spec)
    with pytest.raises(ValueError, match=message) as info:
        CalibrateSpec.from_dict(spec).run(
            tmp_path / "missing.npz", tmp_path / "missing_split.npz",
            calibrators_dir=tmp_path / "c", metrics_dir=tmp_path / "m", plots_dir=tmp_path / "p",
            compare_out=tmp_path / "cmp.csv",
        )  # fmt: skip
    assert "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_the_by_hand_verbs_get_the_same_checks_named_by_their_options(tmp_path):
    """``compare`` by hand checks its baselines as the spec's check does, before reading the
    logits (it used to find a missing baseline only after the cross-fitted selection);
    ``evaluate`` by hand may evaluate the validation half alone."""
    from calbench.steps import compare, evaluate

    missing = (tmp_path / "missing.npz", tmp_path / "missing_split.npz")
    cals = [tmp_path / "ts.json", tmp_path / "hist.json"]
    with pytest.raises(ValueError, match=r"--baselines names 'uncalibrated', which is not among"):
        compare(*missing, cals, tmp_path / "c.csv")
    with pytest.raises(ValueError, match=r"--select-exclude names \['iso'\]"):
        compare(*missing, cals, tmp_path / "c.csv", baselines=["ts"], select_exclude=["iso"])
    with pytest.raises(ValueError, match=r"--n-bootstrap must be >= 1 for the comparisons"):
        compare(*missing, cals, tmp_path / "c.csv", baselines=["ts"], n_bootstrap=0)
    with pytest.raises(
        ValueError, match=r"--ci-halves names \['test'\], which are not in --halves"
    ):
        evaluate(*missing, cals[0], tmp_path / "m.csv", halves=["val"], ci_halves=["test"])
    with pytest.raises(FileNotFoundError):  # halves=["val"] passes the check; the logits are read
        evaluate(*missing, cals[0], tmp_path / "m.csv", halves=["val"])
    assert list(tmp_path.iterdir()) == []


def test_the_spec_file_round_trips():
    spec = CalibrateSpec.from_dict(copy.deepcopy(SPEC))
    assert CalibrateSpec.from_dict(yaml.safe_load(spec.to_json())) == spec
    assert spec.to_dict() == SPEC


@pytest.mark.slow
def test_the_by_hand_verbs_with_their_defaults_write_what_the_default_spec_writes(tmp_path):
    """No setting given anywhere: fit-calibrator, evaluate --plot and compare write the bytes
    ``calibrate`` writes with the schema's default spec (before, evaluate computed every
    registered metric and compare every verdict-eligible one)."""
    import numpy as np

    from calbench.functional import softmax
    from calbench.split import save_split, study_split
    from calbench.steps import compare, evaluate, fit_calibrator

    n, k = 300, 4
    rng = np.random.default_rng(2)
    z = (rng.normal(size=(n, k)) * 4.0).astype(np.float32)
    y = np.array([rng.choice(k, p=row) for row in softmax(z / 3.0)], dtype=np.int64)
    files = (tmp_path / "l.npz", tmp_path / "s.npz")
    np.savez(files[0], logits=z, labels=y, order_hash="h", model="m", dataset="d")
    save_split(files[1], *study_split(n))
    spec, hand = tmp_path / "spec", tmp_path / "hand"
    CalibrateSpec.from_dict(copy.deepcopy(SPEC)).run(
        *files, calibrators_dir=spec, metrics_dir=spec, plots_dir=spec,
        compare_out=spec / "compare.csv",
    )  # fmt: skip
    for key in SPEC["calibrators"]:
        fit_calibrator(*files, key, {}, hand / f"{key}.json")
        evaluate(*files, hand / f"{key}.json", hand / f"{key}.csv", plot=hand / f"{key}.png",
                 plot_options={"title": SPEC["calibrators"][key]["display"]})  # fmt: skip
    compare(*files, [hand / f"{key}.json" for key in SPEC["calibrators"]], hand / "compare.csv")
    ours = {p.name: p.read_bytes() for p in hand.iterdir()}
    assert ours == {p.name: p.read_bytes() for p in spec.iterdir() if p.name != "grid.png"}
