"""The ``download-checkpoint`` and ``stage`` verbs on a registry and mirror the test writes."""

import argparse
import hashlib
import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
import yaml

from calbench.cli import models as models_cli
from calbench.cli import replication as replication_cli
from calbench.cli import stage as stage_cli
from calbench.models import pretrained as P

torch.set_num_threads(1)  # the CI machine's 2 cores are shared; threads oversubscribe


def run(argv):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    models_cli.register(sub)
    stage_cli.register(sub)
    replication_cli.register(sub)
    args = parser.parse_args(argv)
    return args.func(args)


HUBCONF = "import torch.nn as nn\n\n\ndef cifar100_resnet20(pretrained=False):\n    return nn.Linear(4, 100)\n"


@pytest.fixture()
def setup(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    torch.manual_seed(0)
    focal = P.build_architecture("focal_densenet121", 10)
    torch.save(
        {"module." + k: v for k, v in focal.state_dict().items()},
        mirror / "densenet121_cross_entropy_350.model",
    )
    torch.save(torch.nn.Linear(4, 100).state_dict(), mirror / "w.pt")
    digest = hashlib.sha256((mirror / "w.pt").read_bytes()).hexdigest()
    (mirror / f"cifar100_resnet20-{digest[:8]}.pt").write_bytes((mirror / "w.pt").read_bytes())
    ref = "e8a3ffb2383c0be657199cd668d763b2233db91d"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:  # GitHub archive layout: one top folder
        zf.writestr(f"pytorch-cifar-models-{ref}/hubconf.py", HUBCONF)
        zf.writestr(f"pytorch-cifar-models-{ref}/README.md", "x")
        zf.comment = ref.encode()  # git archive writes the commit id as the zip's comment
    (mirror / f"chenyaofo_pytorch-cifar-models_{ref}.zip").write_bytes(buf.getvalue())
    reg = {
        "resources": str(tmp_path / "resources"),
        "mirrors": [str(mirror)],
        "models": {
            "f_c10_densenet121_ce": {
                "dataset": "cifar10",
                "source": "checkpoint",
                "arch": "focal_densenet121",
                "num_classes": 10,
                "checkpoint": {
                    "filename": "densenet121_cross_entropy_350.model",
                    "urls": [],
                    "sha256": None,
                    "strip_prefix": "module.",
                },
            },
            "c100_resnet20": {
                "dataset": "cifar100",
                "source": "torchhub",
                "num_classes": 100,
                "hub": {
                    "repo": "chenyaofo/pytorch-cifar-models",
                    "ref": ref,
                    "entry": "cifar100_resnet20",
                },
                "checkpoint": {
                    "filename": f"cifar100_resnet20-{digest[:8]}.pt",
                    "urls": [],
                    "sha256": digest[:8],
                },
            },
        },
    }
    cfg = tmp_path / "reg.yaml"
    cfg.write_text(yaml.safe_dump(reg))
    return cfg, tmp_path / "resources", focal


def test_download_checkpoint_verb(setup, capsys):
    cfg, res, focal = setup
    assert (
        run(["download-checkpoint", "--config", str(cfg), "--model", "f_c10_densenet121_ce"]) == 0
    )
    out = Path(capsys.readouterr().out.strip())
    assert out == res / "checkpoints/cifar10/f_c10_densenet121_ce/checkpoint.pt"
    doc = P.load_registry(cfg)
    model = P.load_pretrained(
        "f_c10_densenet121_ce", P.get_entry(doc, "f_c10_densenet121_ce"), resources=res
    )
    torch.testing.assert_close(model.linear.weight, focal.linear.weight)
    with pytest.raises(ValueError, match="did you mean"):
        run(["download-checkpoint", "--config", str(cfg), "--model", "f_c10_densenet121"])


def test_stage_then_offline_load(setup, capsys):
    cfg, res, _ = setup
    assert run(["stage", "--config", str(cfg), "--dry-run", "--skip-datasets"]) == 0
    assert not res.exists()
    assert "hub" in capsys.readouterr().out
    assert run(["stage", "--config", str(cfg), "--skip-datasets"]) == 0
    sums = (res / "SHA256SUMS").read_text().splitlines()
    names = {line.split("  ", 1)[1] for line in sums}
    assert "checkpoints/cifar10/f_c10_densenet121_ce/checkpoint.pt" in names
    assert any(n.endswith("/hubconf.py") for n in names)
    # the staged folder verifies with the standard tool
    ok = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=res, capture_output=True)
    assert ok.returncode == 0, ok.stderr
    doc = P.load_registry(cfg)
    model = P.load_pretrained("c100_resnet20", P.get_entry(doc, "c100_resnet20"), resources=res)
    assert model.weight.shape == (100, 4)


def test_stage_reports_what_is_missing(setup, tmp_path):
    cfg, res, _ = setup
    doc = yaml.safe_load(cfg.read_text())
    doc["mirrors"] = []
    cfg.write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError, match="could not be staged.*--mirror"):
        run(["stage", "--config", str(cfg), "--skip-datasets", "--timeout", "1"])


@pytest.mark.parametrize("module", ["models", "stage", "replication", "logits", "calibrate"])
def test_cli_module_imports_nothing_heavy(module):
    code = f"import sys, calbench.cli.{module}; print(any(m in sys.modules for m in ('torch', 'scipy', 'sklearn', 'matplotlib')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False"


def test_download_checkpoint_spec_form_is_the_workflow_rule(setup, tmp_path, capsys):
    """--spec JSON --out FILE: the rule's form; same file as the --config/--model form, and the
    torch.hub code is staged with the weights."""
    import json

    cfg, res, focal = setup
    doc = yaml.safe_load(cfg.read_text())
    entry = doc["models"]["c100_resnet20"]
    out = tmp_path / "wf" / "resources/checkpoints/cifar100/c100_resnet20/checkpoint.pt"
    argv = ["download-checkpoint", "--spec", json.dumps(entry), "--out", str(out)]
    argv += ["--resources", str(tmp_path / "wf" / "resources"), "--mirror", doc["mirrors"][0]]
    assert run(argv) == 0
    assert Path(capsys.readouterr().out.strip()) == out
    assert out.read_bytes() == (Path(doc["mirrors"][0]) / "w.pt").read_bytes()
    hub = tmp_path / "wf/resources/hub" / f"chenyaofo_pytorch-cifar-models_{entry['hub']['ref']}"
    assert (hub / "hubconf.py").is_file()
    with pytest.raises(ValueError, match="--spec needs --out"):
        run(["download-checkpoint", "--spec", json.dumps(entry)])
    with pytest.raises(ValueError, match="say which model"):
        run(["download-checkpoint"])


def test_download_checkpoint_corrupt_file_leaves_nothing(setup, tmp_path):
    import json

    from calbench.data.download import ChecksumError

    cfg, _, _ = setup
    doc = yaml.safe_load(cfg.read_text())
    entry = doc["models"]["c100_resnet20"]
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / entry["checkpoint"]["filename"]).write_bytes(b"not the weights")
    out = tmp_path / "res/checkpoints/cifar100/c100_resnet20/checkpoint.pt"
    argv = ["download-checkpoint", "--spec", json.dumps(entry), "--out", str(out)]
    with pytest.raises(FileNotFoundError, match="does not match the pinned"):
        run([*argv, "--mirror", str(bad), "--resources", str(tmp_path / "res")])
    assert not out.exists()  # nothing partial
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"corrupt")
    with pytest.raises(ChecksumError):  # a corrupt file already in place is refused too
        run([*argv, "--resources", str(tmp_path / "res")])


def test_stage_dry_run_lists_sizes_of_the_coursework(capsys):
    repo = Path(__file__).resolve().parents[2]
    assert run(["stage", "--config", str(repo / "config/coursework.yaml"), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("checkpoint") for line in lines) == 77
    assert sum(line.startswith("archive") for line in lines) == 1  # the huyvnphan zip, once
    assert sum(line.startswith("hub") for line in lines) == 1  # one pinned chenyaofo checkout
    datasets = [line.split()[1] for line in lines if line.startswith("dataset")]
    assert datasets == ["cifar10", "cifar100", "imagenet", "tiny_imagenet"]
    assert "933 MB" in next(line for line in lines if line.startswith("archive"))
    assert "checkpoints/cifar10/c10_resnet18/checkpoint.pt" in "\n".join(lines)
    assert lines[-1].startswith("83 item(s), about ")


def test_reference_csv_verb(tmp_path, capsys):
    import csv

    out = tmp_path / "ref.csv"
    assert run(["reference-csv", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 77 * 7 * 6  # every model x calibrator x metric of tables 3-14, once
    cell = [
        r
        for r in rows
        if r["model"] == "c100_resnet20" and r["method"] == "ts" and r["metric"] == "ece"
    ]
    assert [c["value"] for c in cell] == ["2.48"]  # spot check of the replication notes
