"""``calbench calibrate --time-limit`` (rule calibrate passes its runtime resource): a job that
runs past it stops with one line and leaves nothing; code that swallows the stop is ended by
the watchdog (calbench._deadline), also with one line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from calbench.split import save_split, study_split


def _main(argv):
    from calbench.cli import main

    return main([str(a) for a in argv])


def _args(tmp_path, *extra):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 60)
    np.savez(tmp_path / "l.npz", logits=rng.normal(size=(60, 3)).astype(np.float32), labels=y,
             order_hash="h", model="m", dataset="d")  # fmt: skip
    save_split(tmp_path / "s.npz", *study_split(60))
    spec = json.dumps({
        "calibrators": {c: {"method": c, "params": {}, "display": c} for c in ("uncalibrated", "ts")},
        "evaluation": {"metrics": ["accuracy", "nll"], "halves": ["test"], "n_bootstrap": 0,
                       "level": 0.95, "seed": 0, "ci_halves": None, "ci_metrics": None},
        "compare": {"metrics": ["nll"], "baselines": ["uncalibrated"], "n_bootstrap": 10,
                    "select_folds": 2, "select_exclude": []},
        "plots": {"n_bins": 10, "style": "guo"},
    })  # fmt: skip
    return ["calibrate", "--logits", tmp_path / "l.npz", "--split", tmp_path / "s.npz",
            "--spec", spec, "--calibrators-dir", tmp_path / "c", "--metrics-dir", tmp_path / "m",
            "--plots-dir", tmp_path / "p", "--compare", tmp_path / "cmp.csv", *extra]  # fmt: skip


def test_a_job_past_its_limit_stops_with_one_line(tmp_path, capsys, monkeypatch):
    from calbench.protocol import CalibrateSpec

    def hangs(*args, calibrators_dir, **kwargs):  # writes a file, then never returns
        (tmp_path / "c").mkdir()
        try:
            (tmp_path / "c" / "ts.json").write_text("{}")
            while True:
                try:
                    time.sleep(0.05)
                except Exception:  # careless code: swallows what it can
                    pass
        except BaseException:
            (tmp_path / "c" / "ts.json").unlink()  # the step's own clean-up
            raise

    monkeypatch.setattr(CalibrateSpec, "run", hangs)  # the step the verb runs
    t0 = time.monotonic()
    assert _main(_args(tmp_path, "--time-limit", "0.01")) == 2  # 0.6 s
    assert time.monotonic() - t0 < 20
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "ran past its time limit of 0.01 min" in err and "runtime" in err
    assert not (tmp_path / "c" / "ts.json").exists()


def test_a_batch_past_its_limit_names_the_batch_rule_to_give_more_time(
    tmp_path, capsys, monkeypatch
):
    """A batch of small models runs as rule calibrate_batch_<batch>: raising calibrate's runtime
    would not help it, so the message names the batch rule."""
    from calbench.protocol import CalibrateSpec

    def hangs(*args, **kwargs):
        while True:
            time.sleep(0.05)

    monkeypatch.setattr(CalibrateSpec, "run", hangs)
    args = _args(tmp_path, "--time-limit", "0.01")
    for flag in ("--logits", "--split", "--calibrators-dir", "--metrics-dir", "--plots-dir",
                 "--compare"):  # fmt: skip
        i = args.index(flag)
        args.insert(i + 2, args[i + 1] if flag in ("--logits", "--split") else
                    Path(str(args[i + 1]) + "2"))  # fmt: skip
    assert _main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--set-resources calibrate_batch_" in err


def test_a_job_within_its_limit_runs_as_without(tmp_path, capsys, monkeypatch):
    import signal

    from calbench.protocol import CalibrateSpec

    seen = []
    monkeypatch.setattr(CalibrateSpec, "run", lambda *a, **k: seen.append(a))
    assert _main(_args(tmp_path, "--time-limit", "60")) == 0
    assert len(seen) == 1 and capsys.readouterr().err == ""
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # the alarm is disarmed
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf", "soon"])
def test_a_bad_limit_is_refused(tmp_path, capsys, bad):
    with pytest.raises(SystemExit):
        _main(_args(tmp_path, "--time-limit", bad))
    assert "not a positive number of minutes" in capsys.readouterr().err


def test_code_that_swallows_the_stop_is_ended_by_the_watchdog():
    code = (
        "import time\n"
        "from calbench._deadline import time_limit\n"
        "with time_limit(0.005, 'calbench calibrate: error: ran past its time limit', grace=0.5):\n"
        "    while True:\n"
        "        try:\n"
        "            time.sleep(0.05)\n"
        "        except BaseException:\n"
        "            pass\n"
    )
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 124 and time.monotonic() - t0 < 30
    assert res.stderr.count("\n") == 1 and "ran past its time limit" in res.stderr
