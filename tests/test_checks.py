import re

import numpy as np
import pytest

from calbench._checks import (
    check_labels,
    check_logits,
    check_n_bins,
    check_probs,
    check_probs_labels,
)


def test_check_logits_accepts_float32_and_keeps_dtype():
    z = np.zeros((3, 4), dtype=np.float32)
    assert check_logits(z).dtype == np.float32


def test_check_logits_converts_integers_to_float():
    assert check_logits([[1, 2], [3, 4]]).dtype == np.float64


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.array([[0.0, np.nan]]), "NaN or infinite"),
        (np.array([[0.0, np.inf]]), "NaN or infinite"),
        (np.zeros(3), "2-D array"),
        (np.zeros((0, 3)), "empty"),
        (np.zeros((3, 1)), "at least 2 classes"),
        (np.array([["a", "b"]]), "numeric"),
    ],
)
def test_check_logits_refuses(bad, match):
    with pytest.raises(ValueError, match=match):
        check_logits(bad)


def test_check_probs_refuses_logits_with_a_hint():
    with pytest.raises(ValueError, match="did you pass logits"):
        check_probs(np.array([[2.0, -1.0], [0.5, 0.5]]))


def test_check_probs_refuses_rows_not_summing_to_one_and_names_the_row():
    with pytest.raises(ValueError, match="row 1 sums to 0.9"):
        check_probs(np.array([[0.5, 0.5], [0.4, 0.5]]))


def test_check_probs_tolerates_float32_softmax_rounding():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(100, 1000)).astype(np.float32)
    p = np.exp(z - z.max(1, keepdims=True))
    p = (p / p.sum(1, keepdims=True)).astype(np.float32)
    assert check_probs(p).shape == (100, 1000)


@pytest.mark.parametrize(
    "labels, match",
    [
        ([0, 1, 2], r"must lie in \[0, 1\]"),
        ([0, -1, 1], r"must lie in \[0, 1\]"),
        ([0, 1], "has 2 entries but there are 3 rows"),
        ([[0], [1], [1]], "1-D array"),
        ([0.0, 1.5, 1.0], "non-integer"),
        (["a", "b", "c"], "integer class indices"),
    ],
)
def test_check_labels_refuses(labels, match):
    with pytest.raises(ValueError, match=match):
        check_labels(np.array(labels), n=3, k=2)


def test_check_labels_accepts_integral_floats():
    assert check_labels(np.array([0.0, 1.0]), n=2, k=2).dtype == np.int64


@pytest.mark.parametrize("n_bins", [0, -3, 2.5, True, "15"])
def test_check_n_bins_refuses(n_bins):
    with pytest.raises(ValueError, match="n_bins must be an integer >= 1"):
        check_n_bins(n_bins)


def test_check_probs_labels_pair():
    p, y = check_probs_labels([[0.25, 0.75]], [1])
    assert p.dtype == np.float64 and y.tolist() == [1]


def test_blocked_scan_gives_numpy_argmax_and_catches_problems_in_any_block(monkeypatch):
    import calbench._checks as checks

    monkeypatch.setattr(checks, "_BLOCK_BYTES", 64)  # 8 float64 rows of 1 entry... several blocks
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(4), size=37)
    p[5] = [0.25, 0.25, 0.25, 0.25]  # ties: first maximum wins, as np.argmax
    for arr in (p, p.astype(np.float32), np.asfortranarray(p)):
        _, y, pred = check_probs_labels(arr, rng.integers(0, 4, 37), with_argmax=True)
        assert np.array_equal(pred, np.argmax(arr, axis=1)) and pred[5] == 0
    bad = p.copy()
    bad[36] = [1.5, -0.5, 0.0, 0.0]  # last block only, sums to 1
    with pytest.raises(ValueError, match="did you pass logits"):
        check_probs(bad)
    bad = p.copy()
    bad[20, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        check_probs(bad)


def test_check_logits_finds_a_non_finite_value_in_any_block_and_allows_huge_finite_ones():
    # the finiteness scan sums blocks of rows; overflow of finite values must not count
    z = np.full((4000, 300), np.finfo(np.float64).max)
    z[::2] *= -1
    assert check_logits(z) is z
    z32 = np.zeros((5000, 257), dtype=np.float32)
    for r, c, v in [(0, 0, np.nan), (2500, 100, np.inf), (4999, 256, -np.inf)]:
        bad = z32.copy()
        bad[r, c] = v
        want = "contain 1 -inf values" if v == -np.inf else "contain 1 NaN or infinite"
        with pytest.raises(ValueError, match=want):
            check_logits(bad)
    big = np.full((10, 3), np.finfo(np.float64).max)
    big[7, 1] = np.inf
    with pytest.raises(ValueError, match="contain 1 NaN or infinite"):
        check_logits(big)


# --- names and input paths (issue 33, groups 10 and 13) ---------------------------------------
def test_check_text_accepts_plain_names_and_refuses_the_rest():
    from calbench._checks import check_text

    for ok in ("resnet110", "ResNet-110", "CE + DECE (M1)", "Fashion-MNIST", "T-scaling", "α β"):
        assert check_text(ok, "name", "fix") == ok
    assert check_text(np.array("m"), "name", "fix") == "m"  # a 0-d string array, as np.savez stores
    for bad, why in [
        (np.array(["a", "b"]), "an array of shape (2,)"),
        (b"m", "a bytes, not a string"),
        (np.bytes_(b"m"), "not a string"),
        (3, "a int, not a string"),
        ("", "is empty"),
        ("a\tb", "control character '\\t'"),
        ("a\rb", "control character '\\r'"),
        ("a\x00b", "control character '\\x00'"),
        ("a\u2028b", "control character '\\u2028'"),
        ("=1+1", "starts with '='"),
        ("x" * 201, "has 201 characters"),
    ]:
        with pytest.raises(ValueError, match=re.escape(why)) as info:
            check_text(bad, "name", "do this")
        assert str(info.value).endswith("do this") and "\n" not in str(info.value)


def test_check_input_file_names_what_a_path_is(tmp_path):
    import os

    from calbench._checks import check_input_file

    (tmp_path / "f").write_text("x")
    assert check_input_file(tmp_path / "f", "logits file", "fix") == tmp_path / "f"
    with pytest.raises(FileNotFoundError, match="does not exist; fix"):
        check_input_file(tmp_path / "absent", "logits file", "fix")
    with pytest.raises(ValueError, match="is a directory, not a file"):
        check_input_file(tmp_path, "logits file", "fix")
    os.mkfifo(tmp_path / "fifo")
    for path in ("/dev/zero", "/dev/null", tmp_path / "fifo"):
        with pytest.raises(ValueError, match=r"is not a regular file \(a device, FIFO or socket\)"):
            check_input_file(path, "logits file", "fix")
    os.symlink(tmp_path / "f", tmp_path / "link")  # a link to a regular file is that file
    assert check_input_file(tmp_path / "link", "logits file", "fix")


def test_check_logits_tells_how_to_mask_classes_rather_than_to_drop_rows():
    z = np.zeros((5, 4))
    z[:, 2] = -np.inf  # a class masked in every row
    with pytest.raises(ValueError, match=r"5 -inf .*masked classes.*drop the columns") as e:
        check_logits(z)
    assert "drop those rows" not in str(e.value) and "\n" not in str(e.value)
    z[0, 0] = np.nan  # not masking: the general message
    with pytest.raises(ValueError, match="contain 6 NaN or infinite"):
        check_logits(z)
