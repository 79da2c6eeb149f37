
import numpy as np
import pytest
import torch
from torch import nn

from calbench.data import order_hash
from calbench.logits import (
    cache_logits,
    compute_logits,
    float32_logits,
    load_logits,
    save_logits,
)
from calbench.models import build_from_spec
from calbench.models.trained import save_checkpoint


def _pre(batch):
    return batch.to(torch.float32) / 255.0


def _bn_model():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(2 * 4 * 4, 3)
    )


@pytest.mark.parametrize("batch_size", [1, 7, 100])
def test_logits_are_the_eval_mode_outputs_in_order_whatever_the_batch_size(batch_size):
    model = _bn_model()
    model[1].running_mean.fill_(0.3)  # eval mode uses these, train mode would not
    images = torch.randint(0, 256, (23, 1, 6, 6), dtype=torch.uint8)
    model.train()
    out = compute_logits(model, images, _pre, batch_size=batch_size, progress=False)
    assert out.dtype == np.float32 and out.shape == (23, 3)
    with torch.no_grad():
        expected = model.eval()(_pre(images)).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_compute_logits_refuses_bad_input():
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        compute_logits(_bn_model(), torch.zeros(2, 1, 6, 6, dtype=torch.uint8), _pre, batch_size=0)
    with pytest.raises(ValueError, match="no images"):
        compute_logits(_bn_model(), torch.zeros(0, 1, 6, 6, dtype=torch.uint8), _pre)
    flat = nn.Sequential(nn.Flatten(0))
    with pytest.raises(ValueError, match="expected \\(batch, classes\\)"):
        compute_logits(flat, torch.zeros(2, 1, 6, 6, dtype=torch.uint8), _pre, progress=False)


def test_save_and_load_round_trip(tmp_path):
    z = np.array([[1.0, 2.0], [3.5, -1.0]], dtype=np.float64)
    path = tmp_path / "l" / "m.npz"
    save_logits(path, z, np.array([1, 0], dtype=np.int32), order_hash="abc", model="m", dataset="d")
    d = load_logits(path)
    assert d["logits"].dtype == np.float32 and d["labels"].dtype == np.int64
    np.testing.assert_array_equal(d["logits"], z.astype(np.float32))
    assert d["labels"].tolist() == [1, 0]
    assert (d["order_hash"], d["model"], d["dataset"]) == ("abc", "m", "d")
    assert [p.name for p in path.parent.iterdir()] == ["m.npz"]


def test_save_and_load_refuse_bad_content(tmp_path):
    with pytest.raises(ValueError, match="NaN or infinite"):
        save_logits(
            tmp_path / "x.npz", [[np.nan, 1.0]], [0], order_hash="h", model="m", dataset="d"
        )
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\]"):
        save_logits(tmp_path / "x.npz", [[0.0, 1.0]], [2], order_hash="h", model="m", dataset="d")
    with pytest.raises(ValueError, match="order_hash is empty"):
        save_logits(tmp_path / "x.npz", [[0.0, 1.0]], [1], order_hash="", model="m", dataset="d")
    assert not (tmp_path / "x.npz").exists()
    np.savez(tmp_path / "partial.npz", logits=np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match=r"lacks \['labels', 'order_hash', 'model', 'dataset'\]"):
        load_logits(tmp_path / "partial.npz")
    (tmp_path / "junk.npz").write_bytes(b"junk")
    with pytest.raises(ValueError, match="cannot read logits file"):
        load_logits(tmp_path / "junk.npz")
    with pytest.raises(FileNotFoundError, match="run calbench cache-logits"):
        load_logits(tmp_path / "none.npz")


def test_cache_logits_keeps_the_first_samples_in_dataset_order(fmnist_root, tmp_path):
    from calbench.data import fashion_mnist

    spec = {"dataset": "fashion_mnist", "source": "train", "arch": "lenet5"}
    torch.manual_seed(0)
    model = build_from_spec(spec)
    save_checkpoint(tmp_path / "model.pt", model, spec)
    out = tmp_path / "logits" / "fashion_mnist" / "lenet.npz"
    summary = cache_logits(
        spec,
        data_root=fmnist_root,
        out=out,
        checkpoint=tmp_path / "model.pt",
        device="cpu",
        limit=150,
        batch_size=64,
        progress=False,
    )
    d = load_logits(out)
    images, labels = fashion_mnist.load_split(fmnist_root, "test")
    assert d["labels"].tolist() == labels[:150].tolist()
    assert d["order_hash"] == order_hash(images[:150], labels[:150]) == summary["order_hash"]
    assert d["model"] == "lenet" and d["dataset"] == "fashion_mnist"
    with torch.no_grad():
        expected = model.eval()(fashion_mnist.preprocessor(spec)(images[:150])).numpy()
    np.testing.assert_allclose(d["logits"], expected, rtol=1e-5, atol=1e-5)
    assert summary["accuracy"] == pytest.approx(np.mean(expected.argmax(1) == labels[:150].numpy()))
    with pytest.raises(ValueError, match="limit must be an integer >= 1"):
        cache_logits(
            spec, data_root=fmnist_root, out=out, checkpoint=tmp_path / "model.pt", limit=0
        )


def _offset_problem(offset=1e7, n=400, k=5, seed=0):
    """float64 logits whose classes differ by a fraction of float32's spacing at ``offset``."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k)) * 0.5
    z[np.arange(n), y] += 0.3
    return z + offset, y


def test_float64_logits_with_a_row_offset_keep_their_probabilities():
    from calbench.functional import softmax

    z, y = _offset_problem()
    got = float32_logits(z)
    assert got.dtype == np.float32
    # a direct cast rounds to float32's spacing of 1 at 1e7: ties and a lower accuracy
    assert (z.astype(np.float32).argmax(1) == y).mean() < (z.argmax(1) == y).mean()
    np.testing.assert_array_equal(got.argmax(1), z.argmax(1))
    np.testing.assert_allclose(softmax(got.astype(np.float64)), softmax(z), atol=1e-6)
    assert (got.max(axis=1) == 0).all()


def test_float32_logits_keep_exactly_representable_values_as_they_are():
    z32 = np.random.default_rng(1).normal(size=(50, 4)).astype(np.float32) * 30
    assert float32_logits(z32) is z32
    np.testing.assert_array_equal(float32_logits(z32.astype(np.float64)), z32)
    np.testing.assert_array_equal(float32_logits(z32.astype(np.float16)), z32.astype(np.float16))
    assert float32_logits([[1, 2], [3, -4]]).tolist() == [[1, 2], [3, -4]]


def test_float32_logits_beyond_float32_range_shift_or_one_line_error():
    z = np.array([[1e39, 0.9e39, 1e39 - 1e33], [-2e39, -2.2e39, -2e39]])
    got = float32_logits(z)  # the differences fit
    np.testing.assert_allclose(got, z - z.max(axis=1, keepdims=True), rtol=1e-6)
    with pytest.raises(ValueError, match="differ within a row by 2e\\+39, more than float32") as e:
        float32_logits(np.array([[1e39, -1e39], [0.0, 1.0]]))
    assert "\n" not in str(e.value)


def test_masked_minus_inf_logits_say_how_to_mask(tmp_path):
    z = np.random.default_rng(0).normal(size=(6, 4))
    z[:, 3] = -np.inf
    with pytest.raises(ValueError, match="6 -inf values .masked classes.*drop the col") as e:
        save_logits(tmp_path / "m.npz", z, np.zeros(6, int), order_hash="h", model="m", dataset="d")
    assert "\n" not in str(e.value) and "drop those rows" not in str(e.value)
    assert not (tmp_path / "m.npz").exists()


def test_save_logits_of_float64_with_an_offset_round_trips_shifted(tmp_path):
    z, y = _offset_problem(n=50)
    save_logits(tmp_path / "m.npz", z, y, order_hash="h", model="m", dataset="d")
    d = load_logits(tmp_path / "m.npz")
    np.testing.assert_array_equal(d["logits"].argmax(1), z.argmax(1))
    np.testing.assert_array_equal(d["logits"], float32_logits(z))
