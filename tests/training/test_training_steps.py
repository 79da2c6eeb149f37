"""Tests of calbench.training.steps: the objective of the standard and interleaved methods."""

import torch

from calbench.training import build_objective, parse_training


def test_secondary_objective_is_primary_plus_beta_times_secondary():
    from calbench.losses import get_loss

    cfg = parse_training(
        {"loss": "focal", "loss_kwargs": {"gamma": 2.0}, "secondary": {"name": "dece", "beta": 0.7}}
    )
    obj = build_objective(cfg)
    z = torch.randn(32, 3, generator=torch.Generator().manual_seed(1))
    y = torch.arange(32) % 3
    want = get_loss("focal", gamma=2.0)(z, y) + 0.7 * get_loss("dece")(z, y)
    torch.testing.assert_close(obj(z, y), want)
    # the loss_kwargs spelling builds the same objective
    alt = build_objective(
        parse_training(
            {
                "loss": "focal",
                "loss_kwargs": {"gamma": 2.0, "secondary": {"name": "dece", "beta": 0.7}},
            }
        )
    )
    torch.testing.assert_close(alt(z, y), want)
