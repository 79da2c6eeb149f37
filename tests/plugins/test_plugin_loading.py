"""How plug-ins are loaded (calbench.plugins): only the ones a config or command names,
explicitly, by the CLI and the workflow's config check; an import that exits or parses
arguments is a one-line error naming the entry point; a name of calbench's own (a built-in, an
output file) is refused; a config's ``module:attr`` is imported only from the project folder;
a plug-in's code inputs are every file of the user's folder it imports."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from plugin_site import make_site

from calbench import plugins
from calbench.calibrators import REGISTRY, get_calibrator, save_calibrator
from calbench.conformance import overconfident_logits
from calbench.metrics import METRICS
from calbench.plugin_inputs import code_digest, plugin_files
from calbench.split import save_split, study_split

SRC = Path(__file__).resolve().parents[2] / "src"

METRIC_FACTS = (
    'display="Conf", scale=1.0, decimals=3, higher_is_better=False, interval="percentile", '
    'paired_test="sign_flip", reference="an example, 2026", verdicts=False'
)


def _site(tmp_path, monkeypatch, files, entry_points=None, name="cbt_site"):
    """``files`` and ``entry_points`` installed (first on sys.path), as pip would."""
    path = make_site(tmp_path / name, {k: textwrap.dedent(v) for k, v in files.items()},
                     entry_points, name=name)  # fmt: skip
    monkeypatch.syspath_prepend(str(path))
    plugins.entry_points.cache_clear()
    return path


def _one_line_error(capsys, fragment):
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and fragment in err, err
    return err


# --- 39.3: a folder without __init__.py importing a helper ----------------------------------
NS_MODULE = """
    from broken_calibrators import Shrink
    from cbt_folder import cbt_helper
    from . import cbt_rel

    class Mine(Shrink):
        reference = cbt_helper.REFERENCE + cbt_rel.SUFFIX

    def later():
        import cbt_folder.cbt_lazy  # a function-level import counts too
        return cbt_folder.cbt_lazy
"""


def test_a_folder_plugins_helpers_are_its_code_inputs_and_reuse_key(tmp_path, monkeypatch):
    project = tmp_path / "project"
    folder = project / "cbt_folder"  # docs/plugins.md's layout: no __init__.py
    folder.mkdir(parents=True)
    (folder / "cbt_mod.py").write_text(textwrap.dedent(NS_MODULE))
    (folder / "cbt_helper.py").write_text('REFERENCE = "a user, 2026"\n')
    (folder / "cbt_rel.py").write_text('SUFFIX = ""\n')
    (folder / "cbt_lazy.py").write_text("X = 1\n")
    (folder / "cbt_unrelated.py").write_text("Y = 1\n")  # imported by nothing
    monkeypatch.chdir(project)
    ref = "cbt_folder.cbt_mod:Mine"
    assert plugins.find_calibrator(ref).reference == "a user, 2026"
    files = plugin_files([ref], plugins.CALIBRATOR_GROUP)
    assert sorted(Path(f).name for f in files) == [
        "cbt_helper.py", "cbt_lazy.py", "cbt_mod.py", "cbt_rel.py"
    ]  # fmt: skip
    before = code_digest([ref])
    (folder / "cbt_unrelated.py").write_text("Y = 2\n")
    assert code_digest([ref]) == before
    (folder / "cbt_helper.py").write_text('REFERENCE = "a user, 2027"\n')
    assert code_digest([ref]) != before  # the fit is refitted, not restored


def test_a_lone_metric_modules_helper_module_is_a_code_input(tmp_path, monkeypatch):
    _site(tmp_path, monkeypatch, {
        "cbt_metric.py": f"""
            import cbt_metric_helper
            from calbench.plugins import metric

            @metric(name="cbt_conf", {METRIC_FACTS})
            def conf(p, y):
                return cbt_metric_helper.mean_confidence(p)
        """,
        "cbt_metric_helper.py": "def mean_confidence(p):\n    return float(p.max(1).mean())\n",
    }, {"calbench.metrics": {"cbt_conf": "cbt_metric:conf"}})  # fmt: skip
    plugins.find_metric("cbt_conf")
    files = plugin_files(["cbt_conf"], plugins.METRIC_GROUP)
    assert sorted(Path(f).name for f in files) == ["cbt_metric.py", "cbt_metric_helper.py"]


# --- 39.4: an import that exits ----------------------------------------------------------------
EXITS = {
    "cbt_exit.py": "import sys\nsys.exit(0)\n",
    "cbt_args.py": """
        import argparse
        parser = argparse.ArgumentParser(prog="cbt_args")
        parser.add_argument("--needed", required=True)
        parser.parse_args()
    """,
    "cbt_kbd.py": "raise KeyboardInterrupt\n",
}
EXIT_EPS = {"calbench.metrics": {"cbt_exit": "cbt_exit:m", "cbt_args": "cbt_args:m",
                                 "cbt_kbd": "cbt_kbd:m"},
            "calbench.calibrators": {"cbt_exit_cal": "cbt_exit:C"}}  # fmt: skip


def test_an_unused_plugin_that_exits_at_import_is_never_imported(tmp_path):
    site = make_site(tmp_path / "site", {k: textwrap.dedent(v) for k, v in EXITS.items()}, EXIT_EPS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(SRC)])}
    code = (
        "import sys, calbench.metrics, calbench.calibrators, calbench.cli\n"
        "print('plugins' if 'calbench.plugins' in sys.modules else 'no plugins')\n"
        "sys.exit(calbench.cli.main(['check-metric', 'nll', '--no-timing']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    # importing the registries loads no plug-in module (no cycle, nothing implicit)
    assert out.stdout.startswith("no plugins\n")
    assert "nll: conforms" in out.stdout and "usage" not in out.stderr


@pytest.mark.parametrize(
    ("name", "said"),
    [("cbt_exit", "called sys.exit(0)"), ("cbt_args", "called sys.exit(2)")],
)
def test_a_named_plugin_that_exits_at_import_is_one_line_naming_it(
    tmp_path, monkeypatch, capsys, name, said
):
    from calbench.cli import main

    _site(tmp_path, monkeypatch, EXITS, EXIT_EPS)
    assert main(["check-metric", name, "--no-timing"]) == 2
    err = _one_line_error(capsys, f"entry point {name} = {name}:m (group calbench.metrics")
    assert said in err and "usage:" not in err.split("its output began")[0]
    # the config check says the same under the config key
    from calbench.config_check import _metric_problems

    (problem,) = _metric_problems({"evaluation": {"metrics": [name]}})
    assert problem.startswith(f"evaluation.metrics: plug-in metric entry point {name}")
    assert said in problem


def test_a_calibrator_that_exits_at_import_stops_the_verb_naming_it(tmp_path, monkeypatch, capsys):
    from calbench.cli import main

    _site(tmp_path, monkeypatch, EXITS, EXIT_EPS)
    assert main(["check-calibrator", "cbt_exit_cal", "--no-timing"]) == 2
    _one_line_error(capsys, "entry point cbt_exit_cal = cbt_exit:C")


def test_keyboard_interrupt_in_a_plugins_import_is_not_swallowed(tmp_path, monkeypatch):
    _site(tmp_path, monkeypatch, EXITS, EXIT_EPS)
    with pytest.raises(KeyboardInterrupt):
        plugins.find_metric("cbt_kbd")


# --- 39.7: a plug-in named like a built-in --------------------------------------------------
SHADOW = {
    "cbt_shadow.py": f"""
        from broken_calibrators import Shrink
        from calbench.plugins import metric

        class TS(Shrink):
            name = "ts"

        @metric(name="ece", {METRIC_FACTS})
        def ece(p, y):
            return 0.0
    """
}


def test_a_plugin_named_like_a_builtin_is_refused(tmp_path, monkeypatch):
    _site(tmp_path, monkeypatch, SHADOW, {"calbench.calibrators": {"ts": "cbt_shadow:TS"},
                                          "calbench.metrics": {"ece": "cbt_shadow:ece"}})  # fmt: skip
    why = plugins.calibrator_problem("ts")
    assert why is not None and "\n" not in why
    assert "entry point ts = cbt_shadow:TS" in why and "calbench's own calibrator 'ts'" in why
    why = plugins.metric_problem("ece")
    assert why is not None and "entry point ece = cbt_shadow:ece" in why
    assert "calbench's own metric 'ece'" in why
    from calbench.config_check import _calibrator_problems, _metric_problems

    (problem,) = _calibrator_problems({"calibrators": {"ts": None}})
    assert problem.startswith("calibrators.ts: plug-in calibrator entry point ts")
    assert _metric_problems({"evaluation": {"metrics": ["ece"]}})
    # the library's own lookup is untouched: get_calibrator("ts") is calbench's
    assert REGISTRY["ts"].__module__.startswith("calbench.calibrators.")
    assert type(get_calibrator("ts")) is REGISTRY["ts"]
    assert "cbt_shadow" not in sys.modules  # refused from the metadata, never imported


def test_get_calibrator_of_a_builtin_never_reads_entry_points(monkeypatch):
    from importlib import metadata

    def boom(*a, **k):
        raise AssertionError("entry points read")

    monkeypatch.setattr(metadata, "entry_points", boom)
    plugins.entry_points.cache_clear()
    assert get_calibrator("ts").name == "ts"
    with pytest.raises(ValueError, match="unknown calibrator 'nope'"):
        get_calibrator("nope")


# --- 39.12: a metric named like one of calbench's own output files ---------------------------
@pytest.mark.parametrize(
    ("name", "file"),
    [("losses_ece", "results/tables/losses_ece"), ("reference", "results/tables/reference.csv"),
     ("error", "derived quantity 1 - accuracy"), ("temperature", "the fitted temperature")],
)  # fmt: skip
def test_a_metric_named_like_an_output_file_is_refused(tmp_path, monkeypatch, name, file):
    _site(tmp_path, monkeypatch, {
        "cbt_tables.py": f"""
            from calbench.plugins import metric

            @metric(name="{name}", {METRIC_FACTS})
            def m(p, y):
                return 0.0
        """}, {"calbench.metrics": {name: "cbt_tables:m"}})  # fmt: skip
    why = plugins.metric_problem(name)
    assert why is not None and "\n" not in why and file in why, why
    assert f"entry point {name} = cbt_tables:m" in why and "rename" in why
    assert name not in METRICS or not plugins.plugin_origin(plugins.METRIC_GROUP, name)


def test_reserved_metric_names_cover_the_reports_derived_quantities():
    from calbench.display import DERIVED

    for name in DERIVED:
        assert plugins.reserved_metric_name(name)
    assert not plugins.reserved_metric_name("citl")


# --- 39.17: a config value imports only from the project folder -----------------------------
@pytest.mark.parametrize("check", ["calibrator_problem", "metric_problem"])
def test_a_reference_outside_the_project_folder_is_refused_before_import(
    tmp_path, monkeypatch, capsys, check
):
    if "this" in sys.modules:
        pytest.skip("module 'this' already imported in this process")
    monkeypatch.chdir(tmp_path)
    why = getattr(plugins, check)("this:X")
    assert why is not None and "\n" not in why
    assert "not in the project folder" in why and str(tmp_path.resolve()) in why
    assert "this" not in sys.modules  # its import-time code never ran
    assert "Zen of Python" not in capsys.readouterr().out
    # an installed (already imported) module is no more a project module
    assert "not in the project folder" in getattr(plugins, check)("json:JSONDecoder")


def test_a_reference_inside_the_projects_virtualenv_is_refused(tmp_path, monkeypatch):
    site = tmp_path / ".venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    (site / "cbt_venv_mod.py").write_text("raise SystemExit('imported')\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / ".venv"))
    monkeypatch.chdir(tmp_path)
    why = plugins.calibrator_problem("cbt_venv_mod:X")
    assert why is not None and "installed" in why and "cbt_venv_mod" not in sys.modules


# --- 37.7: loaded explicitly by the verb that names them ---------------------------------------
def test_by_hand_verbs_load_the_plugin_they_name(plugin_env, tmp_path):
    """fit-calibrator --method and evaluate --calibrator (a JSON naming a plug-in) load the
    plug-in themselves, in a process that has not loaded it."""
    from calbench.cli import main

    plugin_env()
    z, y = overconfident_logits(300, 4, seed=1)
    np.savez(tmp_path / "l.npz", logits=z.astype(np.float32), labels=y, order_hash="a",
             model="m", dataset="d")  # fmt: skip
    val, test = study_split(len(y))
    save_split(tmp_path / "s.npz", val, test)
    common = ["--logits", tmp_path / "l.npz", "--split", tmp_path / "s.npz"]
    assert "mix_uniform" not in REGISTRY and "citl" not in METRICS
    args = ["fit-calibrator", *common, "--method", "mix_uniform", "--out", tmp_path / "c.json"]
    assert main([str(a) for a in args]) == 0
    REGISTRY.pop("mix_uniform")  # as in another process
    plugins.forget_loaded()
    args = ["evaluate", *common, "--calibrator", tmp_path / "c.json", "--metrics", "ece,citl",
            "--n-bootstrap", "0", "--out", tmp_path / "m.csv"]  # fmt: skip
    assert main([str(a) for a in args]) == 0
    assert "mix_uniform" in REGISTRY and "citl" in METRICS
    assert ",citl," in (tmp_path / "m.csv").read_text()


def test_a_plugin_json_needs_its_plugin_loaded_first(plugin_env, tmp_path):
    from calbench.calibrators import load_calibrator

    plugin_env()
    z, y = overconfident_logits(100, 3, seed=3)
    save_calibrator(plugins.find_calibrator("mix_uniform")().fit(z, y), tmp_path / "c.json")
    REGISTRY.pop("mix_uniform")
    plugins.forget_loaded()
    with pytest.raises(ValueError, match="unknown calibrator method 'mix_uniform'"):
        load_calibrator(tmp_path / "c.json")
    plugins.load_plugins(calibrators=["mix_uniform"])
    assert load_calibrator(tmp_path / "c.json").name == "mix_uniform"


def test_the_names_a_command_gives_are_read_from_each_place(plugin_env, tmp_path):
    import argparse
    import json

    from calbench.cli._args import load_named_plugins, named_plugins

    plugin_env()
    z, y = overconfident_logits(100, 3, seed=3)
    save_calibrator(plugins.find_calibrator("mix_uniform")().fit(z, y), tmp_path / "c.json")
    spec = {"calibrators": {"a": {"method": "ts"}, "iso": None},
            "evaluation": {"metrics": ["ece", "citl"], "ci_metrics": ["ece"]},
            "compare": {"metrics": ["nll"]}, "table_metrics": ["brier"]}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    args = argparse.Namespace(
        spec=f"@{tmp_path / 'spec.json'}", method="platt", metrics="accuracy, nope",
        compare_metrics="ece_ub", calibrators=[str(tmp_path / "c.json"), "results/x:y.json"],
    )  # fmt: skip
    assert named_plugins(args) == (
        ["ts", "iso", "platt", "mix_uniform"],
        ["brier", "ece", "citl", "nll", "accuracy", "nope", "ece_ub"],
    )
    REGISTRY.pop("mix_uniform")
    plugins.forget_loaded()
    load_named_plugins(args, metrics=False)  # unknown names and unreadable files: the verb's
    assert "mix_uniform" in REGISTRY and "citl" not in METRICS
    load_named_plugins(argparse.Namespace(metrics="citl", calibrators="ts,netcal.ts"))
    assert "citl" in METRICS


def test_the_workflows_config_check_loads_only_what_the_config_names(tmp_path, monkeypatch):
    """The check run at every workflow start (``snakemake -n`` included): installed plug-ins
    the config does not name (one exits at import) are not imported; a config's reference to an
    installed module is refused before that module's code runs."""
    import yaml

    from calbench.config_check import check_config

    if "this" in sys.modules:
        pytest.skip("module 'this' already imported in this process")
    _site(tmp_path, monkeypatch, EXITS, EXIT_EPS)
    cfg = yaml.safe_load((SRC.parent / "config" / "test.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    assert check_config(cfg) == []
    cfg["calibrators"]["mine"] = {"method": "this:X"}
    (problem,) = check_config(cfg)
    assert problem.startswith("calibrators.mine.method: plug-in calibrator reference 'this:X'")
    assert "not in the project folder" in problem
    assert not {"this", "cbt_exit", "cbt_args", "cbt_kbd"} & set(sys.modules)
