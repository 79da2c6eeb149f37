"""CalArena's HDF5 benchmarks (format ``calarena``) and results CSVs, with files written here in
the published layout (probkit/CalArena calibration_benchmarks/generate_*_benchmarks.py,
run_benchmark.py), downloaded from an imitation of the Hugging Face Hub on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

h5py = pytest.importorskip("h5py")

sys.path.insert(0, str(Path(__file__).parent))
from fake_services import FakeServices  # noqa: E402

from calbench.functional import softmax  # noqa: E402
from calbench.lockfile import LOCK_NAME  # noqa: E402
from calbench.logits import load_logits  # noqa: E402
from calbench.logits_sources import formats, import_logits, obtain, plan_files  # noqa: E402
from calbench.logits_sources.calarena import LOG_FLOOR, read_results_csv  # noqa: E402

REPO = "probkit/CalArena"


def _probs(rng, n, k):
    p = softmax(rng.normal(size=(n, k)) * 2).astype(np.float32)
    return p


def write_benchmark(path, experiments: dict, problem_type: str):
    """``{"dataset/model": (p_cal, y_cal, p_test, y_test)}`` as CalArena writes a benchmark."""
    with h5py.File(path, "w") as f:
        f.attrs["source"] = "cv"
        f.attrs["problem_type"] = problem_type
        for group, (pc, yc, pt, yt) in experiments.items():
            g = f.create_group(group)
            g.create_dataset("probas_cal", data=pc.astype(np.float32), compression="gzip")
            g.create_dataset("labels_cal", data=yc.astype(np.int32), compression="gzip")
            g.create_dataset("probas_test", data=pt.astype(np.float32), compression="gzip")
            g.create_dataset("labels_test", data=yt.astype(np.int32), compression="gzip")
    return Path(path).read_bytes()


def _multiclass(seed=0, n_cal=30, n_test=20, k=4):
    rng = np.random.default_rng(seed)
    return (
        _probs(rng, n_cal, k),
        rng.integers(0, k, n_cal),
        _probs(rng, n_test, k),
        rng.integers(0, k, n_test),
    )


def _binary(seed=0, n_cal=40, n_test=30):
    rng = np.random.default_rng(seed)
    pc, pt = rng.uniform(0.01, 0.99, n_cal), rng.uniform(0.01, 0.99, n_test)
    return (
        pc,
        (rng.uniform(size=n_cal) < pc).astype(int),
        pt,
        (rng.uniform(size=n_test) < pt).astype(int),
    )


def _read(path, group, use_split=True):
    return formats.read("calarena", path, use_split=use_split, options={"group": group})


def test_multiclass_group_becomes_log_probabilities_with_calarenas_split(tmp_path):
    pc, yc, pt, yt = _multiclass()
    pc[0] = [0.0, 0.0, 1.0, 0.0]  # exact zeros (tree models) stay finite
    f = tmp_path / "cv-multiclass.h5"
    write_benchmark(
        f, {"c10/densenet40": (pc, yc, pt, yt), "c10/lenet5": _multiclass(1)}, "multiclass"
    )
    imp = _read(f, "c10/densenet40")
    p = np.concatenate([pc, pt]).astype(np.float32)
    assert imp.logits.dtype == np.float32 and imp.logits.shape == (50, 4)
    np.testing.assert_allclose(imp.logits[1:], np.log(p[1:].astype(np.float64)), rtol=1e-6)
    assert imp.logits[0].tolist() == pytest.approx([LOG_FLOOR, LOG_FLOOR, 0.0, LOG_FLOOR])
    np.testing.assert_allclose(softmax(imp.logits.astype(np.float64)), p, atol=1e-6)
    np.testing.assert_array_equal(imp.labels, np.concatenate([yc, yt]))
    val, test = imp.split
    assert val.tolist() == list(range(30)) and test.tolist() == list(range(30, 50))
    # split: study keeps the rows, without the file's split
    assert _read(f, "c10/densenet40", use_split=False).split is None


def test_binary_probabilities_become_two_columns(tmp_path):
    pc, yc, pt, yt = _binary()
    pc[0], pc[1] = 0.0, 1.0
    f = tmp_path / "cv-binary.h5"
    write_benchmark(f, {"c10/densenet40": (pc, yc, pt, yt)}, "binary")
    imp = _read(f, "c10/densenet40")
    assert imp.logits.shape == (70, 2)
    p = np.concatenate([pc, pt]).astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(softmax(imp.logits.astype(np.float64))[:, 1], p, atol=1e-6)
    assert imp.logits[0].tolist() == pytest.approx([0.0, LOG_FLOOR])
    assert imp.logits[1].tolist() == pytest.approx([LOG_FLOOR, 0.0])
    assert imp.labels.tolist() == np.concatenate([yc, yt]).tolist()


def test_same_logits_as_probmetrics_takes_from_probabilities(tmp_path):
    """probmetrics' CategoricalProbs.get_logits (what CalArena's logit-based calibrators see)."""
    pm = pytest.importorskip("probmetrics.distributions")
    torch = pytest.importorskip("torch")
    pc, yc, pt, yt = _multiclass(3)
    pc[2] = [0.0, 0.5, 0.5, 0.0]
    f = tmp_path / "b.h5"
    write_benchmark(f, {"d/m": (pc, yc, pt, yt)}, "multiclass")
    ours = _read(f, "d/m").logits[:30]
    theirs = pm.CategoricalProbs(torch.from_numpy(pc.astype(np.float32))).get_logits().numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "mutate, group, message",
    [
        (None, "c10/nope", "has no experiment 'c10/nope'"),
        (None, None, "needs logits.group"),
        ("drop_labels", "c10/m", r"lacks \['labels_test'\]"),
        ("not_probs", "c10/m", "row 3 sums to"),
        ("negative", "c10/m", "not probabilities in"),
        ("short_labels", "c10/m", "they must pair up"),
        ("garbage", "c10/m", "is not an HDF5 file"),
    ],
)
def test_bad_files_are_one_line_errors(tmp_path, mutate, group, message):
    pc, yc, pt, yt = _multiclass()
    if mutate == "not_probs":
        pc[3] *= 0.5
    if mutate == "negative":
        pt[1, 0] = -0.1
    if mutate == "short_labels":
        yt = yt[:-1]
    f = tmp_path / "b.h5"
    write_benchmark(f, {"c10/m": (pc, yc, pt, yt)}, "multiclass")
    if mutate == "drop_labels":
        with h5py.File(f, "a") as h:
            del h["c10/m/labels_test"]
    if mutate == "garbage":
        f.write_bytes(b"not hdf5 at all")
    with pytest.raises(ValueError, match=message) as exc:
        _read(f, group)
    assert "\n" not in str(exc.value)


# ------------------------------------------------------------------ results CSV


def test_results_csv_multiclass_and_binary_layouts(tmp_path):
    mc = tmp_path / "results/cv-multiclass/TS.csv"
    mc.parent.mkdir(parents=True)
    mc.write_text(
        "dataset,model,cal_size,test_size,n_classes,TS_brier,TS_logloss,TS_ece-15,TS_accuracy,TS_time\n"
        "c10,densenet40,5000,10000,10,0.1,0.2,0.03,0.92,0.5\n"
        "c100,resnet110,5000,10000,100,0.3,1.1,0.02,0.71,1.25\n"
    )
    rows = read_results_csv(mc)
    assert [(r["dataset"], r["model"], r["n_classes"]) for r in rows] == [
        ("c10", "densenet40", 10),
        ("c100", "resnet110", 100),
    ]
    assert rows[0]["calibrator"] == "TS" and rows[0]["cal_size"] == 5000
    assert rows[1]["metrics"] == {
        "brier": 0.3,
        "logloss": 1.1,
        "ece-15": 0.02,
        "accuracy": 0.71,
        "time": 1.25,
    }
    b = tmp_path / "Base-model.csv"
    b.write_text(
        "dataset,model,cal_size,test_size,Base-model_brier,Base-model_logloss,Base-model_kuiper,"
        "Base-model_ece-15,Base-model_accuracy,Base-model_time\n"
        "APSFailure,TabPFN-v2.6,50666,25334,0.0086,0.0159,0.0013,0.0015,0.9944,0\n"
    )
    (row,) = read_results_csv(b)
    assert row["n_classes"] == 2 and row["calibrator"] == "Base-model"
    assert row["metrics"]["kuiper"] == 0.0013 and row["metrics"]["time"] == 0.0


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "is empty"),
        ("dataset,model,TS_brier\nc,m,0.1\n", r"lacks the columns \['cal_size', 'test_size'\]"),
        ("dataset,model,cal_size,test_size,VS_brier\nc,m,1,2,0.1\n", "are not TS_<metric>"),
        (
            "dataset,model,cal_size,test_size,TS_brier\nc,m,1,2,x\n",
            "line 2, TS_brier = 'x' is not a number",
        ),
        (
            "dataset,model,cal_size,test_size,TS_brier\nc,m,1,2,0.1\nc,m,1,2,0.2\n",
            "repeats experiment c/m",
        ),
        ("dataset,model,cal_size,test_size,TS_brier\nc,m,1,2\n", "line 2 has 4 fields"),
    ],
)
def test_results_csv_errors(tmp_path, text, message):
    f = tmp_path / "TS.csv"
    f.write_text(text)
    with pytest.raises(ValueError, match=message) as exc:
        read_results_csv(f)
    assert "\n" not in str(exc.value)


# ------------------------------------------------------------------ Hugging Face Hub download


def _hf_entry(fake, group, file="cv-binary.h5", **extra):
    return {
        "dataset": "cv_binary",
        "source": "logits",
        "logits": {
            "format": "calarena",
            "file": file,
            "group": group,
            "huggingface": {
                "repo": REPO,
                "revision": fake.state.hf_revision,
                "endpoint": fake.base,
                **extra,
            },
        },
    }


@pytest.fixture
def fake():
    with FakeServices() as f:
        yield f


def test_hub_download_is_shared_pinned_and_listed_by_stage(fake, tmp_path):
    bench = {"c10/densenet40": _binary(0), "c10/lenet5": _binary(1)}
    data = write_benchmark(tmp_path / "src.h5", bench, "binary")
    fake.state.hf = {
        "cv-binary.h5": data,
        "cv-binary-experiments.csv": b"dataset,model,cal_size,test_size\n",
        "other/readme.md": b"x",
    }
    res = tmp_path / "res"
    e1, e2 = _hf_entry(fake, "c10/densenet40"), _hf_entry(fake, "c10/lenet5")
    assert [p["pin"] for p in plan_files("a", e1, res)] == ["first use"]
    s1 = import_logits(
        "a", e1, tmp_path / "a.npz", split_out=tmp_path / "a_split.npz", resources=res
    )
    s2 = import_logits(
        "b", e2, tmp_path / "b.npz", split_out=tmp_path / "b_split.npz", resources=res
    )
    resolves = [p for m, p in fake.state.log if "/resolve/" in p]
    assert resolves == [f"/datasets/{REPO}/resolve/{fake.state.hf_revision}/cv-binary.h5"]  # once
    dest = res / "logits/huggingface.co" / REPO / fake.state.hf_revision / "cv-binary.h5"
    assert dest.read_bytes() == data
    files = json.loads((res / LOCK_NAME).read_text())["files"]
    rec = files[f"logits/huggingface.co/{REPO}/{fake.state.hf_revision}/cv-binary.h5"]
    assert len(files) == 1 and rec["sha256"] == hashlib.sha256(data).hexdigest()
    assert s1["classes"] == 2 and s1["split"] == {"val": 40, "test": 30, "source": "calarena"}
    assert s2["files"][0]["status"] == "pinned on first use"
    assert plan_files("a", e1, res)[0]["pin"] == "lock"
    d = load_logits(tmp_path / "b.npz")
    pc, yc, pt, yt = bench["c10/lenet5"]
    assert d["labels"].tolist() == np.concatenate([yc, yt]).tolist()
    # a changed file on the Hub (same name, same revision) is refused by the listing's pin
    dest.unlink()
    fake.state.hf["cv-binary.h5"] = write_benchmark(
        tmp_path / "x.h5", {"c10/densenet40": _binary(5)}, "binary"
    )
    with pytest.raises(ValueError, match="the published file changed"):
        obtain("a", e1, res)
    assert not dest.exists()


def test_hub_errors_name_the_file(fake, tmp_path):
    fake.state.hf = {"a/cv-binary.h5": b"1", "b/cv-binary.h5": b"2"}
    with pytest.raises(ValueError, match="set huggingface.path"):
        obtain("a", _hf_entry(fake, "c10/m"), tmp_path)
    with pytest.raises(FileNotFoundError, match="has no c/cv-binary.h5"):
        obtain("a", _hf_entry(fake, "c10/m", path="c/cv-binary.h5"), tmp_path)
    entry = _hf_entry(fake, "c10/m")
    fake.state.hf_revision = "other"  # the entry's revision is gone
    with pytest.raises(OSError, match=f"Hugging Face repository {REPO} at 0123abc") as exc:
        obtain("a", entry, tmp_path / "r2")
    assert "\n" not in str(exc.value)


def test_binary_calarena_runs_through_import_logits_and_calibrate(tmp_path, capsys, monkeypatch):
    """K = 2 end to end by the CLI: a CalArena binary experiment imported with its own split,
    then every step of ``calbench calibrate``."""
    from calbench.cli import main

    monkeypatch.chdir(tmp_path)
    f = tmp_path / "cv-binary.h5"
    write_benchmark(f, {"c10/densenet40": _binary(2, 120, 120)}, "binary")
    cfg = {
        "models": {
            "c10_densenet40": {
                "dataset": "cv_binary",
                "source": "logits",
                "num_classes": 2,
                "logits": {
                    "format": "calarena",
                    "file": f.name,
                    "group": "c10/densenet40",
                    "local_path": str(f),
                },
            }
        }
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    rc = main(["import-logits", "--config", "c.yaml", "--model", "c10_densenet40"])
    assert rc == 0, capsys.readouterr().err
    spec = {
        "calibrators": {
            "uncalibrated": {"method": "uncalibrated", "params": {}, "display": "Uncalibrated"},
            "ts": {"method": "ts", "params": {}, "display": "TS"},
        },
        "evaluation": {
            "metrics": ["accuracy", "ece", "nll"],
            "halves": ["test"],
            "n_bootstrap": 10,
            "level": 0.9,
            "seed": 0,
            "ci_halves": ["test"],
            "ci_metrics": ["ece"],
        },
        "compare": {
            "metrics": ["nll"],
            "baselines": ["uncalibrated"],
            "n_bootstrap": 10,
            "select_folds": 2,
            "select_exclude": [],
        },
        "plots": {"n_bins": 5, "style": "guo"},
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    rc = main(
        [
            "calibrate",
            "--logits",
            "results/logits/cv_binary/c10_densenet40.npz",
            "--split",
            "results/split/cv_binary/c10_densenet40.npz",
            "--spec",
            "@spec.json",
            "--calibrators-dir",
            "out/cal",
            "--metrics-dir",
            "out/met",
            "--plots-dir",
            "out/plot",
            "--compare",
            "out/compare.csv",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    text = (tmp_path / "out/met/ts.csv").read_text()
    assert "nll" in text and "c10_densenet40" in text
    assert json.loads((tmp_path / "out/cal/ts.json").read_text())


def test_stage_lists_and_fetches_a_shared_benchmark_once(fake, tmp_path, capsys):
    from calbench.cli import main

    data = write_benchmark(
        tmp_path / "src.h5", {"c10/a": _binary(0), "c10/b": _binary(1)}, "binary"
    )
    fake.state.hf = {"cv-binary.h5": data}
    cfg = {"models": {"m_a": _hf_entry(fake, "c10/a"), "m_b": _hf_entry(fake, "c10/b")}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    res = tmp_path / "res"
    assert (
        main(["stage", "--config", str(tmp_path / "c.yaml"), "--resources", str(res), "--dry-run"])
        == 0
    )
    out = capsys.readouterr().out
    assert out.count("cv-binary.h5") == 1 and "logits files: 1 to be pinned on first use" in out
    assert fake.state.log == []
    assert main(["stage", "--config", str(tmp_path / "c.yaml"), "--resources", str(res)]) == 0
    sums = (res / "SHA256SUMS").read_text()
    rel = f"logits/huggingface.co/{REPO}/{fake.state.hf_revision}/cv-binary.h5"
    assert f"{hashlib.sha256(data).hexdigest()}  {rel}" in sums
    assert ".lock" not in sums.replace("checksums.lock", "")  # the download lock is hidden
    assert sum("/resolve/" in p for _, p in fake.state.log) == 1


def test_schema_and_entry_checks_of_the_new_keys():
    from calbench.config_check import check_config
    from calbench.logits_sources.entry import check_entry

    repo = Path(__file__).resolve().parents[2]
    schema = yaml.safe_load((repo / "workflow/schemas/config.schema.yaml").read_text())
    from calbench.study_config import complete

    cfg = complete(yaml.safe_load((repo / "config/llm_mmlu.yaml").read_text()), repo)
    cfg["datasets"] = {"cv_binary": {"display": "CalArena cv-binary"}}
    entry = {
        "dataset": "cv_binary",
        "source": "logits",
        "logits": {
            "format": "calarena",
            "file": "cv-binary.h5",
            "group": "c10/densenet40",
            "huggingface": {"repo": REPO, "revision": "0123abc", "path": "cv-binary.h5"},
        },
    }
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    assert list(validator.iter_errors(cfg)) == []  # the config example
    assert list(validator.iter_errors({**cfg, "models": {"m": entry}})) == []
    assert check_config({**cfg, "models": {"m": entry}}, schema) == []
    bad = copy_entry(entry, group="no-slash")
    assert any(
        "no-slash" in e.message for e in validator.iter_errors({**cfg, "models": {"m": bad}})
    )
    check_entry("m", entry)
    for logits, message in [
        ({"group": None}, "needs logits.group"),
        (
            {"format": "npz", "file": "x.npz", "huggingface": None},
            "logits.group applies to format calarena only",
        ),
        (
            {"huggingface": {"repo": "../x", "revision": "main"}},
            "huggingface repo / revision / path",
        ),
        ({"huggingface": {"repo": REPO, "revision": ".."}}, "huggingface repo / revision / path"),
        ({"huggingface": {"repo": REPO, "path": "a/other.h5"}}, "must end in logits.file"),
        ({"format": "lm_eval", "group": None, "split": "file"}, "have no split of their own"),
        ({"choices": 4}, "logits.choices applies to format lm_eval / helm only"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_entry("m", copy_entry(entry, **logits))


def copy_entry(entry, **logits):
    lg = {**entry["logits"], **logits}
    return {**entry, "logits": {k: v for k, v in lg.items() if v is not None}}


def test_parallel_jobs_download_a_shared_benchmark_once(fake, tmp_path):
    """Two models' import jobs at once (the workflow runs them in parallel): one download."""
    import threading

    data = write_benchmark(
        tmp_path / "src.h5", {"c10/a": _binary(0), "c10/b": _binary(1)}, "binary"
    )
    fake.state.hf, fake.state.hf_delay = {"cv-binary.h5": data}, 0.3
    res, errors = tmp_path / "res", []

    def job(model, group):
        try:
            obtain(model, _hf_entry(fake, group), res)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=job, args=a) for a in (("m_a", "c10/a"), ("m_b", "c10/b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(p.startswith("/hfcdn/") for _, p in fake.state.log) == 1


def test_without_h5py_the_reader_says_what_to_install(tmp_path, monkeypatch):
    """h5py is an optional extra ([calarena]): without it the reader's error is one line naming
    the install, not an ImportError traceback."""
    import sys

    from calbench.logits_sources.calarena import read_calarena

    monkeypatch.setitem(sys.modules, "h5py", None)  # import h5py now raises ImportError
    with pytest.raises(ValueError, match=r"needs h5py.*pip install -e '\.\[calarena\]'") as info:
        read_calarena(tmp_path / "cv-multiclass.h5", {"group": "c10/densenet40"})
    assert "\n" not in str(info.value)
