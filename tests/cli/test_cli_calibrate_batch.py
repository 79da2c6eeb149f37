"""``calbench calibrate`` on several models in one process (the workflow's batches of small
models): each model's files are the bytes a job of its own writes, and an error in one model
names it and leaves none of the batch's files."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from calbench.functional import softmax
from calbench.split import save_split, study_split

N, K = 200, 3
SPEC = {
    "calibrators": {
        "uncalibrated": {"method": "uncalibrated", "params": {}, "display": "Uncalibrated"},
        "ts": {"method": "ts", "params": {}, "display": "T-scaling"},
        "hist": {"method": "hist", "params": {"n_bins": 5}, "display": "Hist {5}"},
    },
    "evaluation": {
        "metrics": ["accuracy", "ece", "nll"],
        "halves": ["test", "val"],
        "n_bootstrap": 10,
        "level": 0.9,
        "seed": 3,
        "ci_halves": ["test"],
        "ci_metrics": ["ece"],
    },
    "compare": {
        "metrics": ["ece_ub"],
        "baselines": ["uncalibrated"],
        "n_bootstrap": 10,
        "select_folds": 3,
        "select_exclude": [],
    },
    "plots": {"n_bins": 10, "style": "guo"},
}
MODELS = ("m0", "m1", "m2")


def _main(argv):
    from calbench.cli import main

    return main([str(a) for a in argv])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("batch")
    rng = np.random.default_rng(5)
    for i, m in enumerate(MODELS):
        z = (rng.normal(size=(N, K)) * (2.0 + i)).astype(np.float32)
        y = np.array([rng.choice(K, p=row) for row in softmax(z / 2.0)], dtype=np.int64)
        np.savez(d / f"{m}.npz", logits=z, labels=y, order_hash="abc", model=m, dataset="ds")
    # a model whose logits do not match the split (another N): its job fails
    np.savez(d / "bad.npz", logits=np.zeros((N + 1, K), np.float32),
             labels=np.zeros(N + 1, np.int64), order_hash="x", model="bad", dataset="ds")  # fmt: skip
    save_split(d / "split.npz", *study_split(N))
    (d / "spec.json").write_text(json.dumps(SPEC))
    return d


def _args(data, out, models):
    """The calibrate verb's arguments for ``models`` (one list entry per model)."""
    per = {
        "--logits": [data / f"{m}.npz" for m in models],
        "--split": [data / "split.npz"],
        "--calibrators-dir": [out / "cal" / m for m in models],
        "--metrics-dir": [out / "met" / m for m in models],
        "--plots-dir": [out / "plot" / m for m in models],
        "--compare": [out / "compare" / f"{m}.csv" for m in models],
        "--robustness": [out / "robustness" / f"{m}.csv" for m in models],
    }
    argv = ["calibrate", "--spec", f"@{data / 'spec.json'}"]
    for flag, values in per.items():
        argv += [flag, *values]
    return argv


def _digests(root):
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_batch_writes_the_bytes_of_one_job_per_model(data, tmp_path):
    models = list(MODELS[:2])
    for m in models:
        assert _main(_args(data, tmp_path / "one", [m])) == 0
    assert _main(_args(data, tmp_path / "batch", models)) == 0
    one, batch = _digests(tmp_path / "one"), _digests(tmp_path / "batch")
    assert len(one) == len(models) * (3 * 3 + 3) and any(p.endswith(".png") for p in one)
    assert batch == one


def test_an_error_in_one_model_names_it_and_leaves_none_of_the_batch(data, tmp_path, capsys):
    out = tmp_path / "out"
    assert _main(_args(data, out, ["m0", "bad", "m1"])) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.npz" in err[0] and "model 2 of 3" in err[0], err
    assert not [p for p in out.rglob("*") if p.is_file()]


@pytest.mark.parametrize(
    "flag, count", [("--calibrators-dir", 2), ("--split", 2), ("--compare", 1)]
)
def test_lists_of_another_length_are_refused_in_one_line(data, tmp_path, capsys, flag, count):
    argv = _args(data, tmp_path / "out", list(MODELS))
    i = argv.index(flag)
    end = i + 2 if flag == "--split" else i + 1 + len(MODELS)
    argv[i + 1 : end] = [f"{argv[i + 1]}{'' if flag == '--split' else j}" for j in range(count)]
    assert _main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0] and f"{count} values for 3" in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_cross_fitted_batch_writes_each_models_partitions_file_as_its_own_job(data, tmp_path):
    """``evaluation.scheme: crossfit``: ``--partitions`` takes one file per ``--logits``, and a
    batch's files (partitions included) are the bytes of one job per model."""
    spec = json.loads(json.dumps(SPEC))
    spec["evaluation"].update(scheme="crossfit", folds=3, repeats=2)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    models = list(MODELS[:2])

    def argv(out, ms):
        a = _args(data, out, ms)
        a[a.index("--spec") + 1] = f"@{tmp_path / 'spec.json'}"
        return a + ["--partitions", *[out / "partitions" / f"{m}.csv" for m in ms]]

    for m in models:
        assert _main(argv(tmp_path / "one", [m])) == 0
    assert _main(argv(tmp_path / "batch", models)) == 0
    one, batch = _digests(tmp_path / "one"), _digests(tmp_path / "batch")
    assert {f"partitions/{m}.csv" for m in models} <= set(one)
    assert batch == one
