"""Verbs temperature-sweep and guo-kull-tables: one-line errors and no partial output."""

from __future__ import annotations

import numpy as np

from calbench.calibrators import get_calibrator, save_calibrator
from calbench.cli import main
from calbench.logits import save_logits
from calbench.split import save_split


def _files(tmp_path, n=60, k=3):
    rng = np.random.default_rng(0)
    y = rng.integers(0, k, size=n)
    z = (rng.normal(size=(n, k)) + 2 * np.eye(k)[y]).astype(np.float32)
    save_logits(tmp_path / "m.npz", z, y, order_hash="x", model="m", dataset="d")
    save_split(tmp_path / "split.npz", np.arange(0, n, 2), np.arange(1, n, 2))
    save_calibrator(get_calibrator("ts").fit(z[::2], y[::2]), tmp_path / "ts.json")
    return tmp_path / "m.npz", tmp_path / "split.npz"


def _sweep(tmp_path, *extra):
    logits, split = _files(tmp_path)
    out = tmp_path / "out"
    argv = [
        "temperature-sweep", "--logits", str(logits), "--split", str(split),
        "--out-grid", str(out / "g.png"), "--out-curve", str(out / "c.png"),
        "--out-csv", str(out / "s.csv"), *extra,
    ]  # fmt: skip
    return main(argv), out


def test_sweep_writes_all_three(tmp_path, capsys):
    rc, out = _sweep(tmp_path, "--calibrator", str(tmp_path / "ts.json"), "--curve", "0.5,2,4")
    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == ["c.png", "g.png", "s.csv"]
    rows = (out / "s.csv").read_text().splitlines()
    assert rows[0] == "model,kind,temperature,ece"
    assert sum(r.split(",")[1] == "curve" for r in rows[1:]) == 4
    assert "T=0.5" in capsys.readouterr().out


def test_sweep_bad_arguments_are_one_line_errors(tmp_path, capsys):
    for extra, msg in (
        (["--curve", "2,1,5"], "--curve needs 0 < START < STOP"),
        (["--curve", "abc"], "--curve takes START,STOP,NUM"),
        (["--temperatures", "0.5,x"], "--temperatures takes comma-separated numbers"),
        (["--temperatures", "0,1"], "temperatures must be finite numbers > 0"),
    ):
        rc, out = _sweep(tmp_path, *extra)
        err = capsys.readouterr().err.strip()
        assert rc == 2 and msg in err and "\n" not in err, err
        assert not out.exists()


def test_sweep_refuses_a_split_of_other_logits(tmp_path, capsys):
    logits, _ = _files(tmp_path)
    save_split(tmp_path / "other.npz", np.arange(0, 10), np.arange(10, 30))
    out = tmp_path / "out"
    rc = main([
        "temperature-sweep", "--logits", str(logits), "--split", str(tmp_path / "other.npz"),
        "--out-grid", str(out / "g.png"), "--out-curve", str(out / "c.png"),
        "--out-csv", str(out / "s.csv"),
    ])  # fmt: skip
    assert rc == 2 and "not a partition" in capsys.readouterr().err
    assert not out.exists()


def test_tables_bad_inputs_leave_nothing(tmp_path, capsys):
    metrics = tmp_path / "metrics.csv"
    metrics.write_text("dataset,model,method,half,metric,value,ci_low,ci_high\n")
    not_png = tmp_path / "sweep" / "m" / "reliability.png"
    not_png.parent.mkdir(parents=True)
    not_png.write_bytes(b"GIF89a")
    out = tmp_path / "out"
    base = [
        "guo-kull-tables", "--metrics", str(metrics),
        "--out-html", str(out / "a.html"), "--out-md", str(out / "a.md"),
        "--out-csv", str(out / "a.csv"), "--out-summary", str(out / "s.csv"),
    ]  # fmt: skip
    for extra, msg in (
        (["--spec", "{not json"], "--spec"),
        (["--spec", "{}", "--sweep-figures", str(not_png)], "is not a PNG file"),
        (["--spec", '{"sources": ["guo2017"]}'], "unknown sources"),
        (["--spec", "{}", "--summary-logits", str(metrics)], "needs summary_split"),
    ):
        assert main(base + extra) == 2
        err = capsys.readouterr().err.strip()
        assert msg in err and "\n" not in err, err
        assert not out.exists()
    assert main(base + ["--spec", "{}"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["a.csv", "a.html", "a.md", "s.csv"]
