"""ResNet-34 in the CIFAR training zoo: parameter counts checked by hand against torchvision's
ImageNet ResNet-34 (an independent implementation), layouts and output shapes."""

import torch
import torchvision.models as tvm

from calbench.models import architectures
from calbench.models.cifar_train import ARCHITECTURES

torch.set_num_threads(1)


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def test_registered_for_cifar():
    for name in ("resnet34", "resnet34_tv"):
        assert name in ARCHITECTURES
        assert architectures("cifar100")[name] is ARCHITECTURES[name]


def test_parameter_counts_by_hand():
    with torch.device("meta"):
        tv = n_params(tvm.resnet34())
        ours = n_params(ARCHITECTURES["resnet34"](num_classes=100))
        tv100 = n_params(ARCHITECTURES["resnet34_tv"](num_classes=100))
    assert tv == 21_797_672  # torchvision's published count (1000 classes)
    # 100 classes: fc 512 x 100 + 100 instead of 512 x 1000 + 1000
    assert tv100 == tv - 513_000 + 51_300
    # 32x32 stem: conv3x3(3 -> 64) instead of conv7x7(3 -> 64)
    assert ours == tv100 - 7 * 7 * 3 * 64 + 3 * 3 * 3 * 64


def test_torchvision_layout_and_outputs():
    torch.manual_seed(0)
    net = ARCHITECTURES["resnet34_tv"](num_classes=100).eval()
    ref = tvm.resnet34(weights=None, num_classes=100)
    assert {k: v.shape for k, v in net.state_dict().items()} == {
        k: v.shape for k, v in ref.state_dict().items()
    }
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert net(x).shape == (2, 100)
        assert ARCHITECTURES["resnet34"](num_classes=100).eval()(x).shape == (2, 100)
    # blocks per stage: [3, 4, 6, 3]
    cifar = ARCHITECTURES["resnet34"](num_classes=100)
    assert len(cifar.layers) == 3 + 4 + 6 + 3
