"""The 13 CIFAR-10 architectures of huyvnphan/PyTorch_CIFAR10 v3.0.1, rebuilt for 32x32 inputs.

These are torchvision's ImageNet networks with the stem changed for 32x32 images (Phan 2021,
DOI 10.5281/zenodo.4431043). Module names match the published state dicts exactly, so
``load_state_dict(..., strict=True)`` accepts the repository's ``state_dicts/<name>.pt`` files.
The published parameter counts (README "No. Params") are in :data:`PUBLISHED_PARAMS`.

Importing this package imports torch.
"""

from __future__ import annotations

from calbench.models.cifar.densenet import densenet121, densenet161, densenet169
from calbench.models.cifar.googlenet import googlenet
from calbench.models.cifar.inception import inception_v3
from calbench.models.cifar.mobilenetv2 import mobilenet_v2
from calbench.models.cifar.resnet import resnet18, resnet34, resnet50
from calbench.models.cifar.vgg import vgg11_bn, vgg13_bn, vgg16_bn, vgg19_bn

#: name -> constructor ``f(num_classes=10) -> nn.Module``.
ARCHITECTURES = {
    "vgg11_bn": vgg11_bn,
    "vgg13_bn": vgg13_bn,
    "vgg16_bn": vgg16_bn,
    "vgg19_bn": vgg19_bn,
    "resnet18": resnet18,
    "resnet34": resnet34,
    "resnet50": resnet50,
    "densenet121": densenet121,
    "densenet161": densenet161,
    "densenet169": densenet169,
    "mobilenet_v2": mobilenet_v2,
    "googlenet": googlenet,
    "inception_v3": inception_v3,
}

#: Parameter counts in millions, 3 decimals, from the README of huyvnphan/PyTorch_CIFAR10 v3.0.1.
PUBLISHED_PARAMS = {
    "vgg11_bn": 28.150,
    "vgg13_bn": 28.334,
    "vgg16_bn": 33.647,
    "vgg19_bn": 38.959,
    "resnet18": 11.174,
    "resnet34": 21.282,
    "resnet50": 23.521,
    "densenet121": 6.956,
    "densenet161": 26.483,
    "densenet169": 12.493,
    "mobilenet_v2": 2.237,
    "googlenet": 5.491,
    "inception_v3": 21.640,
}

__all__ = ["ARCHITECTURES", "PUBLISHED_PARAMS", *ARCHITECTURES]
