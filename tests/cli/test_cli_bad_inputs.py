"""Bad inputs end in one line on stderr (exit 2), never a traceback, and leave no output behind:
damaged .npz files, unwritable outputs, refused checkpoints, misspelt calibrator options,
probabilities given as logits and calibrators fitted on other logits."""

from __future__ import annotations

import errno
import json

import numpy as np
import pytest

from calbench.calibrators.storage import sealed_text
from calbench.functional import softmax
from calbench.split import save_split, study_split

N, K = 200, 4


def _run(capsys, *argv):
    from calbench.cli import main

    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    return rc, err


def _one_line(rc, err, *needles):
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def _logits_file(path, seed, model="mod"):
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(N, K)) * 4.0).astype(np.float32)
    y = rng.integers(0, K, size=N)
    np.savez(path, logits=z, labels=y, order_hash="abc", model=model, dataset="ds")
    return z, y


@pytest.fixture
def data(tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    _logits_file(a, 0, "a")
    _logits_file(b, 1, "b")  # another model, same K and samples
    split = tmp_path / "split.npz"
    save_split(split, *study_split(N))
    return {"a": a, "b": b, "split": split, "dir": tmp_path}


def _fit(capsys, data, out, *extra, logits=None):
    return _run(
        capsys,
        "fit-calibrator",
        "--logits",
        logits or data["a"],
        "--split",
        data["split"],
        "--method",
        "ts",
        "--out",
        out,
        *extra,
    )


# --- damaged files ------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["logits", "split"])
@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_damaged_npz_is_one_line_error(capsys, data, which, damage):
    target = data["a"] if which == "logits" else data["split"]
    raw = target.read_bytes()
    if damage == "truncated":
        target.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        target.write_bytes(b"this is not an archive at all\n" * 20)
    else:
        target.write_bytes(b"")
    out = data["dir"] / "out" / "ts.json"
    rc, err = _fit(capsys, data, out)
    line = _one_line(rc, err, str(target))
    if damage == "truncated":
        assert "damaged or truncated" in line
    else:
        assert "not an .npz (zip) archive" in line and "pickle" not in line
    assert (
        not out.exists()
        and not (data["dir"] / "out").exists()
        or not any((data["dir"] / "out").iterdir())
    )


# --- unwritable outputs -------------------------------------------------------------------------
def test_out_whose_parent_is_a_file(capsys, data):
    blocker = data["dir"] / "blocker"
    blocker.write_text("a file, not a folder")
    rc, err = _fit(capsys, data, blocker / "ts.json")
    _one_line(rc, err, "blocker", "a parent of the output path is a file")
    assert blocker.read_text() == "a file, not a folder"


@pytest.mark.parametrize(
    "code, fix",
    [
        (errno.EACCES, "make the folder writable"),
        (errno.ENOSPC, "the disk is full"),
        (errno.EROFS, "read-only"),
    ],
)
def test_unwritable_output_folder(capsys, data, monkeypatch, code, fix):
    import tempfile

    def refuse(*args, dir=None, **kwargs):
        raise OSError(code, "refused", str(dir))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    out = data["dir"] / "out" / "ts.json"
    rc, err = _fit(capsys, data, out)
    _one_line(rc, err, fix)
    assert not out.exists()


# --- refused checkpoints: the reason is kept whole -------------------------------------------
class _Evil:
    def __reduce__(self):
        import os

        return (os.getcwd, ())


def test_unsafe_checkpoint_message_keeps_the_reason(tmp_path):
    import torch

    from calbench.models.pretrained import read_state_dict
    from calbench.models.trained import read_checkpoint

    path = tmp_path / "evil.pt"
    torch.save({"w": _Evil()}, path)
    for reader in (read_state_dict, read_checkpoint):
        with pytest.raises(ValueError) as exc:
            reader(path)
        msg = str(exc.value)
        assert "\n" not in msg
        assert "unsupported GLOBAL posix.getcwd" in msg and "weights_only=True" in msg
        assert "set to `False`" not in msg  # torch's advice to disable the check is not repeated


# --- calibrator options, probabilities, fitted-on identity -------------------------------------
def test_misspelt_param_fails_before_reading_and_writes_nothing(capsys, data):
    out = data["dir"] / "ts.json"
    rc, err = _fit(capsys, data, out, "--params", '{"max_iters": 5}')
    _one_line(rc, err, "max_iters", "accepted:", "max_iter")
    assert not out.exists()


def test_probabilities_are_refused_unless_allowed(capsys, data):
    z, y = _logits_file(data["a"], 0, "a")
    np.savez(
        data["a"],
        logits=softmax(z).astype(np.float32),
        labels=y,
        order_hash="abc",
        model="a",
        dataset="ds",
    )
    out = data["dir"] / "ts.json"
    rc, err = _fit(capsys, data, out)
    _one_line(rc, err, "fit got probabilities", "--allow-probabilities")
    assert not out.exists()
    rc, err = _fit(capsys, data, out, "--allow-probabilities")
    assert rc == 0 and out.exists(), err


def test_calibrator_fitted_on_other_logits_is_refused(capsys, data, tmp_path):
    from calbench.io import file_digest

    cal = tmp_path / "cal" / "ts.json"
    assert _fit(capsys, data, cal)[0] == 0
    rec = json.loads(cal.read_text())["fitted_on"]
    assert rec == {"order_hash": "abc", "logits_sha256": file_digest(data["a"])}
    common = ["--split", data["split"], "--n-bootstrap", "0"]
    out = tmp_path / "m.csv"
    rc, err = _run(
        capsys, "evaluate", "--logits", data["b"], *common, "--calibrator", cal, "--out", out
    )
    _one_line(rc, err, str(cal), "fitted on another logits file", "--allow-other-logits")
    assert not out.exists()
    rc, err = _run(
        capsys,
        "evaluate",
        "--logits",
        data["b"],
        *common,
        "--calibrator",
        cal,
        "--allow-other-logits",
        "--out",
        out,
    )
    assert rc == 0 and out.exists(), err
    rc, err = _run(
        capsys, "evaluate", "--logits", data["a"], *common, "--calibrator", cal, "--out", out
    )
    assert rc == 0, err
    out = tmp_path / "c.csv"
    rc, err = _run(
        capsys,
        "compare",
        "--logits",
        data["b"],
        "--split",
        data["split"],
        "--calibrators",
        cal,
        "--baselines",
        "ts",
        "--n-bootstrap",
        "5",
        "--out",
        out,
    )
    _one_line(rc, err, "fitted on another logits file")
    assert not out.exists()
    png = tmp_path / "p.png"
    rc, err = _run(
        capsys,
        "plot-reliability",
        "--logits",
        data["b"],
        "--split",
        data["split"],
        "--calibrator",
        cal,
        "--out",
        png,
    )
    _one_line(rc, err, "fitted on another logits file")
    assert not png.exists()


def test_negative_temperature_json_is_refused_by_evaluate(capsys, data, tmp_path):
    cal = tmp_path / "ts.json"
    assert _fit(capsys, data, cal)[0] == 0
    doc = json.loads(cal.read_text())
    doc["state"]["a"]["__ndarray__"] = [-1.0]
    del doc["sha256"]  # resealed: the state check behind the digest is under test
    cal.write_text(sealed_text(doc))
    out = tmp_path / "m.csv"
    rc, err = _run(
        capsys,
        "evaluate",
        "--logits",
        data["a"],
        "--split",
        data["split"],
        "--calibrator",
        cal,
        "--n-bootstrap",
        "0",
        "--out",
        out,
    )
    _one_line(rc, err, str(cal), "state.a = -1 must be > 0")
    assert not out.exists()
