import hashlib

import numpy as np
import pytest

from calbench.io import array_digest, atomic_path, atomic_write_text, file_digest


def test_atomic_path_moves_file_into_place_and_keeps_suffix(tmp_path):
    dest = tmp_path / "sub" / "out.npz"
    with atomic_path(dest) as tmp:
        assert tmp.suffix == ".npz" and tmp.parent == dest.parent
        np.savez(tmp, a=np.arange(3))
    assert np.load(dest)["a"].tolist() == [0, 1, 2]
    assert [p.name for p in dest.parent.iterdir()] == ["out.npz"]


def test_atomic_path_leaves_nothing_on_error(tmp_path):
    dest = tmp_path / "out.txt"
    with pytest.raises(RuntimeError), atomic_path(dest) as tmp:
        tmp.write_text("partial")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_keeps_old_file_on_error(tmp_path):
    dest = tmp_path / "out.txt"
    atomic_write_text(dest, "old")
    with pytest.raises(KeyboardInterrupt), atomic_path(dest) as tmp:
        tmp.write_text("new")
        raise KeyboardInterrupt
    assert dest.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_file_digest_matches_hashlib(tmp_path):
    f = tmp_path / "f.bin"
    data = bytes(range(256)) * 5000
    f.write_bytes(data)
    assert file_digest(f) == hashlib.sha256(data).hexdigest()
    assert file_digest(f, "md5", chunk=1000) == hashlib.md5(data).hexdigest()


def test_array_digest_depends_on_order_dtype_and_shape():
    a = np.arange(6, dtype=np.int64)
    assert array_digest(a) == array_digest(a.copy())
    assert array_digest(a) != array_digest(a[::-1])
    assert array_digest(a) != array_digest(a.astype(np.int32))
    assert array_digest(a) != array_digest(a.reshape(2, 3))


def test_atomic_path_gives_the_mode_a_plain_open_would(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
        (tmp_path / "b.txt").write_text("x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == (tmp_path / "b.txt").stat().st_mode & 0o777 == 0o644
