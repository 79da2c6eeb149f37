import hashlib
import re
import struct

import numpy as np
import pytest
from sklearn.model_selection import train_test_split

from calbench.split import (
    check_logits_files_agree,
    index_sha256,
    save_split,
    split_digests,
    study_split,
)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 10, 11, 100, 101, 999, 1000, 10_001])
def test_study_split_equals_sklearn_train_test_split(n):
    train, test = train_test_split(np.arange(n), test_size=0.5, random_state=0)
    val_idx, test_idx = study_split(n)
    np.testing.assert_array_equal(val_idx, train)
    np.testing.assert_array_equal(test_idx, test)
    assert val_idx.dtype == np.int64 and test_idx.dtype == np.int64


@pytest.mark.parametrize("seed", [1, 42])
def test_study_split_other_seeds_equal_sklearn(seed):
    train, test = train_test_split(np.arange(77), test_size=0.5, random_state=seed)
    val_idx, test_idx = study_split(77, seed=seed)
    np.testing.assert_array_equal(val_idx, train)
    np.testing.assert_array_equal(test_idx, test)


@pytest.mark.parametrize("n", [2, 9, 10, 501])
def test_halves_partition_range_and_test_gets_the_ceiling(n):
    val_idx, test_idx = study_split(n)
    assert len(test_idx) == -(-n // 2) and len(val_idx) == n // 2
    np.testing.assert_array_equal(np.sort(np.concatenate([val_idx, test_idx])), np.arange(n))


def test_cifar_size_split_matches_the_published_indices_and_hashes():
    val_idx, test_idx = study_split(10_000)
    assert val_idx[:5].tolist() == [333, 6391, 4786, 357, 9854]
    assert test_idx[:5].tolist() == [9394, 898, 2398, 5906, 2343]
    d = split_digests(val_idx, test_idx)
    assert d["val_sorted_sha256"].startswith("9ce5f63a121e5bcf")
    assert d["test_order_sha256"].startswith("5c78e7cc747105ea")


def test_imagenet_size_split_matches_the_published_indices_and_hashes():
    val_idx, test_idx = study_split(50_000)
    assert val_idx[:5].tolist() == [21626, 4521, 3652, 22212, 17669]
    assert test_idx[:5].tolist() == [11841, 19602, 45519, 25747, 42642]
    assert len(val_idx) == len(test_idx) == 25_000
    d = split_digests(val_idx, test_idx)
    assert d["val_sorted_sha256"].startswith("8ec32f578ef8d0d0")
    assert d["test_order_sha256"].startswith("c01e443577884753")


def test_index_sha256_hashes_int64_little_endian_in_the_given_order():
    expected = hashlib.sha256(struct.pack("<3q", 5, 1, 300)).hexdigest()
    assert index_sha256(np.array([5, 1, 300], dtype=np.int32)) == expected
    assert index_sha256([1, 5, 300]) != expected


@pytest.mark.parametrize("n", [1, 0, -3, 2.0, True, "10"])
def test_study_split_refuses_bad_sizes(n):
    with pytest.raises(ValueError, match="n must be an integer >= 2"):
        study_split(n)


def test_study_split_refuses_bad_seed():
    with pytest.raises(ValueError, match="seed"):
        study_split(10, seed=-1)


def _meta(path, n=4, labels=None, order="h"):
    return {
        "path": path,
        "n": n,
        "labels": np.arange(n) % 2 if labels is None else labels,
        "order_hash": order,
    }


def test_logits_files_must_agree_on_n_order_and_labels():
    assert check_logits_files_agree([_meta("a"), _meta("b")]) == 4
    with pytest.raises(ValueError, match="b holds 5 samples but a holds 4"):
        check_logits_files_agree([_meta("a"), _meta("b", n=5)])
    with pytest.raises(ValueError, match="differ in sample order"):
        check_logits_files_agree([_meta("a"), _meta("b", order="other")])
    with pytest.raises(ValueError, match="different labels"):
        check_logits_files_agree([_meta("a"), _meta("b", labels=np.array([1, 1, 0, 0]))])
    with pytest.raises(ValueError, match="no logits files"):
        check_logits_files_agree([])


def test_save_split_writes_indices_and_digests(tmp_path):
    val_idx, test_idx = study_split(11)
    out = tmp_path / "s" / "split.npz"
    digests = save_split(out, val_idx, test_idx, order_hash=np.str_("abc"))
    with np.load(out, allow_pickle=False) as z:
        np.testing.assert_array_equal(z["val_idx"], val_idx)
        np.testing.assert_array_equal(z["test_idx"], test_idx)
        assert str(z["val_sorted_sha256"]) == digests["val_sorted_sha256"]
        assert str(z["test_order_sha256"]) == index_sha256(test_idx)
        assert str(z["order_hash"]) == "abc"
    assert [p.name for p in out.parent.iterdir()] == ["split.npz"]


def test_a_datasets_split_is_its_n_labels_and_order_not_a_models(tmp_path, monkeypatch):
    """The workflow's split of a dataset it reads comes from the dataset (its test labels and
    sample order, first ``limit`` samples), not from any model's logits: the study split of N,
    with the order hash and labels every model's logits are then checked against."""
    import calbench.data as data
    from calbench.logits import save_logits
    from calbench.split import load_halves, split_dataset

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (12, 1, 2, 2), dtype=np.uint8)
    labels = rng.integers(0, 3, 12)

    class Fake:
        def load_split(self, root, split):
            assert (root, split) == (tmp_path, "test")
            return images, labels

    monkeypatch.setattr(data, "get_dataset", lambda name, options=None: Fake())
    out = tmp_path / "split.npz"
    s = split_dataset("fake", tmp_path, out, limit=10)
    assert s["n"] == 10
    val, test = study_split(10)
    with np.load(out) as z:
        np.testing.assert_array_equal(z["val_idx"], val)
        np.testing.assert_array_equal(z["test_idx"], test)
        np.testing.assert_array_equal(z["labels"], labels[:10])
        assert str(z["order_hash"]) == data.order_hash(images[:10], labels[:10])
        assert "made_from" not in z.files  # no model's file is named: none was read
    # a model's logits of those samples in that order are read with it; of others, refused
    good, bad = tmp_path / "good.npz", tmp_path / "bad.npz"
    z = rng.normal(size=(10, 3)).astype(np.float32)
    save_logits(good, z, labels[:10], order_hash=data.order_hash(images[:10], labels[:10]),
                model="good", dataset="fake")  # fmt: skip
    save_logits(bad, z, labels[1:11], order_hash=data.order_hash(images[1:11], labels[1:11]),
                model="bad", dataset="fake")  # fmt: skip
    assert len(load_halves(good, out)["test"][1]) == 5
    with pytest.raises(ValueError, match="another order"):
        load_halves(bad, out)


# --- every split read is checked to partition the samples (issue 33, group 3) -----------------
@pytest.mark.parametrize(
    "val, test, message",
    [
        ([0, 1, 2, 3, 4], [0, 1, 2, 3, 4], "in both val_idx and test_idx"),  # val = test
        ([0, 1, 2, 3, 3], [5, 6, 7, 8, 9], "val_idx repeats 1 indices"),
        ([0, 1, 2, 3, 4], [5, 6, 7, 8, 8], "test_idx repeats 1 indices"),
        ([-1, 1, 2, 3, 4], [5, 6, 7, 8, 9], "holds indices in [-1, 4]"),
        ([0, 1, 2, 3, 4], [5, 6, 7, 8, 10], "holds indices in [5, 10]"),
        ([0, 1, 2, 3], [5, 6, 7, 8, 9], "covers 4 + 5 indices"),
        ([0.0, 1.0, 2.0, 3.0, 4.0], [5, 6, 7, 8, 9], "non-empty 1-D integer array"),
        ([], list(range(10)), "non-empty 1-D integer array"),
    ],
)
def test_a_split_file_that_is_no_partition_is_refused_when_read(tmp_path, val, test, message):
    from calbench.split import load_split

    path = tmp_path / "split.npz"
    np.savez(path, val_idx=np.array(val), test_idx=np.array(test))  # not through save_split
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        load_split(path, 10)
    assert "\n" not in str(info.value) and "rebuild" in str(info.value)


def test_save_split_refuses_halves_that_overlap(tmp_path):
    with pytest.raises(ValueError, match="in both val_idx and test_idx"):
        save_split(tmp_path / "s.npz", np.arange(5), np.arange(5))
    assert not list(tmp_path.iterdir())


def test_logits_with_other_labels_than_the_split_are_refused_naming_the_file(tmp_path):
    from calbench.logits import save_logits
    from calbench.split import load_halves, split_logits_files

    rng = np.random.default_rng(0)
    z = rng.normal(size=(10, 3)).astype(np.float32)
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    save_logits(a, z, np.arange(10) % 3, order_hash="h", model="a", dataset="d")
    split_logits_files([a], tmp_path / "split.npz")
    save_logits(b, z, np.arange(10) % 2, order_hash="h", model="a", dataset="d")
    with pytest.raises(ValueError, match=f"logits file {re.escape(str(b))} holds other labels"):
        load_halves(b, tmp_path / "split.npz")
    save_logits(b, z, np.arange(10) % 3, order_hash="other", model="a", dataset="d")
    with pytest.raises(ValueError, match=f"logits file {re.escape(str(b))} holds samples in another order"):
        load_halves(b, tmp_path / "split.npz")


# --- imported files (order known by labels only) mix with computed ones (issue 40, item 4) --
def _mixed(tmp_path, imported_labels, *, split_from="computed"):
    """A computed model's logits (order_hash of the dataset's samples) and an imported file's
    (order_hash of its labels only, as calbench import-logits writes it), and the study split
    made from ``split_from``'s."""
    from calbench.logits import save_logits
    from calbench.logits_sources import labels_order_hash
    from calbench.split import split_logits_files

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 40)
    computed, imported = tmp_path / "d" / "cnn.npz", tmp_path / "d" / "mine.npz"
    computed.parent.mkdir()
    save_logits(computed, rng.normal(size=(40, 3)).astype(np.float32), y,
                order_hash="a" * 64, model="cnn", dataset="d")  # fmt: skip
    y2 = np.asarray(imported_labels(y.copy()))
    save_logits(imported, rng.normal(size=(40, 3)).astype(np.float32), y2,
                order_hash=labels_order_hash(y2), model="mine", dataset="d")  # fmt: skip
    split = tmp_path / "split.npz"
    split_logits_files([computed if split_from == "computed" else imported], split)
    return computed, imported, split, y


@pytest.mark.parametrize("split_from", ["computed", "imported"])
def test_an_imported_file_with_the_datasets_labels_joins_its_dataset(tmp_path, split_from):
    from calbench.split import load_halves

    computed, imported, split, y = _mixed(tmp_path, lambda y: y, split_from=split_from)
    for path in (computed, imported):
        halves = load_halves(path, split)
        val, test = study_split(40)
        np.testing.assert_array_equal(halves["test"][1], y[test])
        np.testing.assert_array_equal(halves["val"][1], y[val])


def _change(i):
    def edit(y):
        y[i] = (y[i] + 1) % 3
        return y

    return edit


@pytest.mark.parametrize("split_from", ["computed", "imported"])
def test_an_imported_file_with_other_labels_is_refused_naming_the_index(tmp_path, split_from):
    from calbench.split import load_halves

    computed, imported, split, y = _mixed(tmp_path, _change(17), split_from=split_from)
    other = imported if split_from == "computed" else computed
    with pytest.raises(ValueError, match=r"first at index 17\b") as info:
        load_halves(other, split)
    assert str(other) in str(info.value) and "\n" not in str(info.value)


def test_split_of_mixed_files_checks_labels_and_names_the_first_mismatch(tmp_path):
    from calbench.split import split_logits_files

    computed, imported, _, _ = _mixed(tmp_path, lambda y: y)
    assert split_logits_files([computed, imported], tmp_path / "s2.npz")["n"] == 40
    (tmp_path / "x").mkdir()
    computed, imported, _, _ = _mixed(tmp_path / "x", _change(3))
    with pytest.raises(ValueError, match=r"first at index 3\b"):
        split_logits_files([computed, imported], tmp_path / "s3.npz")
