"""Small networks for Fashion-MNIST (input 1x28x28, 10 classes), one per architecture family.

Guo, Pleiss, Sun and Weinberger, "On Calibration of Modern Neural Networks" (ICML 2017), §3,
observe that deeper and wider networks with batch normalization, trained without weight decay
until the NLL overfits, become over-confident. These scaled-down members of six families
(fully connected, LeNet, VGG, ResNet, MobileNet, DenseNet) are small enough to train in seconds on
a CPU and, trained on a subset without regularisation, end over-confident like their large
relatives:

- ``mlp``: two hidden ReLU layers.
- ``lenet5``: LeCun et al. (1998) LeNet-5 with ReLU and max pooling.
- ``vgg_small``: Simonyan and Zisserman (2015) stacks of 3x3 convolutions with batch norm.
- ``resnet_small``: He et al. (2016) basic residual blocks, three stages.
- ``mobilenet_small``: Howard et al. (2017) depthwise-separable convolution blocks.
- ``densenet_small``: Huang et al. (2017) dense blocks with transition layers.

:data:`ARCHITECTURES` maps each name to its constructor ``f(num_classes=10, in_channels=1) -> nn.Module``.
"""

from __future__ import annotations

import torch
from torch import nn


def _conv_bn(cin: int, cout: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    ]


class MLP(nn.Module):
    """Fully connected network: 784 -> 256 -> 128 -> classes, ReLU."""

    def __init__(self, num_classes: int = 10, in_channels: int = 1, hidden=(256, 128)):
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = in_channels * 28 * 28
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU(inplace=True)]
            width = h
        layers.append(nn.Linear(width, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class LeNet5(nn.Module):
    """LeNet-5 (LeCun et al., 1998): conv5-pool-conv5-pool-fc120-fc84, ReLU and max pooling."""

    def __init__(self, num_classes: int = 10, in_channels: int = 1):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 6, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(16 * 5 * 5, 120),
            nn.ReLU(inplace=True),
            nn.Linear(120, 84),
            nn.ReLU(inplace=True),
            nn.Linear(84, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class VGGSmall(nn.Module):
    """VGG-style: [conv3-BN-ReLU x2, maxpool] x2 (widths 8, 16), then fc 128 and the classifier."""

    def __init__(self, num_classes: int = 10, in_channels: int = 1, widths=(8, 16)):
        super().__init__()
        layers: list[nn.Module] = []
        cin = in_channels
        for w in widths:
            layers += _conv_bn(cin, w) + _conv_bn(w, w) + [nn.MaxPool2d(2)]
            cin = w
        self.features = nn.Sequential(*layers)
        side = 28 // 2 ** len(widths)
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(cin * side * side, 128),
            nn.ReLU(inplace=True),
            nn.Linear(128, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class BasicBlock(nn.Module):
    """Residual basic block (He et al., 2016): two 3x3 conv-BN, identity or 1x1 projection."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNetSmall(nn.Module):
    """ResNet: stride-2 stem conv (14x14), three stages of one basic block (widths 16, 32, 64;
    strides 1, 2, 2), global average pooling, linear classifier."""

    def __init__(self, num_classes: int = 10, in_channels: int = 1, widths=(16, 32, 64)):
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn(in_channels, widths[0], stride=2))
        blocks = []
        cin = widths[0]
        for i, w in enumerate(widths):
            blocks.append(BasicBlock(cin, w, stride=1 if i == 0 else 2))
            cin = w
        self.layers = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


class MobileNetSmall(nn.Module):
    """MobileNet (Howard et al., 2017): a stem conv, then depthwise-separable blocks
    (3x3 depthwise conv-BN-ReLU, 1x1 pointwise conv-BN-ReLU), global pooling, linear classifier."""

    #: (output channels, stride) of each depthwise-separable block
    BLOCKS = ((32, 1), (64, 2), (64, 1), (128, 2), (128, 1))

    def __init__(self, num_classes: int = 10, in_channels: int = 1, stem: int = 16):
        super().__init__()
        layers: list[nn.Module] = _conv_bn(in_channels, stem, stride=2)
        cin = stem
        for cout, stride in self.BLOCKS:
            layers += _conv_bn(cin, cin, stride=stride, groups=cin)  # depthwise
            layers += [nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(True)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


class DenseLayer(nn.Module):
    """DenseNet layer (Huang et al., 2017): BN-ReLU-conv3x3 producing ``growth`` new channels,
    concatenated to its input."""

    def __init__(self, cin: int, growth: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(cin)
        self.conv = nn.Conv2d(cin, growth, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.conv(torch.relu(self.bn(x)))], 1)


class DenseNetSmall(nn.Module):
    """DenseNet: stride-2 stem conv (14x14), dense blocks (``blocks`` layers each, growth rate
    ``growth``) separated by transitions (BN-ReLU-conv1x1 halving the channels, 2x2 average
    pooling), then BN-ReLU, global average pooling and a linear classifier."""

    def __init__(
        self,
        num_classes: int = 10,
        in_channels: int = 1,
        growth: int = 12,
        blocks=(2, 4),
        stem: int = 24,
    ):
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(in_channels, stem, 3, stride=2, padding=1, bias=False)]
        c = stem
        for i, n in enumerate(blocks):
            for _ in range(n):
                layers.append(DenseLayer(c, growth))
                c += growth
            if i < len(blocks) - 1:
                layers += [
                    nn.BatchNorm2d(c),
                    nn.ReLU(inplace=True),
                    nn.Conv2d(c, c // 2, 1, bias=False),
                    nn.AvgPool2d(2),
                ]
                c //= 2
        layers += [nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


#: architecture name -> constructor ``f(num_classes=10, in_channels=1)``
ARCHITECTURES = {
    "mlp": MLP,
    "lenet5": LeNet5,
    "vgg_small": VGGSmall,
    "resnet_small": ResNetSmall,
    "mobilenet_small": MobileNetSmall,
    "densenet_small": DenseNetSmall,
}
