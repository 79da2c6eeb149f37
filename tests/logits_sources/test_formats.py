"""Readers of logits files, on files written here in each published format.

coursework: ``torch.save`` of a float32 tensor (zip container) + ``targets.txt`` (ints joined by
"\\n", no trailing newline). kull_pickle: ``pickle.dump([(z_val, y_val), (z_test, y_test)])``
with (n, 1) labels of uint8 / int32 / int64 at protocol 3 (Python 3.6's default, as the files
were written). npz: the user's arrays.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from calbench.logits_sources import formats as F


def _logits(n, k, seed=0):
    return np.random.default_rng(seed).normal(size=(n, k)).astype(np.float32)


# ------------------------------------------------------------------ coursework


def _write_coursework(folder, stem, z, y):
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    torch.save(torch.from_numpy(z), folder / f"{stem}.pt")
    (folder / "targets.txt").write_text("\n".join(str(int(v)) for v in y))
    return folder / f"{stem}.pt", folder / "targets.txt"


def test_coursework_reads_tensor_and_targets(tmp_path):
    z = _logits(30, 10)
    y = np.arange(30) % 10
    pt, tg = _write_coursework(tmp_path / "cifar10_v1", "resnet18", z, y)
    assert pt.read_bytes()[:2] == b"PK"  # the zip-based container
    assert not tg.read_bytes().endswith(b"\n")
    imp = F.read("coursework", pt, targets=tg)
    assert imp.logits.dtype == np.float32 and imp.labels.dtype == np.int64
    np.testing.assert_array_equal(imp.logits, z)
    np.testing.assert_array_equal(imp.labels, y)
    assert imp.split is None


def test_coursework_missing_targets_needs_explicit_class_blocks(tmp_path):
    import torch

    z = _logits(20, 4)
    torch.save(torch.from_numpy(z), tmp_path / "m.pt")
    with pytest.raises(ValueError, match="class_blocks"):
        F.read("coursework", tmp_path / "m.pt")
    imp = F.read("coursework", tmp_path / "m.pt", synthesise_targets=True)
    np.testing.assert_array_equal(imp.labels, [0] * 5 + [1] * 5 + [2] * 5 + [3] * 5)
    with pytest.raises(ValueError, match="multiple of the classes"):
        F.class_blocks(21, 4)


def test_coursework_targets_errors(tmp_path):
    z = _logits(5, 3)
    pt, tg = _write_coursework(tmp_path, "m", z, [0, 1, 2, 0, 1])
    tg.write_text("0\n1\n2\n0\n1\n")  # one trailing newline is tolerated
    assert F.read("coursework", pt, targets=tg).labels.tolist() == [0, 1, 2, 0, 1]
    tg.write_text("0\n1\n2\n0")
    with pytest.raises(ValueError, match="4 labels but the logits have 5 rows"):
        F.read("coursework", pt, targets=tg)
    tg.write_text("0\n1\nx\n0\n1")
    with pytest.raises(ValueError, match="line 3"):
        F.read("coursework", pt, targets=tg)
    tg.write_text("0\n1\n2\n0\n7")
    with pytest.raises(ValueError, match="3 classes"):
        F.read("coursework", pt, targets=tg)


def test_coursework_wrong_file_is_one_line_error(tmp_path):
    import torch

    bad = tmp_path / "notes.pt"
    bad.write_bytes(b"hello")
    with pytest.raises(ValueError, match="not a torch-saved tensor") as e:
        F.read("coursework", bad, targets=None, synthesise_targets=True)
    assert "\n" not in str(e.value)
    torch.save({"a": torch.zeros(3)}, tmp_path / "dict.pt")
    with pytest.raises(ValueError, match="holds a dict"):
        F.read("coursework", tmp_path / "dict.pt", synthesise_targets=True)
    # a pickle with code in it is refused by weights_only
    with open(tmp_path / "evil.pt", "wb") as fh:
        pickle.dump(_Evil(), fh)
    with pytest.raises(ValueError, match="not a torch-saved tensor"):
        F.read("coursework", tmp_path / "evil.pt", synthesise_targets=True)
    torch.save(torch.zeros(4, 3, dtype=torch.int64), tmp_path / "int.pt")
    with pytest.raises(ValueError, match="expected float32"):
        F.read("coursework", tmp_path / "int.pt", synthesise_targets=True)


class _Evil:
    def __reduce__(self):
        import os

        return (os.system, ("echo pwned",))


# ------------------------------------------------------------------ kull_pickle


def _write_kull(path, nv, nt, k, val_dtype, test_dtype, seed=0):
    rng = np.random.default_rng(seed)
    zv, zt = _logits(nv, k, seed), _logits(nt, k, seed + 1)
    yv = rng.integers(0, k, size=(nv, 1)).astype(val_dtype)
    yt = rng.integers(0, k, size=(nt, 1)).astype(test_dtype)
    with open(path, "wb") as fh:
        pickle.dump([(zv, yv), (zt, yt)], fh, protocol=3)
    return zv, yv, zt, yt


@pytest.mark.parametrize("val_dtype", [np.uint8, np.int32, np.int64])
def test_kull_pickle_two_parts(tmp_path, val_dtype):
    p = tmp_path / "probs_resnet110_c10_logits.p"
    zv, yv, zt, yt = _write_kull(p, 50, 80, 10, val_dtype, np.int64)
    imp = F.read("kull_pickle", p)
    np.testing.assert_array_equal(imp.logits, np.concatenate([zv, zt]))
    np.testing.assert_array_equal(imp.labels, np.concatenate([yv.ravel(), yt.ravel()]))
    assert imp.labels.dtype == np.int64
    val, test = imp.split
    np.testing.assert_array_equal(val, np.arange(50))
    np.testing.assert_array_equal(test, np.arange(50, 130))


def test_kull_pickle_single_tuple_uses_dirichletcal_split(tmp_path):
    sklearn = pytest.importorskip("sklearn.model_selection")
    n = 5100
    z = _logits(n, 3)
    y = (np.arange(n) % 3).reshape(-1, 1)
    with open(tmp_path / "one.p", "wb") as fh:
        pickle.dump((z, y), fh, protocol=3)
    imp = F.read("kull_pickle", tmp_path / "one.p")
    train, test = sklearn.train_test_split(np.arange(n), test_size=n - 5000, random_state=15)
    np.testing.assert_array_equal(imp.split[0], train)
    np.testing.assert_array_equal(imp.split[1], test)


def test_kull_pickle_refuses_code_and_wrong_shapes(tmp_path):
    evil = tmp_path / "evil.p"
    with open(evil, "wb") as fh:
        pickle.dump([(_Evil(), 1), (2, 3)], fh)
    with pytest.raises(ValueError, match="os.system is not allowed|posix.system is not allowed"):
        F.read("kull_pickle", evil)
    with open(tmp_path / "dict.p", "wb") as fh:
        pickle.dump({"a": 1}, fh)
    with pytest.raises(ValueError, match="expected \\[\\(logits_val"):
        F.read("kull_pickle", tmp_path / "dict.p")
    with open(tmp_path / "onehot.p", "wb") as fh:
        pickle.dump([(_logits(4, 3), np.eye(3)[[0, 1, 2, 0]]), (_logits(4, 3), np.zeros((4, 1), int))], fh)
    with pytest.raises(ValueError, match="integer class indices"):
        F.read("kull_pickle", tmp_path / "onehot.p")
    (tmp_path / "text.p").write_text("not a pickle")
    with pytest.raises(ValueError, match="not a pickle of numpy arrays") as e:
        F.read("kull_pickle", tmp_path / "text.p")
    assert "\n" not in str(e.value)


def test_numpy_only_unpickler_allows_object_free_arrays_only(tmp_path):
    p = tmp_path / "obj.p"
    with open(p, "wb") as fh:
        pickle.dump([(np.array([[1.0, 2.0]], dtype=object), np.zeros((1, 1), int))] * 2, fh)
    with pytest.raises(ValueError):
        F.read("kull_pickle", p)


# ------------------------------------------------------------------ npz


def test_npz_with_and_without_split(tmp_path):
    z, y = _logits(10, 3), np.arange(10) % 3
    np.savez(tmp_path / "a.npz", logits=z, labels=y.reshape(-1, 1))
    imp = F.read("npz", tmp_path / "a.npz")
    np.testing.assert_array_equal(imp.labels, y)
    assert imp.split is None
    with pytest.raises(ValueError, match="no val_idx/test_idx"):
        F.read("npz", tmp_path / "a.npz", use_split=True)
    np.savez(tmp_path / "b.npz", logits=z, labels=y, val_idx=[0, 2, 4, 6, 8], test_idx=[1, 3, 5, 7, 9])
    val, test = F.read("npz", tmp_path / "b.npz", use_split=True).split
    assert val.tolist() == [0, 2, 4, 6, 8] and test.dtype == np.int64
    np.savez(tmp_path / "c.npz", logits=z, labels=y, val_idx=[0, 1], test_idx=[1, 2])
    with pytest.raises(ValueError, match="in both val_idx and test_idx"):
        F.read("npz", tmp_path / "c.npz", use_split=True)


def test_npz_errors(tmp_path):
    np.savez(tmp_path / "x.npz", scores=_logits(3, 2))
    with pytest.raises(ValueError, match="lacks \\['logits', 'labels'\\]"):
        F.read("npz", tmp_path / "x.npz")
    (tmp_path / "y.npz").write_text("nope")
    with pytest.raises(ValueError, match="not an .npz \\(zip\\) archive"):
        F.read("npz", tmp_path / "y.npz")
    np.savez(tmp_path / "z.npz", logits=np.array([[np.nan, 1.0]]), labels=[0])
    with pytest.raises(ValueError, match="NaN"):
        F.read("npz", tmp_path / "z.npz")
    with pytest.raises(FileNotFoundError):
        F.read("npz", tmp_path / "missing.npz")
    with pytest.raises(ValueError, match="unknown logits format"):
        F.read("hdf5", tmp_path / "z.npz")


def test_kull_pickle_written_by_numpy_1(tmp_path):
    """The 2018 files name numpy 1.x's module (numpy.core.multiarray) in their GLOBAL opcodes."""
    zv, zt = _logits(6, 4), _logits(7, 4, 1)
    yv, yt = np.zeros((6, 1), np.uint8), np.ones((7, 1), np.int64)
    data = pickle.dumps([(zv, yv), (zt, yt)], protocol=3)
    legacy = data.replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")
    assert legacy != data
    (tmp_path / "old.p").write_bytes(legacy)
    imp = F.read("kull_pickle", tmp_path / "old.p")
    np.testing.assert_array_equal(imp.logits, np.concatenate([zv, zt]))
    assert imp.labels.tolist() == [0] * 6 + [1] * 7


# ------------------------------------------------------------------ torch's zip container without torch


@pytest.mark.parametrize(
    "make",
    [
        lambda t: t,  # contiguous float32
        lambda t: t.t().contiguous().t(),  # column-major strides
        lambda t: torch_cat_slice(t),  # a view with a storage offset
        lambda t: t.double(),
        lambda t: t.half(),
    ],
)
def test_pt_zip_reader_agrees_with_torch_load_weights_only(tmp_path, make):
    import torch

    t = make(torch.from_numpy(_logits(7, 5)))
    torch.save(t, tmp_path / "t.pt")
    want = torch.load(tmp_path / "t.pt", weights_only=True).to(torch.float32).numpy()
    got = F.read_pt_zip(tmp_path / "t.pt").astype(np.float32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(F.read_torch_tensor(tmp_path / "t.pt"), want)


def torch_cat_slice(t):
    import torch

    return torch.cat([torch.zeros(3, t.shape[1]), t])[3:]


def test_pt_reader_falls_back_to_torch_for_other_containers(tmp_path):
    import torch

    z = _logits(6, 3)
    torch.save(torch.from_numpy(z), tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    np.testing.assert_array_equal(F.read_torch_tensor(tmp_path / "legacy.pt"), z)
    torch.save([torch.from_numpy(z)], tmp_path / "list.pt")
    with pytest.raises(F.Unsupported):
        F.read_pt_zip(tmp_path / "list.pt")
    with pytest.raises(ValueError, match="holds a list"):
        F.read_torch_tensor(tmp_path / "list.pt")


def test_pt_reader_needs_no_torch(tmp_path):
    import subprocess
    import sys

    import torch

    torch.save(torch.from_numpy(_logits(4, 3)), tmp_path / "t.pt")
    code = (
        "import sys; from calbench.logits_sources import formats as F; "
        f"z = F.read_torch_tensor({str(tmp_path / 't.pt')!r}); "
        "assert z.shape == (4, 3); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_torch_container_whose_storage_disagrees_with_its_record_is_refused(tmp_path):
    """Sizes are checked before the storage is read (issue 33, group 9): a storage longer than
    its tensor record (a crafted or bomb member) is one line, never read into memory."""
    import zipfile

    import torch

    torch.save(torch.zeros(4, 3), tmp_path / "ok.pt")
    with zipfile.ZipFile(tmp_path / "ok.pt") as src, zipfile.ZipFile(tmp_path / "big.pt", "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if "/data/" in info.filename and not info.filename.endswith(".pkl"):
                data = bytes(4 * 12 * 1000)  # 1000 times the 12 floats the record claims
            dst.writestr(info.filename, data, compress_type=zipfile.ZIP_DEFLATED)
    with pytest.raises(ValueError, match="claims 12 elements .* holds 48000 bytes") as e:
        F.read_torch_tensor(tmp_path / "big.pt")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("fmt", ["coursework", "kull_pickle", "npz"])
def test_a_fifo_or_device_given_as_the_file_is_not_a_regular_file(tmp_path, fmt):
    import os

    os.mkfifo(tmp_path / "pipe")  # reading it would block forever
    for path in (tmp_path / "pipe", "/dev/zero"):
        with pytest.raises(ValueError, match="is not a regular file"):
            F.read(fmt, path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        F.read(fmt, tmp_path / "absent.npz")


# ------------------------------------------------------------------ float64 and non-finite logits


def _offset64(n=400, k=5, offset=1e7, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k)) * 0.5
    z[np.arange(n), y] += 0.3
    return z + offset, y


def _write64(tmp_path, fmt, z, y):
    """``z`` (float64) in each format: npz, kull_pickle, and both torch containers."""
    if fmt == "npz":
        np.savez(tmp_path / "a.npz", logits=z, labels=y)
        return F.read("npz", tmp_path / "a.npz")
    if fmt == "kull_pickle":
        with open(tmp_path / "a.p", "wb") as fh:
            pickle.dump([(z[:200], y[:200, None]), (z[200:], y[200:, None])], fh, protocol=3)
        return F.read("kull_pickle", tmp_path / "a.p")
    import torch

    legacy = fmt == "coursework_legacy"  # read by torch.load, not the zip reader
    torch.save(torch.from_numpy(z), tmp_path / "a.pt", _use_new_zipfile_serialization=not legacy)
    (tmp_path / "targets.txt").write_text("\n".join(map(str, y)))
    return F.read("coursework", tmp_path / "a.pt", targets=tmp_path / "targets.txt")


@pytest.mark.parametrize("fmt", ["npz", "kull_pickle", "coursework", "coursework_legacy"])
def test_float64_logits_with_a_row_offset_import_without_losing_precision(tmp_path, fmt):
    z, y = _offset64()
    imp = _write64(tmp_path, fmt, z, y)
    assert imp.logits.dtype == np.float32
    # a direct float32 cast (the spacing at 1e7 is 1) ties classes and loses accuracy
    assert (z.astype(np.float32).argmax(1) == y).mean() < (z.argmax(1) == y).mean()
    np.testing.assert_array_equal(imp.logits.argmax(1), z.argmax(1))
    np.testing.assert_allclose(imp.logits, z - z.max(axis=1, keepdims=True), atol=1e-6)


@pytest.mark.parametrize("fmt", ["npz", "kull_pickle", "coursework", "coursework_legacy"])
def test_float32_logits_saved_as_float64_import_bit_for_bit(tmp_path, fmt):
    z32 = (_logits(400, 5) * 20).astype(np.float32)
    imp = _write64(tmp_path, fmt, z32.astype(np.float64), np.arange(400) % 5)
    np.testing.assert_array_equal(imp.logits, z32)


def test_masked_and_out_of_range_float64_logits_are_one_line_errors(tmp_path):
    z = np.random.default_rng(0).normal(size=(8, 4))
    z[:, 0] = -np.inf
    np.savez(tmp_path / "m.npz", logits=z, labels=np.ones(8, int))
    with pytest.raises(ValueError, match=r"m.npz: logits contain 8 -inf values \(masked") as e:
        F.read("npz", tmp_path / "m.npz")
    assert "\n" not in str(e.value)
    z = np.array([[1e39, -1e39, 0.0], [0.0, 1.0, 2.0]])
    np.savez(tmp_path / "b.npz", logits=z, labels=[0, 1])
    with np.errstate(all="raise"):  # no warning printed besides the error
        with pytest.raises(ValueError, match="b.npz: logits differ within a row by 2e\\+39"):
            F.read("npz", tmp_path / "b.npz")
    big = np.array([[1e39, 0.9e39], [-1e39, -1.1e39]])  # beyond float32's range: shifted
    np.savez(tmp_path / "c.npz", logits=big, labels=[0, 1])
    assert F.read("npz", tmp_path / "c.npz").logits.max() == 0
