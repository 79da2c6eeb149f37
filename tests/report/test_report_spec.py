"""The reporting steps' config slices (calbench.report.spec), built from config/test.yaml."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from calbench.metrics import ECE_BINS
from calbench.report import spec as SP

CONFIG = yaml.safe_load((Path(__file__).resolve().parents[2] / "config" / "test.yaml").read_text())


def test_study_spec_keeps_config_order_and_drops_the_reference_path():
    config = {
        **CONFIG,
        "report": {**CONFIG["report"], "reference": {"csv": "x.csv", "units": "display"}},
    }
    spec = SP.study_spec(config)
    assert spec["protocol"]["n_bins"] == ECE_BINS
    assert spec["protocol"]["plot_bins"] == CONFIG["plots"]["n_bins"]
    assert list(spec["models"]) == list(CONFIG["models"])
    assert list(spec["calibrators"]) == list(CONFIG["calibrators"])
    assert spec["reference"] == {"units": "display"}
    json.dumps(spec)  # plain data


def test_report_shift_replication_and_guo_kull_specs_extend_the_study_spec():
    files = {"ts_files": {"tiny_mlp": "a.json"}, "histories": {}, "reliability": {}}
    report = SP.report_spec(CONFIG, files)
    assert report == {**SP.study_spec(CONFIG), "studies": [], **files}
    assert SP.shift_report_spec(CONFIG)["level"] == CONFIG["evaluation"]["level"]
    rep = SP.replication_spec(CONFIG)
    assert rep["reference"] == {} and rep["models"]["tiny_mlp"]["group"] == 1
    gk = SP.guo_kull_spec(CONFIG)
    assert gk["metric_map"] == {} and gk["expected_to_differ"] == []
