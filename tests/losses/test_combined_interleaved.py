import numpy as np
import pytest
import torch

from calbench.losses import (
    CombinedLoss,
    InterleavedObjective,
    combined,
    epoch_phases,
    get_loss,
    interleaved_split,
)


def test_combined_is_primary_plus_beta_secondary(rand_batch):
    z, y = rand_batch
    ce = get_loss("ce")(z, y).item()
    br = get_loss("brier")(z, y).item()
    sav = get_loss("savuc", kappa=0.3)(z, y).item()
    assert get_loss("ce", secondary={"name": "brier", "beta": 0.5})(z, y).item() == pytest.approx(
        ce + 0.5 * br, rel=1e-12
    )
    # beta defaults to 1; kwargs reach the secondary
    got = get_loss("ce", secondary={"name": "savuc", "kwargs": {"kappa": 0.3}})(z, y).item()
    assert got == pytest.approx(ce + sav, rel=1e-12)
    assert combined("ce", {"name": "savuc", "kwargs": {"kappa": 0.3}}, beta=2.0)(
        z, y
    ).item() == pytest.approx(ce + 2 * sav, rel=1e-12)
    assert CombinedLoss(get_loss("ce"), get_loss("brier"), 0.0)(z, y).item() == pytest.approx(ce)


def test_combined_primary_kwargs_and_parts(rand_batch):
    z, y = rand_batch
    loss = get_loss(
        "focal", gamma=2, secondary={"name": "mmce", "beta": 3, "kwargs": {"ce_weight": 0}}
    )
    out = loss(z, y).item()
    fl = get_loss("focal", gamma=2)(z, y).item()
    mm = get_loss("mmce", ce_weight=0)(z, y).item()
    assert out == pytest.approx(fl + 3 * mm, rel=1e-12)
    assert loss.last_parts["primary"] == pytest.approx(fl)
    assert loss.last_parts["secondary"] == pytest.approx(mm)


def test_combined_gradient_is_sum(rand_batch):
    z, y = rand_batch
    z1 = z.clone().requires_grad_(True)
    get_loss("ce", secondary={"name": "brier", "beta": 0.7})(z1, y).backward()
    z2 = z.clone().requires_grad_(True)
    (get_loss("ce")(z2, y) + 0.7 * get_loss("brier")(z2, y)).backward()
    assert torch.allclose(z1.grad, z2.grad, rtol=1e-12)


def test_combined_bad_specs():
    with pytest.raises(ValueError, match="beta"):
        get_loss("ce", secondary={"name": "brier", "beta": -1})
    with pytest.raises(ValueError, match="loss module"):
        combined("ce", 5)
    with pytest.raises(ValueError, match="unknown loss"):
        combined("ce", "nope")


# ------------------------------------------------------------------ interleaved training


def test_interleaved_split_partition():
    major, held = interleaved_split(100, holdout_fraction=0.2, seed=3)
    assert len(held) == 20 and len(major) == 80
    assert np.array_equal(np.sort(np.concatenate([major, held])), np.arange(100))
    assert major.dtype == np.int64
    again = interleaved_split(100, holdout_fraction=0.2, seed=3)
    assert np.array_equal(again[1], held)
    assert not np.array_equal(interleaved_split(100, 0.2, seed=4)[1], held)
    # tiny sets keep both parts non-empty
    m, h = interleaved_split(2, 0.01)
    assert len(m) == 1 and len(h) == 1


@pytest.mark.parametrize(
    "args, match",
    [((1,), "n must be"), ((10, 0.0), "holdout_fraction"), ((10, 1.0), "holdout_fraction")],
)
def test_interleaved_split_bad(args, match):
    with pytest.raises(ValueError, match=match):
        interleaved_split(*args)


def test_epoch_phases_order():
    assert epoch_phases(3, 2) == ["primary"] * 3 + ["secondary"] * 2
    assert epoch_phases(0, 1) == ["secondary"]
    with pytest.raises(ValueError, match="n_holdout_batches"):
        epoch_phases(3, -1)


def test_interleaved_objective_alternates_and_dispatches(rand_batch):
    z, y = rand_batch
    obj = InterleavedObjective("ce", {"name": "savuc", "kwargs": {"kappa": 0.3}}, beta=0.5)
    major_batches = [("m", i) for i in range(3)]
    held_batches = [("h", i) for i in range(2)]
    seen = list(obj.epoch(major_batches, held_batches))
    assert [p for p, _ in seen] == epoch_phases(3, 2)
    assert [b for _, b in seen] == major_batches + held_batches
    # two epochs: primary block, secondary block, primary block, secondary block
    two = [p for _ in range(2) for p, _ in obj.epoch(major_batches, held_batches)]
    assert two == epoch_phases(3, 2) * 2

    ce = get_loss("ce")(z, y).item()
    sav = get_loss("savuc", kappa=0.3)(z, y).item()
    assert obj(z, y, phase="primary").item() == pytest.approx(ce, rel=1e-12)
    assert obj(z, y, phase="secondary").item() == pytest.approx(0.5 * sav, rel=1e-12)
    assert obj.counts == {"primary": 1, "secondary": 1}
    with pytest.raises(ValueError, match="phase"):
        obj(z, y, phase="both")


def test_interleaved_training_moves_parameters_by_phase():
    # a linear model trained one interleaved epoch: the primary steps see only majority data,
    # the secondary steps only held-out data (checked through the targets each step receives).
    torch.manual_seed(0)
    x = torch.randn(40, 3)
    y = (x[:, 0] > 0).long()
    major, held = interleaved_split(40, 0.25, seed=0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    obj = InterleavedObjective("ce", "brier", beta=1.0)
    maj_batches = [major[i : i + 10] for i in range(0, len(major), 10)]
    held_batches = [held]
    log = []
    for phase, idx in obj.epoch(maj_batches, held_batches):
        opt.zero_grad()
        loss = obj(model(x[idx]), y[idx], phase=phase)
        loss.backward()
        opt.step()
        log.append((phase, set(idx.tolist())))
    assert [p for p, _ in log] == ["primary"] * 3 + ["secondary"]
    assert all(s <= set(major.tolist()) for p, s in log if p == "primary")
    assert log[-1][1] == set(held.tolist())
    assert obj.counts == {"primary": 3, "secondary": 1}
