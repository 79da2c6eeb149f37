"""``calbench import-logits`` on several models in one process (the workflow's import batches,
workflow/rules/logits.smk): each model's files are the bytes a call of its own writes, and an
error in one model names it in one line and leaves none of the batch's files."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

MODELS = ("m0", "m1", "m2")


def _main(argv):
    from calbench.cli import main

    return main([str(a) for a in argv])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Three small .npz predictions files with their own split, and a file that is not logits."""
    d = tmp_path_factory.mktemp("imports")
    rng = np.random.default_rng(3)
    y = np.arange(30) % 3
    for i, m in enumerate(MODELS):
        z = (rng.normal(size=(30, 3)) * (1.0 + i)).astype(np.float64)
        np.savez(d / f"{m}.npz", logits=z, labels=y, val_idx=np.arange(0, 30, 2),
                 test_idx=np.arange(1, 30, 2))  # fmt: skip
    (d / "bad.npz").write_bytes(b"not logits")
    return d


def _spec(data, m, split):
    logits = {"format": "npz", "file": f"{m}.npz", "local_path": str(data / f"{m}.npz")}
    return json.dumps({"dataset": "ds", "source": "logits", "logits": logits | split})


def _args(data, out, models, split=False):
    """The verb's arguments for ``models``: one value per model of each per-model option."""
    own = {"split": "file"} if split else {}
    argv = ["import-logits", "--spec", *[_spec(data, m, own) for m in models]]
    argv += ["--out", *[out / "logits" / f"{m}.npz" for m in models]]
    argv += ["--provenance", *[out / "logits" / f"{m}.source.json" for m in models]]
    if split:
        argv += ["--split-out", *[out / "split" / f"{m}.npz" for m in models]]
    return argv


def _digests(root):
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("split", [False, True], ids=["study-split", "own-split"])
def test_a_batch_writes_the_bytes_and_lines_of_one_call_per_model(data, tmp_path, capsys, split):
    models = list(MODELS)
    lines = []
    for m in models:
        assert _main(_args(data, tmp_path / "one", [m], split)) == 0
        lines.append(capsys.readouterr().out)
    assert _main(_args(data, tmp_path / "batch", models, split)) == 0
    batch_out = capsys.readouterr().out
    one, batch = _digests(tmp_path / "one"), _digests(tmp_path / "batch")
    assert len(one) == len(models) * (3 if split else 2)
    assert batch == one
    assert batch_out.replace("/batch/", "/one/") == "".join(lines)


def test_an_error_in_one_model_names_it_and_leaves_none_of_the_batch(data, tmp_path, capsys):
    out = tmp_path / "out"
    argv = _args(data, out, ["m0", "bad", "m1"])
    assert _main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "model bad (2 of 3" in err[0] and "bad.npz" in err[0], err
    assert "nothing of this batch was written" in err[0], err
    assert not [p for p in out.rglob("*") if p.is_file()]  # m0's finished files removed too


@pytest.mark.parametrize("flag, count", [("--out", 2), ("--provenance", 1), ("--split-out", 4)])
def test_lists_of_another_length_are_refused_in_one_line(data, tmp_path, capsys, flag, count):
    argv = _args(data, tmp_path / "out", list(MODELS), split=True)
    i = argv.index(flag)
    argv[i + 1 : i + 1 + len(MODELS)] = [tmp_path / "out" / f"x{j}.npz" for j in range(count)]
    assert _main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0] and f"{count} values for 3 --spec" in err[0], err
    assert not (tmp_path / "out").exists()


def test_file_names_one_model_s_copy_and_is_refused_with_several(data, tmp_path, capsys):
    argv = _args(data, tmp_path / "out", ["m0", "m1"]) + ["--file", data / "m0.npz"]
    assert _main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--file" in err[0] and "one --spec" in err[0], err
    assert not (tmp_path / "out").exists()


def test_an_output_that_cannot_be_written_leaves_none_of_the_model_s_files(data, tmp_path, capsys):
    """The split cannot be written (its folder is a file) after the logits were: the logits file
    is removed too, so no model is left half imported."""
    out = tmp_path / "out"
    (tmp_path / "blocked").write_text("a file, not a folder")
    argv = _args(data, out, ["m0"], split=True)
    argv[argv.index("--split-out") + 1] = tmp_path / "blocked" / "m0.npz"
    assert _main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "blocked" in err[0], err
    assert not [p for p in out.rglob("*") if p.is_file()]
