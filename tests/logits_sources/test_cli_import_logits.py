"""``calbench import-logits`` and ``calbench stage`` for logits sources: outputs and one-line errors."""

from __future__ import annotations

import hashlib
import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from fake_services import FakeServices  # noqa: E402

from calbench.cli import main  # noqa: E402
from calbench.logits import load_logits  # noqa: E402


def _run(capsys, *argv):
    rc = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return rc, out, err


def _npz_user(tmp_path, split=True):
    rng = np.random.default_rng(0)
    z = rng.normal(size=(12, 3)).astype(np.float32)
    y = np.arange(12) % 3
    extra = {"val_idx": np.arange(0, 12, 2), "test_idx": np.arange(1, 12, 2)} if split else {}
    path = tmp_path / "mine.npz"
    np.savez(path, logits=z, labels=y, **extra)
    return path, z, y


def test_import_npz_by_hand_with_its_split(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, z, y = _npz_user(tmp_path)
    cfg = {
        "models": {
            "my_net": {
                "dataset": "mydata",
                "source": "logits",
                "logits": {"format": "npz", "file": "mine.npz", "split": "file", "local_path": str(path)},
            }
        }
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    rc, out, err = _run(capsys, "import-logits", "--config", "c.yaml", "--model", "my_net")
    assert rc == 0, err
    d = load_logits("results/logits/mydata/my_net.npz")
    np.testing.assert_array_equal(d["logits"], z)
    assert d["model"] == "my_net" and d["dataset"] == "mydata"
    assert d["logits"].dtype == np.float32 and d["labels"].dtype == np.int64
    with np.load("results/split/mydata/my_net.npz") as s:
        assert s["val_idx"].tolist() == [0, 2, 4, 6, 8, 10]
        assert str(s["order_hash"]) == d["order_hash"]
    assert "own split 6 / 6" in out and "local file, not pinned" in out


def test_import_writes_the_cache_logits_format(tmp_path, capsys):
    """Same keys and dtypes as calbench.logits.save_logits (what cache_logits writes)."""
    path, z, y = _npz_user(tmp_path, split=False)
    spec = {"dataset": "d", "source": "logits", "logits": {"format": "npz", "file": "mine.npz", "local_path": str(path)}}
    out = tmp_path / "results/logits/d/m.npz"
    prov = tmp_path / "m.source.json"
    rc, _, err = _run(capsys, "import-logits", "--spec", json.dumps(spec), "--out", out, "--provenance", prov)
    assert rc == 0, err
    with np.load(out, allow_pickle=False) as f:
        assert sorted(f.files) == ["dataset", "labels", "logits", "model", "order_hash"]
        assert f["logits"].dtype == np.float32 and f["labels"].dtype == np.int64
    rec = json.loads(prov.read_text())
    assert rec["files"][0]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert rec["n"] == 12 and rec["format"] == "npz"
    # the file holds no sample identities: beside computed models its order is checked by labels
    assert rec["order_check"] == "labels only" and rec["order_hash"].startswith("labels:")
    from calbench.logits_sources import describe_source

    assert describe_source(rec).endswith("; sample order checked by labels only")
    # deterministic: a second import gives byte-identical files
    first = out.read_bytes()
    assert _run(capsys, "import-logits", "--spec", json.dumps(spec), "--out", out)[0] == 0
    assert out.read_bytes() == first


@pytest.mark.parametrize(
    "args, logits, message",
    [
        (["--out", "x.npz"], None, "say which model"),
        (["--spec", "{}", "--config", "c.yaml"], None, "not both"),
        (["--spec", "SPEC"], None, "--spec needs --out"),
        (["--spec", "SPEC", "--out", "o.npz"], {"format": "hdf5", "file": "a"}, "logits.format 'hdf5'"),
        (["--spec", "SPEC", "--out", "o.npz"], {"format": "npz", "file": "../a.npz"}, "plain file name"),
        (["--spec", "SPEC", "--out", "o.npz"], {"format": "npz", "file": "a.npz"}, "names no source"),
        (["--spec", "SPEC", "--out", "o.npz"], {"format": "kull_pickle", "file": "a.p", "local_path": "LOCAL"}, "pass --split-out"),
        (["--spec", "SPEC", "--out", "o.npz", "--split-out", "s.npz"], {"format": "npz", "file": "a.npz", "local_path": "LOCAL"}, "drop --split-out"),
        (["--spec", "SPEC", "--out", "o.npz"], {"format": "coursework", "file": "a.pt", "local_path": "LOCAL"}, "not a torch-saved tensor"),
        (["--spec", "SPEC", "--out", "o.npz"], {"format": "coursework", "file": "a.pt", "split": "file"}, "use split: study"),
    ],
)
def test_import_errors_are_one_line(tmp_path, capsys, monkeypatch, args, logits, message):
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "a.bin"
    bad.write_bytes(b"not logits")
    (tmp_path / "targets.txt").write_text("0\n1")
    if logits is not None:
        logits = {k: (str(bad) if v == "LOCAL" else v) for k, v in logits.items()}
        spec = json.dumps({"dataset": "d", "source": "logits", "logits": logits})
        args = [spec if a == "SPEC" else a for a in args]
    rc, out, err = _run(capsys, "import-logits", *args)
    assert rc == 2
    assert message in err, err
    assert err.count("\n") == 1
    assert not (tmp_path / "o.npz").exists() and not (tmp_path / "s.npz").exists()


def test_stage_dry_run_and_stage_logits(tmp_path, capsys):
    rng = np.random.default_rng(0)
    data = pickle.dumps(
        [
            (rng.normal(size=(5, 3)).astype(np.float32), np.zeros((5, 1), np.uint8)),
            (rng.normal(size=(7, 3)).astype(np.float32), np.ones((7, 1), np.int64)),
        ],
        protocol=3,
    )
    sha = hashlib.sha256(data).hexdigest()
    with FakeServices() as fake:
        fake.state.lfs[sha] = data
        import io

        import torch

        buf = io.BytesIO()
        torch.save(torch.zeros(4, 2), buf)
        fake.state.disk = {"/cifar100/a.pt": buf.getvalue(), "/cifar100/targets.txt": b"0\n1\n0\n1"}
        cfg = {
            "models": {
                "kull": {
                    "dataset": "c10",
                    "source": "logits",
                    "logits": {
                        "format": "kull_pickle",
                        "file": "k.p",
                        "sha256": sha,
                        "size": len(data),
                        "github_lfs": {"repo": "o/r", "ref": "abcdef0", "path": "logits/k.p", "media_base": fake.base + "/media", "api_base": fake.base},
                    },
                },
                "course": {
                    "dataset": "c100",
                    "source": "logits",
                    "logits": {
                        "format": "coursework",
                        "file": "a.pt",
                        "folder": "cifar100",
                        "yandex_disk": {"public_key": fake.state.public_key, "api_base": fake.base},
                    },
                },
            }
        }
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        res = tmp_path / "res"
        rc, out, err = _run(capsys, "stage", "--config", tmp_path / "c.yaml", "--resources", res, "--dry-run")
        assert rc == 0, err
        assert "[published checksum]" in out and "[to be pinned on first use]" in out
        assert "logits files: 1 published checksum, 2 to be pinned on first use" in out
        assert fake.state.log == [] and not res.exists()
        rc, out, err = _run(capsys, "stage", "--config", tmp_path / "c.yaml", "--resources", res)
        assert rc == 0, err
        assert (res / "logits/c10/kull/k.p").read_bytes() == data
        assert (res / "logits/c100/course/a.pt").is_file()
        sums = (res / "SHA256SUMS").read_text()
        assert f"{sha}  logits/c10/kull/k.p" in sums
        rc, out, err = _run(capsys, "stage", "--config", tmp_path / "c.yaml", "--resources", res, "--dry-run")
        assert "logits files: 1 published checksum, 2 pinned on first use (recorded)" in out


def test_report_provenance_names_the_imported_file_and_its_pin(tmp_path, capsys):
    from calbench.report.build import data_provenance

    path, _, _ = _npz_user(tmp_path, split=False)
    spec = {"dataset": "d", "source": "logits", "logits": {"format": "npz", "file": "mine.npz", "local_path": str(path)}}
    out = tmp_path / "results/logits/d/m.npz"
    rc, _, err = _run(capsys, "import-logits", "--spec", json.dumps(spec), "--out", out,
                      "--provenance", tmp_path / "results/logits/d/m.source.json")
    assert rc == 0, err
    prov = data_provenance([], [out], [])
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert prov["logits"][0]["source"] == (
        f"npz: mine.npz sha256 {sha[:12]}, {path.stat().st_size:,} bytes, local file, not pinned; "
        "sample order checked by labels only"
    )


def test_declared_num_classes_against_the_file(tmp_path, capsys):
    """A declared ``num_classes`` the file disagrees with is refused in one line naming both
    numbers, and nothing is written; the file's own width passes."""
    path, _, _ = _npz_user(tmp_path, split=False)  # 3 classes
    out, prov = tmp_path / "o.npz", tmp_path / "o.source.json"
    for k, rc_want in ((10, 2), (3, 0)):
        spec = {"dataset": "d", "source": "logits", "num_classes": k,
                "logits": {"format": "npz", "file": "mine.npz", "local_path": str(path)}}  # fmt: skip
        rc, _, err = _run(capsys, "import-logits", "--spec", json.dumps(spec), "--out", out, "--provenance", prov)
        assert rc == rc_want, err
        if rc:
            assert "3 classes" in err and "num_classes: 10" in err and err.count("\n") == 1
            assert not out.exists() and not prov.exists()
