"""The calibrate step's spec file: one builder (calbench.protocol.CalibrateSpec) for the workflow's
helper (workflow/rules/helpers/calibrate.smk) and the perf scripts, byte for byte."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from calbench.protocol import CalibrateSpec

REPO = Path(__file__).resolve().parents[2]
HELPER = REPO / "workflow" / "rules" / "helpers" / "calibrate.smk"
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"

SMALL = {
    "calibrators": {
        "uncalibrated": None,
        "ts32": {"method": "ts", "params": {"precision": "float32"}, "display": "TS (f32)"},
        "hist": {"params": {"n_bins": 20}},
    },
    "evaluation": {"metrics": ["ece", "nll"], "halves": ["test"], "n_bootstrap": 10,
                   "level": 0.9, "seed": 3},
    "compare": {"metrics": ["nll"], "baselines": ["uncalibrated"], "n_bootstrap": 20,
                "select_folds": 5, "select_exclude": ["hist"], "other": "not in the spec"},
    "plots": {"n_bins": 10, "style": "coursework", "dpi": 99},
}  # fmt: skip

#: the file the workflow wrote for SMALL before the builder moved into the library (the text,
#: so also its digest in the file name, must not change: a changed spec reruns every job)
SMALL_TEXT = (
    '{"calibrators": {"uncalibrated": {"method": "uncalibrated", "params": {}, "display": '
    '"uncalibrated"}, "ts32": {"method": "ts", "params": {"precision": "float32"}, "display": '
    '"TS (f32)"}, "hist": {"method": "hist", "params": {"n_bins": 20}, "display": "hist"}}, '
    '"evaluation": {"metrics": ["ece", "nll"], "halves": ["test"], "n_bootstrap": 10, "level": '
    '0.9, "seed": 3, "ci_halves": null, "ci_metrics": null}, "compare": {"metrics": ["nll"], '
    '"baselines": ["uncalibrated"], "n_bootstrap": 20, "select_folds": 5, "select_exclude": '
    '["hist"]}, "plots": {"n_bins": 10, "style": "coursework"}}'
)


def test_known_spec_text():
    assert CalibrateSpec.from_config(SMALL).to_json() == SMALL_TEXT
    assert CalibrateSpec.from_dict(json.loads(SMALL_TEXT)) == CalibrateSpec.from_config(SMALL)


def test_workflow_helper_writes_the_builders_text():
    written = {}
    ns = {"config": SMALL, "spec_file": lambda name, text: written.setdefault(name, text)}
    exec(compile(HELPER.read_text(), str(HELPER), "exec"), ns)  # plain Python: functions only
    assert ns["calibrate_spec"]() == SMALL_TEXT
    assert written == {"calibrate": SMALL_TEXT}


@pytest.mark.parametrize("config", ["config.yaml", "config/coursework_logits.yaml"])
def test_real_configs_give_a_valid_spec_and_the_perf_script_uses_it(config):
    from snakemake.utils import validate

    cfg = yaml.safe_load((REPO / config).read_text())
    validate(cfg, str(SCHEMA))  # the schema's defaults, as the workflow sees the config
    built = CalibrateSpec.from_config(cfg)
    built.check()
    spec = built.to_dict()
    assert list(spec["calibrators"]) == list(cfg["calibrators"])
    load = importlib.util.spec_from_file_location(
        "bench_coursework_logits", REPO / "perf" / "bench_coursework_logits.py"
    )
    bench = importlib.util.module_from_spec(load)
    load.loader.exec_module(bench)
    assert bench.spec_of(bench.load_config(REPO / config)) == spec
