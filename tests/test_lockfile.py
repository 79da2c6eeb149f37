"""Pin-on-first-use lock file (calbench.lockfile)."""

import hashlib
import json
import threading

import pytest

from calbench.lockfile import LOCK_NAME, Lock, PinError, lock_key, pin_status


def test_first_use_records_then_verifies(tmp_path):
    f = tmp_path / "checkpoints" / "w.pt"
    f.parent.mkdir()
    f.write_bytes(b"weights")
    lock = Lock(tmp_path / LOCK_NAME)
    key = lock_key(f, tmp_path)
    assert key == "checkpoints/w.pt"
    assert pin_status(key, None, tmp_path) == "unpinned"
    assert lock.check(key, f, source="http://x/w.pt") == "first-use"
    doc = json.loads((tmp_path / LOCK_NAME).read_text())
    assert doc["files"][key] == {
        "sha256": hashlib.sha256(b"weights").hexdigest(),
        "size": 7,
        "source": "http://x/w.pt",
    }
    assert pin_status(key, None, tmp_path) == "first-use"
    assert lock.check(key, f) == "first-use"  # verifies, does not re-record
    f.write_bytes(b"weightz")  # same size, flipped byte
    with pytest.raises(PinError, match="pinned .* on first use; delete the file"):
        lock.check(key, f)
    f.write_bytes(b"weights!")
    with pytest.raises(PinError, match="has 8 bytes but .* pinned 7"):
        lock.check(key, f)


def test_published_pin_and_strict(tmp_path):
    f = tmp_path / "a.bin"
    f.write_bytes(b"x")
    lock = Lock(tmp_path / LOCK_NAME)
    assert lock.check("a.bin", f, published="abc") == "published"
    assert pin_status("a.bin", "abc", tmp_path) == "published"
    with pytest.raises(PinError, match="no published checksum and strict checksums are on"):
        lock.check("a.bin", f, strict=True)
    assert not (tmp_path / LOCK_NAME).exists()
    assert lock.check("a.bin", f, record=False) == "unpinned"
    assert not (tmp_path / LOCK_NAME).exists()


def test_corrupt_lock_file_is_one_line_error(tmp_path):
    (tmp_path / LOCK_NAME).write_text("{not json")
    with pytest.raises(PinError, match="not valid JSON") as exc:
        Lock(tmp_path / LOCK_NAME).get("k")
    assert "\n" not in str(exc.value)
    (tmp_path / LOCK_NAME).write_text("[]")
    with pytest.raises(PinError, match="lacks a 'files' mapping"):
        Lock(tmp_path / LOCK_NAME).get("k")


def test_parallel_records_keep_every_entry(tmp_path):
    lock = Lock(tmp_path / LOCK_NAME)
    files = []
    for i in range(8):
        f = tmp_path / f"f{i}"
        f.write_bytes(bytes([i]) * 10)
        files.append(f)
    threads = [threading.Thread(target=lock.record, args=(f.name, f)) for f in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(lock.entries()) == sorted(f.name for f in files)
