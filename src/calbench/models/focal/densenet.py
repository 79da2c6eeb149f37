"""CIFAR DenseNet-121 of focal_calibration ``Net/densenet.py`` (Mukhoti et al., NeurIPS 2020).

Huang et al. 2017 DenseNet-BC in the "kuangliu" CIFAR layout: 3x3 stem with 2*growth channels,
dense blocks ``dense1..dense4`` of Bottleneck layers (output concatenated as [new, input]),
transitions ``trans1..trans3`` with reduction 0.5, 4x4 average pooling, logits divided by ``temp``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class Bottleneck(nn.Module):
    def __init__(self, cin: int, growth: int):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, 4 * growth, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(4 * growth)
        self.conv2 = nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, x):
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(out)))
        return torch.cat([out, x], 1)


class Transition(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(cin)
        self.conv = nn.Conv2d(cin, cout, 1, bias=False)

    def forward(self, x):
        return F.avg_pool2d(self.conv(F.relu(self.bn(x))), 2)


class DenseNet(nn.Module):
    def __init__(
        self,
        nblocks: list[int],
        growth: int = 32,
        reduction: float = 0.5,
        num_classes: int = 10,
        temp: float = 1.0,
    ):
        super().__init__()
        self.growth_rate = growth
        self.temp = temp
        n = 2 * growth
        self.conv1 = nn.Conv2d(3, n, 3, padding=1, bias=False)
        for i, nb in enumerate(nblocks, start=1):
            setattr(self, f"dense{i}", self._dense(n, nb))
            n += nb * growth
            if i < len(nblocks):
                out = int(math.floor(n * reduction))
                setattr(self, f"trans{i}", Transition(n, out))
                n = out
        self.bn = nn.BatchNorm2d(n)
        self.linear = nn.Linear(n, num_classes)

    def _dense(self, cin: int, nblock: int) -> nn.Sequential:
        return nn.Sequential(
            *[Bottleneck(cin + i * self.growth_rate, self.growth_rate) for i in range(nblock)]
        )

    def forward(self, x):
        out = self.conv1(x)
        out = self.trans1(self.dense1(out))
        out = self.trans2(self.dense2(out))
        out = self.trans3(self.dense3(out))
        out = self.dense4(out)
        out = F.avg_pool2d(F.relu(self.bn(out)), 4).flatten(1)
        return self.linear(out) / self.temp


def densenet121(num_classes: int = 10, temp: float = 1.0) -> DenseNet:
    return DenseNet([6, 12, 24, 16], growth=32, num_classes=num_classes, temp=temp)
