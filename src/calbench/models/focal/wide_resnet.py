"""Wide-ResNet-26-10 of focal_calibration ``Net/wide_resnet.py`` (Mukhoti et al., NeurIPS 2020).

Zagoruyko & Komodakis 2016: depth 26 gives (26-2)/6 = 4 BasicBlocks per stage, widths
16*10/32*10/64*10, projection shortcuts named ``downsample``, 8x8 average pooling, logits divided
by ``temp``.
"""

from __future__ import annotations

from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, cin: int, planes: int, stride: int = 1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        residual = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + residual)


class WideResNetCifar(nn.Module):
    def __init__(self, n: int, width: int, num_classes: int = 10, temp: float = 1.0):
        super().__init__()
        self.inplanes = 16
        self.temp = temp
        self.conv1 = nn.Conv2d(3, 16, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(16 * width, n, 1)
        self.layer2 = self._make_layer(32 * width, n, 2)
        self.layer3 = self._make_layer(64 * width, n, 2)
        self.avgpool = nn.AvgPool2d(8, stride=1)
        self.fc = nn.Linear(64 * width, num_classes)

    def _make_layer(self, planes: int, n: int, stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes),
            )
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, n)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(self.avgpool(x).flatten(1)) / self.temp


def wide_resnet_cifar(
    num_classes: int = 10, temp: float = 1.0, depth: int = 26, width: int = 10
) -> WideResNetCifar:
    if (depth - 2) % 6 != 0:
        raise ValueError(f"wide_resnet depth must be 6n+2 (e.g. 26), got {depth}")
    return WideResNetCifar((depth - 2) // 6, width, num_classes, temp)
