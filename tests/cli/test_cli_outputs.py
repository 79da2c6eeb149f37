"""No output replaces an input (issue 33, group 4): every verb's output options are checked
against its inputs, through symbolic and hard links too, and against each other, before anything
is written (calbench.cli._args.check_outputs)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from calbench.split import save_split, study_split

N, K = 60, 3


def _run(capsys, *argv):
    from calbench.cli import main

    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


@pytest.fixture
def d(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "m.npz", logits=rng.normal(size=(N, K)).astype(np.float32),
             labels=rng.integers(0, K, N), order_hash="h", model="m", dataset="ds")  # fmt: skip
    save_split(tmp_path / "split.npz", *study_split(N))
    (tmp_path / "spec.json").write_text("{}")
    (tmp_path / "metrics.csv").write_text("dataset,model\n")
    from calbench.cli import main

    assert main(["fit-calibrator", "--logits", str(tmp_path / "m.npz"), "--split",
                 str(tmp_path / "split.npz"), "--method", "ts", "--out", str(tmp_path / "ts.json")]) == 0  # fmt: skip
    return tmp_path


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _cases(d):
    L, S = ["--logits", d / "m.npz"], ["--split", d / "split.npz"]
    return {
        "split": ["split", *L, "--out", d / "m.npz"],
        "fit-calibrator": ["fit-calibrator", *L, *S, "--method", "ts", "--out", d / "split.npz"],
        "evaluate": ["evaluate", *L, *S, "--calibrator", d / "ts.json", "--out", d / "ts.json"],
        "evaluate --plot X --out X": ["evaluate", *L, *S, "--calibrator", d / "ts.json",
                                      "--plot", d / "x.png", "--out", d / "x.png"],
        "compare": ["compare", *L, *S, "--calibrators", d / "ts.json", "--baselines", "ts",
                    "--out", d / "ts.json"],
        "plot-reliability": ["plot-reliability", *L, *S, "--calibrator", d / "ts.json",
                             "--out", d / "m.npz"],
        "aggregate": ["aggregate", "--metrics", d / "metrics.csv", "--spec", f"@{d / 'spec.json'}",
                      "--out-csv", d / "metrics.csv", "--tables-dir", d / "tables"],
        "aggregate tables-dir": ["aggregate", "--metrics", d / "metrics.csv", "--spec",
                                 f"@{d / 'spec.json'}", "--out-csv", d / "all.csv", "--tables-dir", d],
        "render-report": ["render-report", "--metrics", d / "metrics.csv", "--spec",
                          f"@{d / 'spec.json'}", "--out", d / "metrics.csv"],
        "calibrate": ["calibrate", *L, *S, "--spec", f"@{d / 'spec.json'}", "--calibrators-dir",
                      d / "c", "--metrics-dir", d / "c", "--plots-dir", d / "c", "--compare",
                      d / "spec.json"],
    }  # fmt: skip


@pytest.mark.parametrize("case", ["split", "fit-calibrator", "evaluate", "evaluate --plot X --out X",
                                  "compare", "plot-reliability", "aggregate", "aggregate tables-dir",
                                  "render-report", "calibrate"])  # fmt: skip
def test_an_output_that_is_an_input_is_refused_before_anything_is_written(capsys, d, case):
    before = _snapshot(d)
    rc, err = _run(capsys, *_cases(d)[case])
    assert rc == 2, err
    line = err.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "would replace" in line, line
    assert _snapshot(d) == before  # nothing replaced, nothing added
    assert not (d / "tables").exists() and not (d / "c").exists()


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_an_output_linked_to_an_input_is_refused(capsys, d, link):
    alias = d / "alias.npz"
    (os.symlink if link == "symlink" else os.link)(d / "m.npz", alias)
    before = (d / "m.npz").read_bytes()
    rc, err = _run(capsys, "split", "--logits", d / "m.npz", "--out", alias)
    assert rc == 2 and "is the input --logits" in err, err
    assert (d / "m.npz").read_bytes() == before


def test_an_output_through_a_linked_folder_is_refused(capsys, d):
    os.symlink(d, d / "same")
    rc, err = _run(capsys, "fit-calibrator", "--logits", d / "m.npz", "--split", d / "split.npz",
                   "--method", "ts", "--out", d / "same" / "split.npz")  # fmt: skip
    assert rc == 2 and "is the input --split" in err, err


def test_the_calibrate_step_refuses_a_key_whose_file_is_an_input(capsys, d):
    """Calibrator key ``spec`` writes ``<calibrators-dir>/spec.json``: here the spec itself."""
    (d / "spec.json").write_text(json.dumps({"calibrators": {"spec": {"method": "ts"}}}))
    before = _snapshot(d)
    rc, err = _run(capsys, "calibrate", "--logits", d / "m.npz", "--split", d / "split.npz",
                   "--spec", f"@{d / 'spec.json'}", "--calibrators-dir", d, "--metrics-dir", d,
                   "--plots-dir", d / "p", "--compare", d / "c.csv")  # fmt: skip
    assert rc == 2 and f"--calibrators-dir {d / 'spec.json'} is the input --spec" in err, err
    assert _snapshot(d) == before
