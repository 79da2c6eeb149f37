import hashlib

import pytest
import torch

from calbench.models import build_from_spec, load_model
from calbench.models.trained import (
    load_state_strict,
    read_checkpoint,
    save_checkpoint,
    state_dict_sha256,
)

SPEC = {"dataset": "fashion_mnist", "source": "train", "arch": "lenet5", "training": {"epochs": 1}}


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    model = build_from_spec(SPEC)
    path = tmp_path / "m" / "model.pt"
    history = [{"epoch": 1, "loss": 0.5, "accuracy": 0.8, "lr": 0.1}]
    digest = save_checkpoint(path, model, SPEC, history)
    return path, model, digest, history


def test_state_dict_sha256_known_answer():
    t = torch.tensor([1.0, 2.0], dtype=torch.float32)
    h = hashlib.sha256()
    h.update(b"w|torch.float32|(2,)|")
    h.update(t.numpy().tobytes())
    assert state_dict_sha256({"w": t}) == h.hexdigest()
    assert state_dict_sha256({"w": t + 1}) != h.hexdigest()


def test_round_trip_restores_weights_spec_history_and_outputs(saved):
    path, model, digest, history = saved
    ckpt = read_checkpoint(path)
    assert ckpt["spec"] == SPEC and ckpt["history"] == history and ckpt["state_sha256"] == digest
    for k, v in model.state_dict().items():
        assert torch.equal(ckpt["state_dict"][k], v)
    loaded = load_model(SPEC, checkpoint=path)
    assert not loaded.training
    x = torch.randn(2, 1, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model.eval()(x), rtol=0, atol=0)
    assert [p.name for p in path.parent.iterdir()] == ["model.pt"]  # no temporary left


def test_corrupt_bytes_are_refused_in_one_line(saved):
    path = saved[0]
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ValueError, match="cannot read checkpoint") as err:
        read_checkpoint(path)
    assert "\n" not in str(err.value)


def test_stale_content_hash_is_refused(saved, tmp_path):
    path = saved[0]
    payload = torch.load(path, weights_only=True)
    key = next(iter(payload["state_dict"]))
    payload["state_dict"][key] = payload["state_dict"][key] + 1
    torch.save(payload, path)
    with pytest.raises(ValueError, match="fails its content hash"):
        read_checkpoint(path)


def test_a_plain_state_dict_is_not_a_calbench_checkpoint(tmp_path):
    path = tmp_path / "plain.pt"
    torch.save(build_from_spec(SPEC).state_dict(), path)
    with pytest.raises(ValueError, match="is not a calbench checkpoint"):
        read_checkpoint(path)


def test_pickled_code_is_never_run(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("owned",))

    path = tmp_path / "evil.pt"
    torch.save({"format": "calbench-checkpoint-1", "x": Evil()}, path)
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        read_checkpoint(path)


def test_missing_checkpoint_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="run calbench train-model"):
        read_checkpoint(tmp_path / "none.pt")
    with pytest.raises(ValueError, match="needs its checkpoint"):
        load_model(SPEC, checkpoint=None)


def test_keys_or_shapes_that_do_not_fit_the_arch_are_one_line_errors(tmp_path):
    mlp_spec = {"dataset": "fashion_mnist", "source": "train", "arch": "mlp"}
    path = tmp_path / "mlp.pt"
    save_checkpoint(path, build_from_spec(mlp_spec), mlp_spec)
    narrow = dict(mlp_spec, arch_kwargs={"hidden": [64, 128]})
    with pytest.raises(
        ValueError, match=r"shape mismatches \(e.g. net.1.weight \(256, 784\) vs \(64, 784\)\)"
    ) as err:
        load_model(narrow, checkpoint=path)
    assert "\n" not in str(err.value)
    deeper = dict(mlp_spec, arch_kwargs={"hidden": [256, 128, 64]})
    with pytest.raises(ValueError, match="missing keys"):
        load_model(deeper, checkpoint=path)
    with pytest.raises(ValueError, match="trained with arch 'mlp' but the spec says 'lenet5'"):
        load_model(dict(mlp_spec, arch="lenet5"), checkpoint=path)
    lenet = build_from_spec(SPEC)
    with pytest.raises(ValueError, match="unexpected keys"):
        load_state_strict(lenet, {**lenet.state_dict(), "extra.weight": torch.zeros(1)})


def test_state_dict_hash_covers_zero_dim_tensors_of_batchnorm():
    import torch

    from calbench.models.trained import state_dict_sha256

    bn = torch.nn.BatchNorm2d(3)
    sd = bn.state_dict()
    assert sd["num_batches_tracked"].dim() == 0
    before = state_dict_sha256(sd)
    bn.train()
    bn(torch.randn(4, 3, 2, 2))  # one step: num_batches_tracked 0 -> 1
    assert state_dict_sha256(bn.state_dict()) != before
    scalar = {"x": torch.tensor(7, dtype=torch.int64)}
    assert state_dict_sha256(scalar) != state_dict_sha256({"x": torch.tensor(8, dtype=torch.int64)})


def test_checkpoint_bytes_do_not_depend_on_the_path(tmp_path):
    """Two saves of the same model are byte-identical wherever they are written (torch names
    the archive after the file it writes to; calbench writes through a file object)."""
    import torch

    from calbench.models.trained import save_checkpoint

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    save_checkpoint(tmp_path / "a" / "model.pt", model, SPEC, [{"epoch": 1, "loss": 0.5}])
    save_checkpoint(tmp_path / "b" / "other.pt", model, SPEC, [{"epoch": 1, "loss": 0.5}])
    assert (tmp_path / "a" / "model.pt").read_bytes() == (tmp_path / "b" / "other.pt").read_bytes()
