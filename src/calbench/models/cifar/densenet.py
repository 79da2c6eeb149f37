"""DenseNet-BC 121/161/169 for 32x32 CIFAR-10 (huyvnphan/PyTorch_CIFAR10 v3.0.1).

Huang et al. 2017 (CVPR), torchvision layout (``features.denseblockN.denselayerM.*``); the stem is
a 3x3 stride-1 convolution followed by the 3x3 stride-2 max-pool of the published code.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn


class _DenseLayer(nn.Sequential):
    def __init__(self, cin: int, growth: int, bn_size: int):
        super().__init__()
        self.add_module("norm1", nn.BatchNorm2d(cin))
        self.add_module("relu1", nn.ReLU(inplace=True))
        self.add_module("conv1", nn.Conv2d(cin, bn_size * growth, 1, bias=False))
        self.add_module("norm2", nn.BatchNorm2d(bn_size * growth))
        self.add_module("relu2", nn.ReLU(inplace=True))
        self.add_module("conv2", nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False))

    def forward(self, x):
        return torch.cat([x, super().forward(x)], 1)


class _Transition(nn.Sequential):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.add_module("norm", nn.BatchNorm2d(cin))
        self.add_module("relu", nn.ReLU(inplace=True))
        self.add_module("conv", nn.Conv2d(cin, cout, 1, bias=False))
        self.add_module("pool", nn.AvgPool2d(2, 2))


class DenseNet(nn.Module):
    def __init__(self, growth: int, blocks: tuple, init_features: int, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            OrderedDict(
                [
                    ("conv0", nn.Conv2d(3, init_features, 3, stride=1, padding=1, bias=False)),
                    ("norm0", nn.BatchNorm2d(init_features)),
                    ("relu0", nn.ReLU(inplace=True)),
                    ("pool0", nn.MaxPool2d(3, stride=2, padding=1)),
                ]
            )
        )
        n = init_features
        for i, n_layers in enumerate(blocks, start=1):
            block = nn.Sequential()
            for j in range(n_layers):
                block.add_module(f"denselayer{j + 1}", _DenseLayer(n + j * growth, growth, 4))
            self.features.add_module(f"denseblock{i}", block)
            n += n_layers * growth
            if i != len(blocks):
                self.features.add_module(f"transition{i}", _Transition(n, n // 2))
                n //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(n))
        self.classifier = nn.Linear(n, num_classes)

    def forward(self, x):
        out = F.relu(self.features(x))
        return self.classifier(F.adaptive_avg_pool2d(out, 1).flatten(1))


def densenet121(num_classes: int = 10) -> DenseNet:
    return DenseNet(32, (6, 12, 24, 16), 64, num_classes)


def densenet161(num_classes: int = 10) -> DenseNet:
    return DenseNet(48, (6, 12, 36, 24), 96, num_classes)


def densenet169(num_classes: int = 10) -> DenseNet:
    return DenseNet(32, (6, 12, 32, 32), 64, num_classes)
