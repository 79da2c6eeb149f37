"""Paper-scale CIFAR architectures of the calibration-during-training studies."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from calbench.models.cifar_train import ARCHITECTURES, WideResNet, resnet18, wrn28_10


def _n_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def test_resnet18_has_the_cifar_resnet18_parameter_count():
    # CIFAR ResNet-18 (3x3 stem, no max-pool, [2, 2, 2, 2], fc 512 -> 10): 11,173,962 parameters
    m = resnet18(num_classes=10)
    assert _n_params(m) == 11_173_962
    # the classifier is the final nn.Linear fc (512 * C + C values of meta-learned L2)
    assert isinstance(m.fc, nn.Linear) and m.fc.in_features == 512
    assert _n_params(resnet18(num_classes=100)) == 11_173_962 + 90 * 512 + 90


def test_wrn28_10_has_the_published_size():
    # Zagoruyko & Komodakis 2016, table 1 / 4: WRN-28-10 has 36.5M parameters
    m = wrn28_10(num_classes=10)
    assert _n_params(m) == 36_479_194
    assert m.fc.in_features == 640 and len(m.blocks) == 12  # 3 stages x 4 blocks


@pytest.mark.parametrize("name", ["resnet8_tiny", "wrn10_1"])
def test_forward_shapes(name):
    m = ARCHITECTURES[name](num_classes=7).eval()
    with torch.no_grad():
        assert m(torch.zeros(2, 3, 32, 32)).shape == (2, 7)


def test_bad_depth_is_a_value_error():
    with pytest.raises(ValueError, match="6n\\+4"):
        WideResNet(depth=27)


def test_train_source_takes_the_class_count_from_the_dataset():
    from calbench.models import build_from_spec

    for dataset, k in (("cifar10", 10), ("cifar100", 100)):
        net = build_from_spec({"dataset": dataset, "arch": "resnet8_tiny"})
        assert net.fc.out_features == k
    explicit = build_from_spec({"dataset": "cifar100", "arch": "resnet8_tiny", "arch_kwargs": {"num_classes": 7}})
    assert explicit.fc.out_features == 7
