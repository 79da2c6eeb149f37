"""A pin means "this is the file the source published".

A checksum pinned on first use comes from the configured source (a download from the entry's
URLs) or from a local file proven right: a checkpoint that loads strictly into its architecture
(and, where the entry names an expected accuracy, only on purpose with ``repin``), logits that
parse in the entry's format with its number of classes, a corrupted-set member whose labels are
the clean test labels, a hub archive whose comment names the pinned commit. Anything else is
refused and the lock file is left as it was; an existing pin is never replaced silently.
"""

from __future__ import annotations

import hashlib
import http.server
import threading
import zipfile

import numpy as np
import pytest
import torch

from calbench.data.download import ChecksumError, fetch
from calbench.lockfile import LOCK_NAME, Lock, PinError
from calbench.models import pretrained as P
from calbench.models.staging import download_checkpoint

KEY = "checkpoints/cifar10/m/checkpoint.pt"


def _weights(path, arch="focal_resnet50", k=10, seed=0):
    torch.manual_seed(seed)
    torch.save(P.build_architecture(arch, k).state_dict(), path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _entry(expected_acc=None, sha=None):
    e = {
        "dataset": "cifar10",
        "source": "checkpoint",
        "arch": "focal_resnet50",
        "num_classes": 10,
        "checkpoint": {"filename": "resnet50.model", "urls": [], "sha256": sha},
    }
    if expected_acc is not None:
        e["expected_acc"] = expected_acc
    return e


def _lock_text(res):
    p = res / LOCK_NAME
    return p.read_text() if p.exists() else None


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    d = tmp_path_factory.mktemp("w")
    digest = _weights(d / "resnet50.model")
    return d / "resnet50.model", digest


def test_a_wrong_local_file_is_refused_and_nothing_is_pinned(tmp_path):
    res = tmp_path / "resources"
    for wrong, why in (
        (b"not a checkpoint at all", "not proven"),
        (None, "not proven"),  # a real state dict of another architecture
    ):
        f = tmp_path / "resnet50.model"
        if wrong is None:
            _weights(f, arch="focal_resnet110")
        else:
            f.write_bytes(wrong)
        with pytest.raises(PinError, match=why):
            download_checkpoint("m", _entry(), res, local_file=f)
        assert _lock_text(res) is None
        assert not (res / KEY).exists()


def test_a_proven_local_file_is_pinned(tmp_path, good):
    res = tmp_path / "resources"
    dest = download_checkpoint("m", _entry(), res, local_file=good[0])
    rec = Lock(res / LOCK_NAME).get(KEY)
    assert rec["sha256"] == good[1] and "checked" in rec["source"]
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == good[1]


def test_expected_accuracy_needs_a_pin_on_purpose(tmp_path, good):
    res = tmp_path / "resources"
    with pytest.raises(PinError, match=r"expected accuracy \(94.1\).*--repin"):
        download_checkpoint("m", _entry(expected_acc=94.1), res, local_file=good[0])
    assert _lock_text(res) is None and not (res / KEY).exists()
    download_checkpoint("m", _entry(expected_acc=94.1), res, local_file=good[0], repin=True)
    assert Lock(res / LOCK_NAME).get(KEY)["sha256"] == good[1]
    # even on purpose, a file that does not load into the architecture is refused
    bad = tmp_path / "bad" / "resnet50.model"
    bad.parent.mkdir()
    bad.write_bytes(b"junk")
    with pytest.raises(PinError, match="not proven"):
        download_checkpoint(
            "m", _entry(expected_acc=94.1), tmp_path / "r2", local_file=bad, repin=True
        )


def test_an_existing_pin_is_never_replaced_silently(tmp_path, good, capsys):
    res = tmp_path / "resources"
    download_checkpoint("m", _entry(), res, local_file=good[0])
    before = _lock_text(res)
    other = tmp_path / "o" / "resnet50.model"
    other.parent.mkdir()
    new_digest = _weights(other, seed=1)
    with pytest.raises(ChecksumError, match="--repin"):
        download_checkpoint("m", _entry(), res, local_file=other)
    assert _lock_text(res) == before
    download_checkpoint("m", _entry(), res, local_file=other, repin=True)
    assert Lock(res / LOCK_NAME).get(KEY)["sha256"] == new_digest
    assert hashlib.sha256((res / KEY).read_bytes()).hexdigest() == new_digest
    assert "re-pinned" in capsys.readouterr().err
    # a published checksum is not re-pinned
    with pytest.raises(PinError, match="published checksum"):
        download_checkpoint("m", _entry(sha=new_digest), res, local_file=other, repin=True)


def test_a_stray_unrecorded_file_in_resources_is_not_pinned_unproven(tmp_path):
    res = tmp_path / "resources"
    (res / KEY).parent.mkdir(parents=True)
    (res / KEY).write_bytes(b"left here by hand")
    with pytest.raises(PinError, match="not proven"):
        download_checkpoint("m", _entry(), res)
    assert _lock_text(res) is None


def test_lock_record_refuses_to_replace_a_pin_unless_told(tmp_path):
    lock = Lock(tmp_path / LOCK_NAME)
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"a")
    b.write_bytes(b"b")
    lock.record("k", a)
    with pytest.raises(PinError, match="already pinned"):
        lock.record("k", b)
    assert lock.get("k")["sha256"] == hashlib.sha256(b"a").hexdigest()
    lock.record("k", b, replace=True)
    assert lock.get("k")["sha256"] == hashlib.sha256(b"b").hexdigest()


def test_fetch_without_any_checksum_is_refused(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "f.bin").write_bytes(b"x")
    with pytest.raises(ChecksumError, match="no checksum"):
        fetch(tmp_path / "out" / "f.bin", mirrors=[tmp_path / "m"])
    assert not (tmp_path / "out" / "f.bin").exists()


def test_hub_archive_from_a_mirror_must_name_the_pinned_commit(tmp_path):
    from calbench.models.staging import prove_hub_archive

    ref = "e8a3ffb2383c0be657199cd668d763b2233db91d"
    hub = {"repo": "o/r", "ref": ref}
    z = tmp_path / "a.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr(f"r-{ref}/hubconf.py", "x = 1\n")
    with pytest.raises(PinError, match="not GitHub's archive"):
        prove_hub_archive(z, hub)
    with zipfile.ZipFile(z, "a") as zf:
        zf.comment = ref.encode()
    prove_hub_archive(z, hub)
    with pytest.raises(PinError, match="not GitHub's archive"):
        prove_hub_archive(z, {"repo": "o/r", "ref": "0" * 40})


# --------------------------------------------------------------------------- imported logits


def _logits_entry():
    return {
        "dataset": "cifar10",
        "source": "logits",
        "num_classes": 3,
        "logits": {"format": "npz", "file": "m.npz", "urls": ["http://127.0.0.1:9/m.npz"]},
    }


def test_a_local_logits_file_pins_only_after_it_parses_with_the_entrys_shapes(tmp_path):
    from calbench.logits_sources import obtain

    res = tmp_path / "resources"
    key = "logits/cifar10/m/m.npz"
    junk = tmp_path / "junk" / "m.npz"
    junk.parent.mkdir()
    junk.write_bytes(b"PK not really")
    with pytest.raises(PinError, match="does not parse as npz"):
        obtain("m", _logits_entry(), res, local_file=junk)
    assert _lock_text(res) is None
    wide = tmp_path / "wide" / "m.npz"
    wide.parent.mkdir()
    np.savez(wide, logits=np.zeros((4, 5), np.float32), labels=np.arange(4))
    with pytest.raises(PinError, match="5 classes.*num_classes is 3"):
        obtain("m", _logits_entry(), res, local_file=wide)
    assert _lock_text(res) is None
    ok = tmp_path / "ok" / "m.npz"
    ok.parent.mkdir()
    np.savez(ok, logits=np.zeros((4, 3), np.float32), labels=np.array([0, 1, 2, 0]))
    got = obtain("m", _logits_entry(), res, local_file=ok)
    assert got["files"][0]["status"] == "pinned on first use"
    assert Lock(res / LOCK_NAME).get(key)["sha256"] == hashlib.sha256(ok.read_bytes()).hexdigest()
    # another (parseable) file later: refused against the pin, unless re-pinned on purpose
    other = tmp_path / "other" / "m.npz"
    other.parent.mkdir()
    np.savez(other, logits=np.ones((4, 3), np.float32), labels=np.array([0, 1, 2, 1]))
    before = _lock_text(res)
    with pytest.raises(PinError, match="--repin"):
        obtain("m", _logits_entry(), res, local_file=other)
    assert _lock_text(res) == before
    obtain("m", _logits_entry(), res, local_file=other, repin=True)
    assert (
        Lock(res / LOCK_NAME).get(key)["sha256"] == hashlib.sha256(other.read_bytes()).hexdigest()
    )


# --------------------------------------------------------------------------- corrupted sets


def test_a_corrupted_member_is_pinned_only_once_its_labels_match(tmp_path):
    from calbench.shift import datasets as D
    from shift.test_shift_datasets import md5, write_c_archive, write_cifar_test

    root = tmp_path / "cifar"
    _, labels, test_md5 = write_cifar_test(root)
    tar = tmp_path / "c.tar"
    write_c_archive(tar, labels, label_offset=1)  # labels of another test set
    out = tmp_path / "d" / "contrast.npy"
    with pytest.raises(ValueError, match="labels"):
        D.extract_published(
            "cifar10", "contrast", archive=tar, data_root=root, out=out,
            options={"md5": md5(tar)}, dataset_options={"test_md5": test_md5},
        )  # fmt: skip
    assert not (out.parent / "pins").exists()


# --------------------------------------------------------------------------- network calls


class _Flaky(http.server.BaseHTTPRequestHandler):
    """``GET /<n>/<name>``: answers 503 to the first n requests of that path, then 200 + body;
    ``GET /stall/<name>``: never answers."""

    counts: dict = {}

    def do_GET(self):  # noqa: N802
        if self.path.startswith("/stall/"):
            threading.Event().wait(5)
            return
        n = int(self.path.split("/")[1])
        seen = self.counts.get(self.path, 0)
        self.counts[self.path] = seen + 1
        if seen < n:
            self.send_response(503)
            self.end_headers()
            return
        body = b"payload"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a, **k):
        pass


@pytest.fixture
def flaky(monkeypatch):
    import calbench.data.download as dl

    monkeypatch.setattr(dl, "BACKOFF", 0.01)
    _Flaky.counts = {}
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_transient_503_is_retried_then_succeeds(flaky, tmp_path):
    sha = hashlib.sha256(b"payload").hexdigest()
    got = fetch(tmp_path / "f.bin", urls=[f"{flaky}/2/f.bin"], sha256=sha, timeout=2)
    assert got.read_bytes() == b"payload"
    assert _Flaky.counts["/2/f.bin"] == 3


def test_retries_are_bounded_and_the_error_names_host_and_file(flaky, tmp_path):
    host = flaky.split("//")[1]
    with pytest.raises(
        FileNotFoundError, match=rf"{host}: could not get f.bin \(HTTP 503.*3 attempts"
    ):
        fetch(tmp_path / "f.bin", urls=[f"{flaky}/9/f.bin"], sha256="0" * 64, timeout=2)
    assert _Flaky.counts["/9/f.bin"] == 3
    assert not (tmp_path / "f.bin").exists()


def test_a_stalled_server_times_out(flaky, tmp_path):
    host = flaky.split("//")[1]
    with pytest.raises(FileNotFoundError, match=rf"{host}: could not get f.bin \(.*timed out"):
        fetch(tmp_path / "f.bin", urls=[f"{flaky}/stall/f.bin"], sha256="0" * 64, timeout=0.3)


def test_service_json_calls_are_retried_and_named(flaky):
    from calbench.logits_sources import services as S

    host = flaky.split("//")[1]
    with pytest.raises(S.DownloadError, match=rf"{host}: could not get listing.json \(HTTP 503"):
        S.get_json(f"{flaky}/9/listing.json", timeout=2)
    assert _Flaky.counts["/9/listing.json"] == 3
    with pytest.raises(S.DownloadError, match="did not answer with JSON"):
        S.get_json(f"{flaky}/1/x.json", timeout=2)  # 503 once, then a non-JSON body


def test_every_network_call_goes_through_the_retrying_helper():
    """No module opens URLs itself: urlopen appears only in the two request helpers."""
    import pathlib

    import calbench

    src = pathlib.Path(calbench.__file__).parent
    users = sorted(
        str(p.relative_to(src)) for p in src.rglob("*.py") if "urlopen(" in p.read_text()
    )
    assert users == ["data/download.py", "logits_sources/services.py"]
