"""Tiny ImageNet ResNet-50 of focal_calibration ``Net/resnet_tiny_imagenet.py`` (NeurIPS 2020).

He et al. 2016 torchvision-style Bottleneck [3,4,6,3] (shortcuts named ``downsample``) with a
3x3 stride-1 stem and no max-pool, for 64x64 inputs; ``AdaptiveAvgPool2d(2)`` leaves a 2x2 map, so
the classifier sees 2048*4 features. Logits are divided by ``temp``.
"""

from __future__ import annotations

from torch import nn


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        residual = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + residual)


class ResNetTiny(nn.Module):
    def __init__(self, layers: list[int], num_classes: int = 200, temp: float = 1.0):
        super().__init__()
        self.inplanes = 64
        self.temp = temp
        self.conv1 = nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(64, layers[0], 1)
        self.layer2 = self._make_layer(128, layers[1], 2)
        self.layer3 = self._make_layer(256, layers[2], 2)
        self.layer4 = self._make_layer(512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(512 * 4 * 4, num_classes)

    def _make_layer(self, planes: int, n: int, stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * 4:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * 4, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * 4),
            )
        layers = [Bottleneck(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * 4
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, n)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(1)) / self.temp


def resnet50_tiny(num_classes: int = 200, temp: float = 1.0) -> ResNetTiny:
    return ResNetTiny([3, 4, 6, 3], num_classes, temp)
