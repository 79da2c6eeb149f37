"""The data -> train -> logits -> split verbs end to end on a few hundred Fashion-MNIST images."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from calbench.cli import main
from calbench.split import split_digests, study_split

DEBIAN = Path("/usr/share/datasets/fashion-mnist")
pytestmark = pytest.mark.skipif(
    not (DEBIAN / "t10k-labels-idx1-ubyte.gz").is_file(),
    reason="Debian package dataset-fashion-mnist is not installed",
)


def _spec(arch="lenet5", **training):
    t = {
        "loss": "ce",
        "loss_kwargs": {},
        "epochs": 1,
        "batch_size": 64,
        "lr": 0.05,
        "seed": 0,
        "train_subset": 256,
    }
    t.update(training)
    return {"dataset": "fashion_mnist", "source": "train", "arch": arch, "training": t}


def _fails(capsys, argv, *must_not_exist):
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and err.startswith(f"calbench {argv[0]}: error: ")
    for path in must_not_exist:
        assert not Path(path).exists(), path
    return err


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("res") / "datasets" / "fashion_mnist"
    manifest = root / "manifest.json"
    argv = [
        "download-dataset",
        "--dataset",
        "fashion_mnist",
        "--root",
        str(root),
        "--mirror",
        str(DEBIAN),
        "--no-default-mirrors",
        "--no-download",
        "--manifest",
        str(manifest),
    ]
    assert main(argv) == 0
    return root


def test_download_dataset_writes_a_manifest(root):
    m = json.loads((root / "manifest.json").read_text())
    assert m["dataset"] == "fashion_mnist" and m["mirrors"] == [str(DEBIAN)]
    assert m["splits"]["test"]["label_counts"] == [1000] * 10
    assert set(m["files"]) == {
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    }


def test_download_dataset_without_a_source_fails_cleanly(tmp_path, capsys):
    manifest = tmp_path / "r" / "manifest.json"
    argv = [
        "download-dataset",
        "--dataset",
        "fashion_mnist",
        "--root",
        str(tmp_path / "r"),
        "--mirror",
        str(tmp_path),
        "--no-default-mirrors",
        "--no-download",
        "--manifest",
        str(manifest),
    ]
    err = _fails(capsys, argv, manifest)
    assert "could not obtain Fashion-MNIST file" in err
    err = _fails(
        capsys,
        ["download-dataset", "--dataset", "mnist", "--root", str(tmp_path)],
        tmp_path / "manifest.json",
    )
    assert "unknown dataset 'mnist'" in err


def test_train_cache_split_pipeline(root, tmp_path, capsys):
    import torch

    threads = torch.get_num_threads()
    try:
        _pipeline(root, tmp_path, capsys)
    finally:
        torch.set_num_threads(threads)  # --threads 1 below is process-wide


def _pipeline(root, tmp_path, capsys):
    res = tmp_path / "results"
    logits_files = []
    for arch in ("lenet5", "mlp"):
        spec = json.dumps(_spec(arch))
        model_pt = res / "models" / "fashion_mnist" / arch / "model.pt"
        history = model_pt.with_name("history.csv")
        assert (
            main(
                [
                    "train-model",
                    "--spec",
                    spec,
                    "--data-root",
                    str(root),
                    "--out",
                    str(model_pt),
                    "--history",
                    str(history),
                    "--device",
                    "cpu",
                    "--threads",
                    "1",
                ]
            )
            == 0
        )
        rows = list(csv.DictReader(open(history)))
        assert len(rows) == 1 and rows[0]["epoch"] == "1" and 0 <= float(rows[0]["accuracy"]) <= 1
        out = res / "logits" / "fashion_mnist" / f"{arch}.npz"
        assert (
            main(
                [
                    "cache-logits",
                    "--spec",
                    spec,
                    "--checkpoint",
                    str(model_pt),
                    "--data-root",
                    str(root),
                    "--out",
                    str(out),
                    "--limit",
                    "301",
                    "--batch-size",
                    "100",
                    "--device",
                    "cpu",
                    "--no-progress",
                ]
            )
            == 0
        )
        with np.load(out, allow_pickle=False) as z:
            assert z["logits"].dtype == np.float32 and z["logits"].shape == (301, 10)
            assert z["labels"].dtype == np.int64 and str(z["model"]) == arch
            assert str(z["dataset"]) == "fashion_mnist"
        logits_files.append(out)
    split = res / "split" / "fashion_mnist" / "split.npz"
    argv = ["split", "--out", str(split)]
    for f in logits_files:
        argv += ["--logits", str(f)]
    assert main(argv) == 0
    val_idx, test_idx = study_split(301)
    with np.load(split, allow_pickle=False) as z:
        np.testing.assert_array_equal(z["val_idx"], val_idx)
        np.testing.assert_array_equal(z["test_idx"], test_idx)
        assert len(z["test_idx"]) == 151
        d = split_digests(val_idx, test_idx)
        assert str(z["val_sorted_sha256"]) == d["val_sorted_sha256"]
        assert str(z["test_order_sha256"]) == d["test_order_sha256"]
        with np.load(logits_files[0], allow_pickle=False) as lz:
            assert str(z["order_hash"]) == str(lz["order_hash"])
    # the workflow's split: the same, from the dataset itself (its labels and order), no logits
    own = res / "split" / "fashion_mnist" / "own.npz"
    argv = ["split", "--dataset", "fashion_mnist", "--data-root", str(root), "--limit", "301"]
    assert main([*argv, "--out", str(own)]) == 0
    with np.load(split, allow_pickle=False) as a, np.load(own, allow_pickle=False) as b:
        assert a.files == b.files
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key])
    capsys.readouterr()
    bad = ["split", "--logits", str(logits_files[0]), "--limit", "301", "--out", str(own) + "x"]
    assert "go with --dataset, not --logits" in _fails(capsys, bad, str(own) + "x")

    # a logits file of other samples (different --limit) cannot share the split
    spec = json.dumps(_spec("lenet5"))
    model_pt = res / "models" / "fashion_mnist" / "lenet5" / "model.pt"
    short = res / "logits" / "fashion_mnist" / "short.npz"
    assert (
        main(
            [
                "cache-logits",
                "--spec",
                spec,
                "--checkpoint",
                str(model_pt),
                "--data-root",
                str(root),
                "--out",
                str(short),
                "--limit",
                "300",
                "--device",
                "cpu",
                "--no-progress",
            ]
        )
        == 0
    )
    capsys.readouterr()
    bad_split = res / "split" / "bad.npz"
    err = _fails(
        capsys,
        [
            "split",
            "--logits",
            str(logits_files[0]),
            "--logits",
            str(short),
            "--out",
            str(bad_split),
        ],
        bad_split,
    )
    assert "holds 300 samples" in err

    # a checkpoint used with another architecture's spec
    bad_out = res / "logits" / "bad.npz"
    err = _fails(
        capsys,
        [
            "cache-logits",
            "--spec",
            json.dumps(_spec("mlp")),
            "--checkpoint",
            str(model_pt),
            "--data-root",
            str(root),
            "--out",
            str(bad_out),
            "--device",
            "cpu",
        ],
        bad_out,
    )
    assert "trained with arch 'lenet5'" in err
    # a spec that fits by name but not by shape
    narrow = dict(_spec("lenet5"), arch_kwargs={"num_classes": 5})
    err = _fails(
        capsys,
        [
            "cache-logits",
            "--spec",
            json.dumps(narrow),
            "--checkpoint",
            str(model_pt),
            "--data-root",
            str(root),
            "--out",
            str(bad_out),
            "--device",
            "cpu",
        ],
        bad_out,
    )
    assert "shape mismatches" in err


def test_train_model_errors_leave_no_files(root, tmp_path, capsys):
    out, hist = tmp_path / "m.pt", tmp_path / "h.csv"
    common = [
        "--data-root",
        str(root),
        "--out",
        str(out),
        "--history",
        str(hist),
        "--device",
        "cpu",
    ]
    err = _fails(
        capsys, ["train-model", "--spec", json.dumps(_spec("alexnet")), *common], out, hist
    )
    assert "unknown arch 'alexnet'" in err
    err = _fails(capsys, ["train-model", "--spec", json.dumps(_spec(epochs=0)), *common], out, hist)
    assert "epochs must be an integer >= 1" in err
    err = _fails(capsys, ["train-model", "--spec", "{not json", *common], out, hist)
    assert "not valid JSON" in err
    err = _fails(
        capsys,
        [
            "train-model",
            "--spec",
            json.dumps(_spec()),
            "--data-root",
            str(tmp_path / "nothing"),
            "--out",
            str(out),
            "--history",
            str(hist),
        ],
        out,
        hist,
    )
    assert "download-dataset" in err


def test_a_verb_run_from_the_command_line_ends_its_log_with_its_cpu_time(tmp_path):
    """The console script's last stderr line is the job's own CPU time and peak memory, the
    figure perf/bench_workflow.py reads; main() called with arguments (tests) prints nothing."""
    import importlib.util
    import re
    import subprocess
    import sys
    from pathlib import Path

    import numpy as np

    from calbench.split import save_split, study_split

    rng = np.random.default_rng(0)
    z = (rng.normal(size=(200, 3)) * 3).astype(np.float32)
    y = np.argmax(z + rng.normal(size=(200, 3)), axis=1)
    np.savez(tmp_path / "l.npz", logits=z, labels=y, order_hash="h", model="m", dataset="d")
    save_split(tmp_path / "s.npz", *study_split(200))
    code = "import sys; from calbench.cli import main; sys.exit(main())"
    args = ["fit-calibrator", "--logits", tmp_path / "l.npz", "--split", tmp_path / "s.npz"]
    args += ["--method", "ts", "--out", tmp_path / "ts.json"]
    res = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, check=True
    )
    last = res.stderr.strip().splitlines()[-1]
    m = re.fullmatch(r"calbench fit-calibrator: ([0-9.]+) CPU-s, ([0-9]+) MB peak memory", last)
    assert m and float(m.group(1)) > 0.1 and int(m.group(2)) > 10, last
    spec = importlib.util.spec_from_file_location(
        "bench_workflow", Path(__file__).resolve().parents[2] / "perf" / "bench_workflow.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    (tmp_path / "job.log").write_text("some output\n" + res.stderr)
    assert bench.logged_cpu(tmp_path / "job.log") == float(m.group(1))
    assert bench.logged_cpu(tmp_path / "none.log") is None
