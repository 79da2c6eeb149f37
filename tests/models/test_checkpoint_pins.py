"""Checkpoints without a published checksum: pinned on first use in resources/checksums.lock,
verified on every later download and load, listed by `stage --dry-run`, refused in strict mode.

A local HTTP server on 127.0.0.1 stands in for the publisher's host; the file it serves can be
swapped for one with flipped bytes, as a compromised or broken mirror would serve it.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import threading

import pytest
import torch
import yaml

from calbench.data.download import ChecksumError
from calbench.lockfile import PinError
from calbench.models import pretrained as P
from calbench.models.staging import download_checkpoint


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _weights(path, seed=0):
    torch.manual_seed(seed)
    model = P.build_architecture("focal_resnet50", 10)
    torch.save({"module." + k: v for k, v in model.state_dict().items()}, path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _entry(url, sha=None):
    return {
        "dataset": "cifar10",
        "source": "checkpoint",
        "arch": "focal_resnet50",
        "num_classes": 10,
        "checkpoint": {
            "filename": "resnet50.model",
            "urls": [f"{url}/resnet50.model"],
            "sha256": sha,
            "strip_prefix": "module.",
        },
    }


def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_first_download_is_pinned_and_later_ones_verified(server, tmp_path):
    www, url = server
    digest = _weights(www / "resnet50.model")
    res = tmp_path / "resources"
    entry = _entry(url)
    dest = download_checkpoint("m", entry, res)
    lock = json.loads((res / "checksums.lock").read_text())["files"]
    key = "checkpoints/cifar10/m/checkpoint.pt"
    assert lock[key] == {
        "sha256": digest,
        "size": dest.stat().st_size,
        "source": f"{url}/resnet50.model",
    }
    P.load_pretrained("m", entry, resources=res)

    # the host now serves flipped bytes: a fresh download of the same file is refused
    _flip(www / "resnet50.model")
    dest.unlink()
    with pytest.raises((ChecksumError, FileNotFoundError), match="pinned on first use"):
        download_checkpoint("m", entry, res)
    assert not dest.exists() and not list(dest.parent.glob(".*tmp*"))

    # a file changed after it was fetched is refused at load time
    _weights(www / "resnet50.model")
    download_checkpoint("m", entry, res)
    _flip(dest)
    with pytest.raises(ChecksumError, match="recorded"):
        P.load_pretrained("m", entry, resources=res)


def test_published_checksum_needs_no_lock(server, tmp_path):
    www, url = server
    digest = _weights(www / "resnet50.model")
    res = tmp_path / "resources"
    download_checkpoint("m", _entry(url, digest), res, strict=True)
    assert not (res / "checksums.lock").exists()


def test_strict_mode_refuses_unpinned_files(server, tmp_path):
    www, url = server
    _weights(www / "resnet50.model")
    res = tmp_path / "resources"
    with pytest.raises(PinError, match="no published sha256 and strict checksums are on"):
        download_checkpoint("m", _entry(url), res, strict=True)
    assert not (res / "checkpoints").exists()


def _config(tmp_path, url, digest, strict=False):
    cfg = {
        "resources": str(tmp_path / "resources"),
        "strict_checksums": strict,
        "models": {"unpinned": _entry(url), "pinned": _entry(url, digest)},
    }
    path = tmp_path / f"reg_{strict}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _cli(capsys, *argv):
    from calbench.cli import main

    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_stage_dry_run_lists_unpinned_files(server, tmp_path, capsys):
    www, url = server
    digest = _weights(www / "resnet50.model")
    cfg = _config(tmp_path, url, digest)
    rc, out, _ = _cli(capsys, "stage", "--config", cfg, "--dry-run", "--skip-datasets")
    assert rc == 0
    lines = {ln.split()[1]: ln for ln in out.splitlines() if ln.startswith("checkpoint ")}
    assert "[to be pinned on first use]" in lines["unpinned"]
    assert "[published checksum]" in lines["pinned"]
    assert "1 checkpoint file(s) without a published checksum, trusted on first use" in out

    assert _cli(capsys, "stage", "--config", cfg, "--skip-datasets")[0] == 0
    rc, out, _ = _cli(capsys, "stage", "--config", cfg, "--dry-run", "--skip-datasets")
    lines = {ln.split()[1]: ln for ln in out.splitlines() if ln.startswith("checkpoint ")}
    assert "[pinned on first use (recorded)]" in lines["unpinned"]
    rc, out, _ = _cli(
        capsys, "stage", "--config", cfg, "--dry-run", "--skip-datasets", "--strict-checksums"
    )
    assert "refused (strict checksums)" in out


def test_download_checkpoint_verb_strict_is_one_line(server, tmp_path, capsys):
    www, url = server
    _weights(www / "resnet50.model")
    out = tmp_path / "resources" / "checkpoints" / "cifar10" / "m" / "checkpoint.pt"
    rc, _, err = _cli(
        capsys,
        "download-checkpoint",
        "--spec",
        json.dumps(_entry(url)),
        "--out",
        out,
        "--resources",
        tmp_path / "resources",
        "--strict-checksums",
    )
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "strict checksums are on" in err
    assert not out.exists()


def test_report_provenance_lists_files_without_a_published_checksum(server, tmp_path):
    import re
    from pathlib import Path

    import jinja2

    from calbench.report.build import checksum_summary

    www, url = server
    digest = _weights(www / "resnet50.model")
    cfg = {
        "resources": str(tmp_path / "resources"),
        "models": {"unpinned": _entry(url), "pinned": _entry(url, digest), "later": _entry(url)},
    }
    download_checkpoint("unpinned", cfg["models"]["unpinned"], tmp_path / "resources")
    prov = checksum_summary(cfg)
    assert prov["published"] == 1
    assert prov["files"] == [
        {
            "model": "unpinned",
            "file": "checkpoints/cifar10/unpinned/checkpoint.pt",
            "status": "pinned on first use",
            "sha256": digest,
        },
        {
            "model": "later",
            "file": "checkpoints/cifar10/later/checkpoint.pt",
            "status": "not pinned",
            "sha256": "",
        },
    ]
    # the report template's provenance block shows them
    root = Path(__file__).resolve().parents[2] / "src" / "calbench" / "templates" / "report"
    template = (root / "sections" / "provenance.html.j2").read_text()
    block = re.search(r"\{% if provenance\.checksums.*?\{% endif %\}", template, re.S).group(0)
    html = (
        jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
        .from_string(block)
        .render(provenance={"checksums": prov})
    )
    assert "Downloads without a published checksum" in html and digest in html
    assert "checkpoints/cifar10/later/checkpoint.pt</td><td>not pinned" in html
