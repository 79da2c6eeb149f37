"""VGG-BN for 32x32 CIFAR-10 (huyvnphan/PyTorch_CIFAR10 v3.0.1).

Simonyan & Zisserman 2015, configurations A/B/D/E with batch normalisation. The 32x32 variant
pools the 1x1 feature map with ``AdaptiveAvgPool2d(1)`` and keeps torchvision's 4096-4096 head
on 512 inputs.
"""

from __future__ import annotations

from torch import nn

_CFGS = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M"]
    + [512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}


def _features(cfg: list) -> nn.Sequential:
    layers: list[nn.Module] = []
    channels = 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        else:
            layers += [
                nn.Conv2d(channels, v, 3, padding=1),
                nn.BatchNorm2d(v),
                nn.ReLU(inplace=True),
            ]
            channels = v
    return nn.Sequential(*layers)


class VGG(nn.Module):
    """VGG with batch norm; state-dict keys ``features.*`` and ``classifier.{0,3,6}.*``."""

    def __init__(self, cfg: str, num_classes: int = 10):
        super().__init__()
        self.features = _features(_CFGS[cfg])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.classifier = nn.Sequential(
            nn.Linear(512, 4096),
            nn.ReLU(True),
            nn.Dropout(),
            nn.Linear(4096, 4096),
            nn.ReLU(True),
            nn.Dropout(),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(x.flatten(1))


def vgg11_bn(num_classes: int = 10) -> VGG:
    return VGG("A", num_classes)


def vgg13_bn(num_classes: int = 10) -> VGG:
    return VGG("B", num_classes)


def vgg16_bn(num_classes: int = 10) -> VGG:
    return VGG("D", num_classes)


def vgg19_bn(num_classes: int = 10) -> VGG:
    return VGG("E", num_classes)
