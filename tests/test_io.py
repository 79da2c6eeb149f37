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
    assert (
        (tmp_path / "a.txt").stat().st_mode & 0o777
        == (tmp_path / "b.txt").stat().st_mode & 0o777
        == 0o644
    )


# --- sizes are checked before anything is allocated (issue 33, group 9) -----------------------
def _npy_bytes(shape, dtype="<f4", payload=b""):
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": dtype, "fortran_order": False, "shape": shape}
    )
    return buf.getvalue() + payload


def _crafted_npz(path, members):
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(f"{name}.npy", data)


def test_a_small_npz_claiming_a_huge_shape_is_refused_before_allocation(tmp_path, monkeypatch):
    from calbench.io import read_npz

    path = tmp_path / "huge.npz"
    _crafted_npz(path, {"logits": _npy_bytes((10**10, 10), payload=b"\0" * 24_000)})
    assert path.stat().st_size < 30_000

    def no_load(*a, **k):  # the arrays must never be read
        raise AssertionError("np.load reached")

    monkeypatch.setattr(np, "load", no_load)
    with pytest.raises(
        ValueError, match=r"claims shape \(10000000000, 10\) of float32 \(400.0 GB\)"
    ) as info:
        read_npz(path, "logits file", "cache it again")
    assert "\n" not in str(info.value) and str(info.value).endswith("cache it again")


def test_a_zip_bomb_npz_is_refused_by_its_declared_size(tmp_path, monkeypatch):
    import calbench.io as cio

    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, logits=np.zeros((1 << 20, 4), np.float32), labels=np.zeros(4))
    assert path.stat().st_size < 100_000  # 16 MB of zeros deflate ~1000-fold
    monkeypatch.setattr(cio, "NPZ_SMALL_BYTES", 1 << 20)  # the 64 MB floor, scaled down
    with pytest.raises(ValueError, match=r"declares 16.8 MB of arrays in a file of .* zip bomb"):
        cio.read_npz(path, "logits file", "cache it again")
    monkeypatch.setattr(cio, "NPZ_SMALL_BYTES", 64 << 20)
    assert cio.read_npz(path, "logits file", "x")["logits"].shape == (1 << 20, 4)
    with pytest.raises(ValueError, match="at most 1.0 MB"):
        cio.read_npz(path, "logits file", "x", max_bytes=1 << 20)


def test_an_npz_of_objects_or_a_damaged_header_is_one_line(tmp_path):
    from calbench.io import read_npz

    path = tmp_path / "obj.npz"
    np.savez(path, names=np.array(["a", None], dtype=object))
    with pytest.raises(ValueError, match="holds Python objects"):
        read_npz(path, "logits file", "fix")
    _crafted_npz(path, {"logits": b"\x93NUMPY\x01\x00garbage"})
    with pytest.raises(ValueError, match="cannot read logits file .*damaged") as info:
        read_npz(path, "logits file", "fix")
    assert "\n" not in str(info.value)


def test_bytes_digest_and_hasher_are_hashlib_s():
    from calbench.io import bytes_digest, hasher

    assert bytes_digest(b"abc") == hashlib.sha256(b"abc").hexdigest()
    assert bytes_digest("é") == hashlib.sha256("é".encode()).hexdigest()
    assert bytes_digest(b"abc", "md5") == hashlib.md5(b"abc").hexdigest()
    h = hasher()
    h.update(b"a")
    h.update(b"bc")
    assert h.hexdigest() == bytes_digest(b"abc")


#: the modules that still build their digests with hashlib themselves rather than through
#: calbench.io (the one owner of hashing): none; a module added here fails the test below
HASHLIB_NOT_YET_MOVED: set[str] = set()


def test_only_calbench_io_calls_hashlib():
    """One digest function: every file, array, text and code digest of the library and the
    workflow goes through calbench.io (code inputs, spec files, splits, kept calibrators,
    plug-in code), so they cannot drift apart in what they hash."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    lib = root / "src" / "calbench"
    users = set()
    for path in lib.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names] if isinstance(node, ast.Import)
                else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            )  # fmt: skip
            if any(n.split(".")[0] == "hashlib" for n in names):
                users.add(path.relative_to(lib).as_posix())
    assert users - {"io.py"} == HASHLIB_NOT_YET_MOVED
    rules = [root / "Snakefile", *(root / "workflow").rglob("*.smk")]
    assert [p.name for p in rules if "hashlib" in p.read_text()] == []
