"""Names inside files and what an input path is (issue 33, groups 9, 10 and 13): names a logits
file records are plain strings, never arrays, bytes, control characters or spreadsheet formulas;
display names that would give two identical rows are refused; another model's logits copied
over a file are refused where first read, naming the file; a device or a FIFO is "not a regular
file"; a calibrator JSON value out of range for its dtype is one line."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from calbench.calibrators.storage import sealed_text
from calbench.split import save_split, study_split

N, K = 60, 3


def _run(capsys, *argv):
    from calbench.cli import main

    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


def _one_line(rc, err, *needles):
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def _logits(path, **names):
    rng = np.random.default_rng(0)
    fields = {"order_hash": "h", "model": path.stem, "dataset": "ds", **names}
    np.savez(path, logits=rng.normal(size=(N, K)).astype(np.float32),
             labels=rng.integers(0, K, N), **fields)  # fmt: skip


@pytest.fixture
def d(tmp_path):
    _logits(tmp_path / "m.npz")
    save_split(tmp_path / "split.npz", *study_split(N))
    return tmp_path


def _fit(capsys, d, logits, out=None):
    out = out or d / "out" / "ts.json"
    return _run(capsys, "fit-calibrator", "--logits", logits, "--split", d / "split.npz",
                "--method", "ts", "--out", out)  # fmt: skip


# --- group 10: names inside a logits file --------------------------------------------------------
@pytest.mark.parametrize(
    "names, needle",
    [
        ({"model": np.array(["a", "b"])}, "model is an array of shape (2,), not a string"),
        ({"model": np.bytes_(b"m")}, "model is a |S1 value, not a string"),
        ({"model": np.int64(3)}, "model is a int64 value, not a string"),
        ({"dataset": "ds\nevil,row"}, "holds the control character '\\n'"),
        ({"model": "m\u202egnp.exe"}, "holds the control character '\\u202e'"),
        ({"model": '=HYPERLINK("http://x","y")'}, "starts with '=', which a spreadsheet"),
        ({"model": "+1+1"}, "starts with '+'"),
        ({"model": "-2+3"}, "starts with '-'"),
        ({"model": "@SUM(A1)"}, "starts with '@'"),
        ({"order_hash": ""}, "order_hash is empty"),
        ({"model": " m"}, "starts or ends with a space"),
    ],
)
def test_a_name_in_a_logits_file_that_is_not_plain_text_is_one_line(capsys, d, names, needle):
    _logits(d / "bad.npz", **names)
    rc, err = _fit(capsys, d, d / "bad.npz")
    _one_line(rc, err, "logits file", needle)
    assert not (d / "out").exists()


def test_names_given_on_the_command_line_are_plain_text_too(capsys, d):
    assert _fit(capsys, d, d / "m.npz")[0] == 0
    with pytest.raises(SystemExit):
        _run(capsys, "evaluate", "--logits", d / "m.npz", "--split", d / "split.npz",
             "--calibrator", d / "out" / "ts.json", "--model", "=cmd|' /C calc'!A0",
             "--out", d / "x.csv")  # fmt: skip
    assert "starts with '='" in capsys.readouterr().err
    assert not (d / "x.csv").exists()


def _calibrate_spec(displays):
    return {
        "calibrators": {k: {"method": k, "params": {}, "display": v} for k, v in displays.items()},
        "evaluation": {"metrics": ["ece"], "halves": ["test"], "n_bootstrap": 0, "level": 0.9,
                       "seed": 0, "ci_halves": None, "ci_metrics": None},
        "compare": {"metrics": ["ece_ub"], "baselines": [], "n_bootstrap": 10, "select_folds": 3,
                    "select_exclude": []},
        "plots": {"n_bins": 5, "style": "guo"},
    }  # fmt: skip


@pytest.mark.parametrize(
    "displays, needle",
    [
        ({"ts": "Scaling", "vs": "Scaling"}, "calibrators.ts and calibrators.vs are both displayed as 'Scaling'"),
        ({"ts": "ts", "vs": "ts"}, "both displayed as 'ts'"),
        ({"ts": "T\nS"}, "holds the control character"),
        ({"ts": "=1+1"}, "starts with '='"),
    ],
)
def test_calibrate_refuses_display_names_that_clash_or_are_not_text(capsys, d, displays, needle):
    (d / "spec.json").write_text(json.dumps(_calibrate_spec(displays)))
    out = d / "out"
    rc, err = _run(capsys, "calibrate", "--logits", d / "m.npz", "--split", d / "split.npz",
                   "--spec", f"@{d / 'spec.json'}", "--calibrators-dir", out, "--metrics-dir", out,
                   "--plots-dir", out, "--compare", out / "c.csv")  # fmt: skip
    _one_line(rc, err, needle)
    assert not out.exists()


def test_display_names_of_a_study_spec():
    from calbench.cli._args import check_display_names

    models = {
        "a": {"dataset": "c10", "display": {"name": "ResNet", "loss": "CE"}},
        "b": {"dataset": "c10", "display": {"name": "ResNet", "loss": "Focal"}},  # other loss
        "c": {"dataset": "c100", "display": {"name": "ResNet", "loss": "CE"}},  # other dataset
    }
    check_display_names({"models": models})
    models["d"] = {"dataset": "c10", "display": {"name": "ResNet", "loss": "CE"}}
    with pytest.raises(ValueError, match="models.a and models.d are both displayed as 'ResNet \\(CE\\)'"):
        check_display_names({"models": models})
    with pytest.raises(ValueError, match="datasets.x and datasets.y are both displayed as 'X'"):
        check_display_names({"datasets": {"x": {"display": "X"}, "y": {"display": "X"}}})
    with pytest.raises(ValueError, match="display loss .* starts with '@'"):
        check_display_names({"models": {"a": {"dataset": "c", "display": {"name": "A", "loss": "@x"}}}})


# --- group 13: copied logits, devices and FIFOs ---------------------------------------------------
def test_another_models_logits_copied_over_are_refused_where_first_read(capsys, tmp_path):
    folder = tmp_path / "results" / "logits" / "ds"
    folder.mkdir(parents=True)
    _logits(folder / "a.npz")
    _logits(folder / "b.npz")
    save_split(tmp_path / "split.npz", *study_split(N))
    d = {"split": tmp_path / "split.npz"}
    assert _run(capsys, "fit-calibrator", "--logits", folder / "b.npz", "--split", d["split"],
                "--method", "ts", "--out", tmp_path / "ok.json")[0] == 0  # fmt: skip
    shutil.copyfile(folder / "a.npz", folder / "b.npz")  # same shape, labels, order: other model
    rc, err = _run(capsys, "fit-calibrator", "--logits", folder / "b.npz", "--split", d["split"],
                   "--method", "ts", "--out", tmp_path / "b.json")  # fmt: skip
    _one_line(rc, err, f"logits file {folder / 'b.npz'} records model 'a', not 'b'",
              "cache b's logits again")  # fmt: skip
    assert not (tmp_path / "b.json").exists()


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
@pytest.mark.parametrize("option", ["--logits", "--split", "--calibrator", "--spec"])
def test_a_device_or_fifo_is_not_a_regular_file(capsys, d, kind, option):
    if kind == "fifo":
        path = d / "pipe"
        os.mkfifo(path)  # reading it would block forever
    else:
        path = kind
    assert _fit(capsys, d, d / "m.npz", d / "ts.json")[0] == 0
    (d / "spec.json").write_text(json.dumps(_calibrate_spec({"ts": "TS"})))
    args = {"--logits": d / "m.npz", "--split": d / "split.npz", "--calibrator": d / "ts.json"}
    args[option if option != "--spec" else "--calibrator"] = path if option != "--spec" else d / "ts.json"
    if option == "--spec":
        rc, err = _run(capsys, "calibrate", "--logits", d / "m.npz", "--split", d / "split.npz",
                       "--spec", f"@{path}", "--calibrators-dir", d / "o", "--metrics-dir", d / "o",
                       "--plots-dir", d / "o", "--compare", d / "o" / "c.csv")  # fmt: skip
    else:
        rc, err = _run(capsys, "evaluate", *[x for kv in args.items() for x in kv],
                       "--out", d / "o" / "m.csv")  # fmt: skip
    line = _one_line(rc, err, f"{path} is not a regular file (a device, FIFO or socket)")
    assert "does not exist" not in line
    assert not (d / "o").exists()


# --- group 9: a JSON value out of range for its dtype ---------------------------------------------
@pytest.mark.parametrize("value, needle", [([300], "value 300 is out of range for dtype int8"), ([1e400], "value inf is out of range")])
def test_a_calibrator_value_out_of_range_for_its_dtype_is_one_line(capsys, d, value, needle):
    assert _fit(capsys, d, d / "m.npz", d / "ts.json")[0] == 0
    doc = json.loads((d / "ts.json").read_text())
    doc["state"]["a"] = {"__ndarray__": value, "dtype": "int8", "shape": [1]}
    # sealed again (calibrators.storage): the value, not the digest, must be what is refused
    (d / "ts.json").write_text(sealed_text(doc, allow_nan=True).replace("Infinity", "1e400"))
    rc, err = _run(capsys, "evaluate", "--logits", d / "m.npz", "--split", d / "split.npz",
                   "--calibrator", d / "ts.json", "--out", d / "m.csv")  # fmt: skip
    _one_line(rc, err, "state.a is not a stored array", needle, "refit")
    assert not (d / "m.csv").exists()


def test_an_npz_claiming_a_huge_shape_is_one_line_at_the_cli(capsys, d):
    import io
    import zipfile

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (10**10, 10)})
    with zipfile.ZipFile(d / "huge.npz", "w") as zf:
        zf.writestr("logits.npy", buf.getvalue() + b"\0" * 24_000)
    rc, err = _fit(capsys, d, d / "huge.npz")
    _one_line(rc, err, "claims shape (10000000000, 10)", "cache the logits again")
