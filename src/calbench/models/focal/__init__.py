"""Architectures of torrvision/focal_calibration (Mukhoti et al., NeurIPS 2020), commit 475422a.

Module names match the published ``.model`` state dicts once their ``module.`` prefix (from
``nn.DataParallel``) is stripped. Every network divides its logits by ``temp`` (the study
builds them with ``temp=1.0``).

* ``resnet50`` / ``resnet110``: CIFAR ResNet with a 3x3 stem, no max-pool, Bottleneck blocks
  [3,4,6,3] / [3,4,26,3] and 4x4 average pooling (not He et al.'s 110-layer BasicBlock net).
* ``wide_resnet``: WRN-26-10 (Zagoruyko & Komodakis 2016), BasicBlock, 8x8 average pooling.
* ``densenet121``: CIFAR DenseNet-BC, growth 32, blocks [6,12,24,16], reduction 0.5.
* ``resnet50_tiny``: Tiny ImageNet ResNet-50, 3x3 stride-1 stem, no max-pool,
  ``AdaptiveAvgPool2d(2)`` and a 2048*4 -> 200 classifier.

Importing this package imports torch.
"""

from __future__ import annotations

from calbench.models.focal.densenet import densenet121
from calbench.models.focal.resnet import resnet50, resnet110
from calbench.models.focal.resnet_tiny_imagenet import resnet50_tiny
from calbench.models.focal.wide_resnet import wide_resnet_cifar

#: name -> constructor ``f(num_classes, temp=1.0) -> nn.Module``.
ARCHITECTURES = {
    "resnet50": resnet50,
    "resnet110": resnet110,
    "wide_resnet": wide_resnet_cifar,
    "densenet121": densenet121,
    "resnet50_tiny": resnet50_tiny,
}

__all__ = [
    "ARCHITECTURES",
    "densenet121",
    "resnet50",
    "resnet110",
    "resnet50_tiny",
    "wide_resnet_cifar",
]
