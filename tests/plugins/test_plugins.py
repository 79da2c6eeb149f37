"""calbench.plugins: entry points and module:Class references registered like built-ins, every
metric fact required, one-line errors naming the entry point and the fix, code inputs."""

from __future__ import annotations

import json
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pytest

from calbench import plugins
from calbench.calibrators import REGISTRY, get_calibrator, load_calibrator, save_calibrator
from calbench.conformance import overconfident_logits
from calbench.metrics import METRICS
from calbench.plugin_inputs import plugin_code_inputs

REPO = Path(__file__).resolve().parents[2]


def test_example_entry_points_register_calibrator_and_metric(plugin_env):
    plugin_env()
    # installed, nothing is loaded until a config or command names it
    assert "citl" not in METRICS and "mix_uniform" not in REGISTRY
    plugins.load_plugins(calibrators=["mix_uniform", "ts"], metrics=["citl", "ece"])
    z, y = overconfident_logits(500, 5, seed=0)
    cal = get_calibrator("mix_uniform").fit(z, y)
    assert REGISTRY["mix_uniform"] is type(cal)
    # over-confident logits: some shrinkage towards uniform, and it lowers the validation NLL
    assert 0.0 < cal.alpha_ < 1.0
    p, q = cal.predict_proba(z), get_calibrator("uncalibrated").fit(z, y).predict_proba(z)
    nll = lambda r: -np.mean(np.log(r[np.arange(len(y)), y]))  # noqa: E731
    assert nll(p) < nll(q)
    # the metric is |mean confidence - accuracy|, by hand
    conf, acc = p.max(1).mean(), (p.argmax(1) == y).mean()
    assert METRICS["citl"](p, y) == pytest.approx(abs(conf - acc), abs=1e-15)


def test_a_plugin_json_loads_in_a_fresh_process_state(plugin_env, tmp_path):
    plugin_env()
    z, y = overconfident_logits(300, 4, seed=1)
    cal = plugins.find_calibrator("mix_uniform")().fit(z, y)
    save_calibrator(cal, tmp_path / "c.json")
    REGISTRY.pop("mix_uniform")  # as in another process: the reader loads the plug-in first
    plugins.forget_loaded()
    plugins.load_plugins(calibrators=["mix_uniform"])
    back = load_calibrator(tmp_path / "c.json")
    assert np.array_equal(back.predict_proba(z), cal.predict_proba(z))


def test_module_class_reference_from_the_current_folder(plugin_env, tmp_path, monkeypatch):
    (tmp_path / "user_cal.py").write_text(
        textwrap.dedent("""
        from my_calibrator import MixUniform

        class Mine(MixUniform):
            reference = "a user's own calibrator, 2026"
    """)
    )
    plugin_env()
    monkeypatch.chdir(tmp_path)
    z, y = overconfident_logits(200, 3, seed=2)
    cal = plugins.find_calibrator("user_cal:Mine")().fit(z, y)
    assert cal.to_dict()["method"] == "user_cal:Mine"  # the JSON names the reference
    save_calibrator(cal, tmp_path / "m.json")
    assert np.array_equal(
        load_calibrator(tmp_path / "m.json").predict_proba(z), cal.predict_proba(z)
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("broken_pkg:Missing", "module 'broken_pkg' has no attribute 'Missing'; fix the reference"),
        ("no_such_module:X", "cannot import 'no_such_module'"),
        ("broken_pkg:NOT_A_CLASS", "not a subclass of calbench.calibrators.Calibrator"),
        ("broken_pkg:Named", "the class's name is 'other', not 'bad_cal'"),
    ],
)
def test_a_broken_entry_point_is_one_line_naming_it(plugin_env, tmp_path, entry, message):
    pkg = tmp_path / "src" / "broken_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        textwrap.dedent("""
        from calbench.calibrators import Calibrator
        NOT_A_CLASS = 3
        class Named(Calibrator):
            name = "other"
    """)
    )
    plugin_env(pkg, {"calbench.calibrators": {"bad_cal": entry}})
    with pytest.raises(ValueError) as err:
        plugins.find_calibrator("bad_cal")
    text = str(err.value)
    assert "\n" not in text and message in text
    assert f"entry point bad_cal = {entry} (group calbench.calibrators" in text
    # the validator says the same, naming the config key
    from calbench.config_check import _calibrator_problems

    (problem,) = _calibrator_problems({"calibrators": {"mine": {"method": "bad_cal"}}})
    assert problem.startswith("calibrators.mine.method: plug-in calibrator entry point bad_cal")


def test_unknown_name_lists_plugins_and_the_fix():
    with pytest.raises(
        ValueError,
        match=r"unknown calibrator 'nope'; choose one of .*netcal\.ts.*"
        r"entry point nope in group calbench\.calibrators",
    ):
        plugins.find_calibrator("nope")
    # the library's own lookup knows the registry only, and says where plug-ins are loaded
    with pytest.raises(
        ValueError, match=r"unknown calibrator 'nope'; choose one of .*fit-calibrator --method"
    ):
        get_calibrator("nope")


def test_missing_requirement_names_the_install(plugin_env, tmp_path):
    pkg = tmp_path / "src" / "broken_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        textwrap.dedent("""
        from calbench.adapters.base import Adapter
        class Needs(Adapter):
            name = "needs"
            requires = ("a_module_that_is_not_installed",)
            install = "'calbench[arena]'"
    """)
    )
    plugin_env(pkg, {"calbench.calibrators": {"needs": "broken_pkg:Needs"}})
    with pytest.raises(
        ValueError,
        match=r"needs a_module_that_is_not_installed, which is not "
        r"installed; pip install 'calbench\[arena\]'",
    ):
        plugins.find_calibrator("needs")


METRIC_SOURCE = """
from calbench.plugins import metric
from calbench.metrics import Metric

def _f(p, y):
    return float(p.max(1).mean())

FACTS = dict(name="{name}", display="Conf", scale=1.0, decimals=3, higher_is_better=False,
             interval="percentile", paired_test="sign_flip", reference="an example, 2026",
             verdicts=False)
good = metric(**FACTS)(_f)
no_reference = Metric("no_reference", lambda p, y, d=None: 0.0, display="X", scale=1.0,
                      decimals=2, higher_is_better=False, interval="percentile",
                      paired_test="sign_flip")
paired_t = metric(**{{**FACTS, "name": "paired_t", "paired_test": "paired_t"}})(_f)
no_reason = metric(**{{**FACTS, "name": "no_reason", "interval": None}})(_f)
sign_flip_verdicts = metric(**{{**FACTS, "name": "sign_flip_verdicts", "verdicts": True}})(_f)
"""


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        ("no_reference", "metric 'no_reference' does not declare reference"),
        ("paired_t", "paired_test 'paired_t' of metric 'paired_t' compares per-sample values"),
        ("no_reason", "metric 'no_reason' does not declare no_interval_reason"),
        (
            "sign_flip_verdicts",
            "metric 'sign_flip_verdicts' declares verdicts=True with paired_test 'sign_flip', "
            "whose null is exchangeability, not equal value, so no verdict may rest on it; "
            "declare verdicts=False",
        ),
    ],
)
def test_a_metric_missing_a_fact_is_an_error_not_a_default(plugin_env, tmp_path, attr, message):
    pkg = tmp_path / "src" / "broken_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(METRIC_SOURCE.format(name="good"))
    plugin_env(pkg, {"calbench.metrics": {"good": "broken_pkg:good", attr: f"broken_pkg:{attr}"}})
    plugins.load_plugins(metrics=["good"])
    assert "good" in METRICS and attr not in METRICS  # the broken one never joins
    why = plugins.metric_problem(attr)
    assert message in why and "\n" not in why and f"entry point {attr} = broken_pkg:{attr}" in why
    from calbench.config_check import _metric_problems

    assert _metric_problems({"evaluation": {"metrics": ["good", attr]}}) == [
        f"evaluation.metrics: {why}"
    ]


def test_the_metric_decorator_requires_every_fact():
    with pytest.raises(TypeError, match="reference"):
        plugins.metric(name="x", display="X", scale=1.0, decimals=2, higher_is_better=False,
                       interval="percentile", paired_test="sign_flip", verdicts=False)  # fmt: skip


def test_adapters_are_the_entry_points_of_pyproject():
    from calbench.adapters import ADAPTERS

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["calbench.calibrators"] == ADAPTERS
    assert {"netcal", "probmetrics", "betacal", "venn-abers"} <= {
        r.split(">")[0].split("=")[0] for r in project["optional-dependencies"]["arena"]
    }


def _config(**extra):
    cfg = {
        "calibrators": {"ts": None, "mine": {"method": "mix_uniform"}},
        "evaluation": {"metrics": ["ece", "citl"]},
    }
    cfg.update(extra)
    return cfg


def test_plugin_files_are_code_inputs_of_exactly_the_verbs_running_them(plugin_env):
    path = plugin_env()
    init = str(path / "my_calibrator" / "__init__.py")
    inputs = {v: plugin_code_inputs(_config(), v) for v in
              ("calibrate", "evaluate-shift", "aggregate", "render-report", "train-model",
               "cache-logits", "split")}  # fmt: skip
    assert inputs["calibrate"] == [init] and inputs["evaluate-shift"] == [init]
    assert inputs["aggregate"] == [init]  # the metric's facts: tables
    assert inputs["render-report"] == [init]
    assert inputs["train-model"] == inputs["cache-logits"] == inputs["split"] == []
    assert plugin_code_inputs({"calibrators": {"ts": None}}, "calibrate") == []


def test_manifest_names_plugin_files_by_folder(plugin_env):
    from calbench._sources import code_manifest_text

    path = plugin_env()
    text = code_manifest_text([path / "my_calibrator" / "__init__.py"])
    assert text.endswith("  plugin:my_calibrator/__init__.py\n")


def test_reuse_digest_changes_only_for_the_plugin_entry(plugin_env):
    from calbench.reuse import reuse_digest

    path = plugin_env()
    spec = {"calibrators": {"ts": {"method": "ts"}, "mine": {"method": "mix_uniform"}},
            "evaluation": {"metrics": ["ece"]}, "plots": {}}  # fmt: skip
    meta = {"logits_sha256": "a", "order_hash": "b", "dataset": "d", "model": "m"}
    before = {k: reuse_digest(k, spec, meta, "s", "c") for k in spec["calibrators"]}
    f = path / "my_calibrator" / "__init__.py"
    f.write_text(f.read_text() + "\n# edited\n")
    after = {k: reuse_digest(k, spec, meta, "s", "c") for k in spec["calibrators"]}
    assert after["ts"] == before["ts"] and after["mine"] != before["mine"]


def test_check_calibrator_cli_on_the_example(plugin_env, capsys):
    from calbench.cli import main

    plugin_env()
    assert main(["check-calibrator", "mix_uniform", "--no-timing"]) == 0
    out = capsys.readouterr().out
    assert "PASS  round trip" in out and "mix_uniform: conforms" in out
    assert main(["check-metric", "citl"]) == 0
    assert "INFO  time 5000 x 100" in capsys.readouterr().out
    assert main(["check-calibrator", "nope"]) == 2
    assert "unknown calibrator 'nope'" in capsys.readouterr().err


def test_json_of_a_plugin_is_plain(plugin_env, tmp_path):
    plugin_env()
    z, y = overconfident_logits(100, 3, seed=3)
    save_calibrator(plugins.find_calibrator("mix_uniform")().fit(z, y), tmp_path / "c.json")
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["method"] == "mix_uniform" and set(data["state"]) == {"n_classes", "alpha"}
