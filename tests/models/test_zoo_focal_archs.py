"""focal_calibration architectures: sizes of the published files, key layout, the ``temp`` division."""

import math

import pytest
import torch

from calbench.models.focal import ARCHITECTURES
from calbench.models.pretrained import build_architecture

torch.set_num_threads(1)  # the CI machine's 2 cores are shared; threads oversubscribe


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def meta(name, **kw):
    # construct without allocating or initialising weights: counts and shapes only
    with torch.device("meta"):
        return ARCHITECTURES[name](**kw)


def float_mib(model):
    # float32 parameters + buffers (num_batches_tracked is int64: counted as 8 bytes)
    total = 0
    for t in list(model.parameters()) + list(model.buffers()):
        total += t.numel() * t.element_size()
    return total / 2**20


# `du -h` of the CIFAR-10 checkpoints in the study notebook (replication-sources 3.4):
# du rounds up to the next MiB.
DU_CIFAR10 = {"densenet121": 27, "resnet50": 90, "wide_resnet": 140, "resnet110": 176}


@pytest.mark.parametrize("name", sorted(DU_CIFAR10))
def test_cifar10_checkpoint_sizes_match_published_du(name):
    model = meta(name, num_classes=10)
    assert math.ceil(float_mib(model)) == DU_CIFAR10[name]


def _bottleneck_resnet_params(blocks, num_classes):
    # Hand count of the CIFAR bottleneck ResNet: 3x3 stem (64) + BN, stages 64/128/256/512,
    # expansion 4, projection shortcut on the first block of each stage, fc on 2048.
    total = 3 * 64 * 9 + 2 * 64
    cin = 64
    for planes, n in zip((64, 128, 256, 512), blocks, strict=True):
        for i in range(n):
            total += cin * planes + 2 * planes  # 1x1 + BN
            total += planes * planes * 9 + 2 * planes  # 3x3 + BN
            total += planes * 4 * planes + 2 * 4 * planes  # 1x1 + BN
            if i == 0:
                total += cin * 4 * planes + 2 * 4 * planes  # shortcut conv + BN
            cin = 4 * planes
    return total + 2048 * num_classes + num_classes


@pytest.mark.parametrize("k", [10, 100])
def test_resnet_counts_by_hand(k):
    assert n_params(meta("resnet50", num_classes=k)) == _bottleneck_resnet_params([3, 4, 6, 3], k)
    assert n_params(meta("resnet110", num_classes=k)) == _bottleneck_resnet_params([3, 4, 26, 3], k)


def test_wide_resnet_count_by_hand():
    # WRN-26-10: 4 BasicBlocks per stage, widths 160/320/640.
    total, cin = 3 * 16 * 9 + 32, 16
    for w in (160, 320, 640):
        for i in range(4):
            total += cin * w * 9 + 2 * w + w * w * 9 + 2 * w
            if i == 0:
                total += cin * w + 2 * w
            cin = w
    total += 640 * 100 + 100
    assert n_params(meta("wide_resnet", num_classes=100)) == total


def test_tiny_resnet50_head_and_count():
    model = meta("resnet50_tiny", num_classes=200)
    assert tuple(model.fc.weight.shape) == (200, 8192)
    # same trunk as the CIFAR ResNet-50, classifier on 2048*4 features
    assert n_params(model) == _bottleneck_resnet_params([3, 4, 6, 3], 0) + 8192 * 200 + 200


def test_key_names_of_the_published_layout():
    keys = {
        "resnet50": [
            "conv1.weight",
            "layer1.0.shortcut.0.weight",
            "layer4.2.bn3.running_var",
            "fc.bias",
        ],
        "wide_resnet": ["layer1.0.downsample.1.weight", "layer3.3.conv2.weight", "fc.weight"],
        "densenet121": [
            "dense1.0.bn1.weight",
            "trans3.conv.weight",
            "dense4.15.conv2.weight",
            "bn.weight",
            "linear.weight",
        ],
        "resnet50_tiny": ["layer2.0.downsample.0.weight", "layer4.2.conv3.weight", "fc.weight"],
    }
    for name, expected in keys.items():
        sd = meta(name).state_dict()
        for key in expected:
            assert key in sd, (name, key)
    # no max-pool / no stride in the CIFAR stem: 32x32 input keeps 32x32 after conv1
    assert "layer4.3.conv1.weight" not in meta("resnet50").state_dict()


def test_temp_divides_logits():
    torch.manual_seed(0)
    a = ARCHITECTURES["wide_resnet"](num_classes=10, depth=8, width=1).eval()
    b = ARCHITECTURES["wide_resnet"](num_classes=10, depth=8, width=1, temp=2.0).eval()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(b(x), a(x) / 2.0)
    with torch.device("meta"):
        assert build_architecture("focal_wide_resnet", 10).temp == 1.0  # the study's setting


@pytest.mark.slow
def test_tiny_forward_64x64():
    model = ARCHITECTURES["resnet50_tiny"]().eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 64, 64)).shape == (1, 200)


def test_bad_depth_is_one_line_error():
    with pytest.raises(ValueError, match="6n\\+2"):
        ARCHITECTURES["wide_resnet"](depth=25)
