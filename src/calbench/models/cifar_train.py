"""Networks the paper-scale calibration-during-training studies train on CIFAR-10/100 (32x32).

* ``resnet18``: the CIFAR ResNet-18 of Meta-Calibration (Bohdal et al. 2021, section 3.1; their
  code inherits focal_calibration's ``Net/resnet.py``, the layout of He et al. 2016 for CIFAR):
  3x3 stride-1 stem without max-pool, BasicBlocks [2, 2, 2, 2] of widths 64/128/256/512, global
  average pooling and the final ``nn.Linear`` ``fc`` (512 -> classes). The meta-learned L2 acts on
  ``fc``; its fast-weight step runs through ``torch.func.functional_call`` (see
  :mod:`calbench.metacal`), so a plain ``nn.Linear`` serves as the fast-weight classifier.
* ``wrn28_10``: Wide-ResNet-28-10 (Zagoruyko & Komodakis 2016, "Wide Residual Networks", table 1:
  depth 28 = 6n + 4 with n = 4 pre-activation BN-ReLU-conv blocks per stage, widths 16/160/320/640,
  1x1 projection shortcuts, no dropout), the network of Soft Calibration Objectives (Karandikar et
  al. 2021, section 5) for CIFAR, with the final ``nn.Linear`` ``fc``.
* ``resnet34``: ResNet-34 (BasicBlocks [3, 4, 6, 3]) in the same 32x32 layout; ``resnet34_tv``:
  torchvision's ImageNet ResNet-34 unchanged but for its ``fc`` (7x7 stride-2 stem and max-pool on
  32x32 inputs), as trained for 30 epochs on CIFAR-100 in the temperature-scaling practice of Guo et
  al. 2017 (config/guo_resnet34_cifar100.yaml).
* ``resnet8_tiny`` / ``wrn10_1``: the same families at toy size, for tests on a CPU.

:data:`ARCHITECTURES` maps names to constructors ``f(num_classes=10, in_channels=3)``.
"""

from __future__ import annotations

import torch
from torch import nn

from calbench.models.fmnist import BasicBlock  # the residual block of He et al. 2016, shared


class CifarResNet(nn.Module):
    """ResNet for 32x32 inputs: stem conv3x3(64), four stages, global pooling, ``fc``."""

    def __init__(
        self,
        blocks=(2, 2, 2, 2),
        widths=(64, 128, 256, 512),
        num_classes: int = 10,
        in_channels: int = 3,
    ):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        layers, cin = [], widths[0]
        for i, (n, w) in enumerate(zip(blocks, widths, strict=True)):
            for j in range(n):
                layers.append(BasicBlock(cin, w, stride=2 if (i > 0 and j == 0) else 1))
                cin = w
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.layers(torch.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.pool(out), 1))


def resnet18(num_classes: int = 10, in_channels: int = 3) -> CifarResNet:
    return CifarResNet((2, 2, 2, 2), (64, 128, 256, 512), num_classes, in_channels)


def resnet34(num_classes: int = 10, in_channels: int = 3) -> CifarResNet:
    """ResNet-34 (He et al. 2016, table 1: BasicBlocks [3, 4, 6, 3]) in the 32x32 layout above."""
    return CifarResNet((3, 4, 6, 3), (64, 128, 256, 512), num_classes, in_channels)


def resnet34_tv(num_classes: int = 10, in_channels: int = 3) -> nn.Module:
    """torchvision's ImageNet ResNet-34 (7x7 stride-2 stem and max-pool kept) with a
    ``num_classes`` ``fc``, applied to 32x32 images as it is: the network of the "On Calibration
    of Modern Neural Networks" temperature-scaling practice (``torchvision.models.resnet34(
    weights=None)`` with ``fc`` replaced by a 100-way ``nn.Linear``; both layers are initialised
    by ``nn.Linear``'s default)."""
    if in_channels != 3:
        raise ValueError(f"resnet34_tv takes 3-channel images, got in_channels={in_channels}")
    from torchvision.models import resnet34 as tv_resnet34

    return tv_resnet34(weights=None, num_classes=num_classes)


def resnet8_tiny(num_classes: int = 10, in_channels: int = 3) -> CifarResNet:
    return CifarResNet((1, 1, 1), (8, 16, 32), num_classes, in_channels)


class WideBlock(nn.Module):
    """Pre-activation wide block: BN-ReLU-conv3x3-BN-ReLU-conv3x3, plus the (projected) input."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Conv2d(cin, cout, 1, stride=stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = torch.relu(self.bn1(x))
        skip = x if self.shortcut is None else self.shortcut(o)
        out = self.conv1(o)
        out = self.conv2(torch.relu(self.bn2(out)))
        return out + skip


class WideResNet(nn.Module):
    """WRN-d-k for 32x32 inputs (Zagoruyko & Komodakis 2016): ``n = (d - 4) / 6`` blocks per stage."""

    def __init__(
        self, depth: int = 28, widen: int = 10, num_classes: int = 10, in_channels: int = 3
    ):
        super().__init__()
        if (depth - 4) % 6 != 0 or depth < 10:
            raise ValueError(f"Wide-ResNet depth must be 6n+4 (e.g. 28), got {depth}")
        n = (depth - 4) // 6
        widths = (16, 16 * widen, 32 * widen, 64 * widen)
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, stride=1, padding=1, bias=False)
        blocks, cin = [], widths[0]
        for stage, w in enumerate(widths[1:]):
            for j in range(n):
                blocks.append(WideBlock(cin, w, stride=2 if (stage > 0 and j == 0) else 1))
                cin = w
        self.blocks = nn.Sequential(*blocks)
        self.bn = nn.BatchNorm2d(cin)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn(self.blocks(self.conv1(x))))
        return self.fc(torch.flatten(self.pool(out), 1))


def wrn28_10(num_classes: int = 10, in_channels: int = 3) -> WideResNet:
    return WideResNet(28, 10, num_classes, in_channels)


def wrn10_1(num_classes: int = 10, in_channels: int = 3) -> WideResNet:
    return WideResNet(10, 1, num_classes, in_channels)


#: architecture name -> constructor ``f(num_classes=10, in_channels=3)``
ARCHITECTURES = {
    "resnet18": resnet18,
    "resnet34": resnet34,
    "resnet34_tv": resnet34_tv,
    "wrn28_10": wrn28_10,
    "resnet8_tiny": resnet8_tiny,
    "wrn10_1": wrn10_1,
}
