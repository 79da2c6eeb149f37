"""``evaluation.n_bootstrap: 0`` ("no intervals", config.yaml) through the whole report: the
calibrate step, aggregate and render-report on its results, at the smallest scale."""

from __future__ import annotations

import json
import re

import numpy as np

from calbench.functional import softmax
from calbench.split import save_split, study_split

N, K = 200, 3
SPEC = {
    "calibrators": {
        "uncalibrated": {"method": "uncalibrated", "params": {}, "display": "Uncalibrated"},
        "ts": {"method": "ts", "params": {}, "display": "TS"},
    },
    "evaluation": {
        "metrics": ["accuracy", "ece", "ece_ub", "nll"],
        "halves": ["test", "val"],
        "n_bootstrap": 0,
        "level": 0.95,
        "seed": 0,
        "ci_halves": ["test"],
        "ci_metrics": ["accuracy", "ece_ub", "nll"],
    },
    "compare": {
        "metrics": ["ece_ub", "nll"],
        "baselines": ["uncalibrated"],
        "n_bootstrap": 20,
        "select_folds": 2,
        "select_exclude": [],
    },
    "plots": {"n_bins": 10, "style": "guo"},
}


def _main(argv):
    from calbench.cli import main

    return main([str(a) for a in argv])


def test_report_without_intervals(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    rng = np.random.default_rng(2)
    z = (rng.normal(size=(N, K)) * 4.0).astype(np.float32)
    y = np.array([rng.choice(K, p=row) for row in softmax(z / 3.0)], dtype=np.int64)
    logits, split = tmp_path / "m.npz", tmp_path / "split.npz"
    np.savez(logits, logits=z, labels=y, order_hash="h", model="m", dataset="ds")
    save_split(split, *study_split(N))
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    r = tmp_path / "results"
    argv = ["calibrate", "--logits", logits, "--split", split, "--spec", f"@{spec}"]
    argv += ["--calibrators-dir", r / "cal", "--metrics-dir", r / "met", "--plots-dir", r / "plot"]
    argv += ["--compare", r / "compare.csv", "--robustness", r / "robustness.csv"]
    assert _main(argv) == 0
    study = {
        "title": "T",
        "protocol": {"n_bins": 15, "plot_bins": 10, "n_bootstrap": 0, "level": 0.95},
        "datasets": {"ds": {"display": "DS"}},
        "models": {"m": {"dataset": "ds", "display": {"name": "M"}}},
        "calibrators": {
            k: {"display": v["display"], "method": v["method"]}
            for k, v in SPEC["calibrators"].items()
        },
        "table_metrics": ["accuracy", "ece_ub", "nll"],
        "losses_metrics": ["ece"],
    }
    metrics = [r / "met" / f"{k}.csv" for k in SPEC["calibrators"]]
    agg, cmp = tmp_path / "agg.csv", tmp_path / "cmp.csv"
    argv = ["aggregate", "--metrics", *metrics, "--compare", r / "compare.csv"]
    argv += ["--spec", json.dumps(study), "--out-csv", agg, "--out-compare", cmp]
    assert _main([*argv, "--tables-dir", tmp_path / "tables"]) == 0
    out = tmp_path / "report.html"
    argv = ["render-report", "--metrics", agg, "--compare", cmp]
    argv += [
        "--spec",
        json.dumps(study),
        "--config",
        json.dumps({"evaluation": SPEC["evaluation"]}),
    ]
    argv += ["--grids", r / "plot" / "grid.png", "--logits", logits, "--splits", split]
    argv += ["--robustness", r / "robustness.csv", "--out", out]
    assert _main(argv) == 0
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", out.read_text()))
    # the report says so, in its protocol and where the robustness section would give them
    assert "No intervals. This study draws no bootstrap resamples" in text
    assert "Probability of ranking first: not estimated" in text
    assert "What the intervals mean" not in text
