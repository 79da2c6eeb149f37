"""Toy data and networks shared by the tests of calbench.training."""

import torch
from torch import nn


def _identity(batch):
    return batch.to(torch.float32)


def _linear(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(4, 3))


def _toy(n=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 4, (n, 1, 2, 2), generator=g, dtype=torch.uint8)
    labels = torch.arange(n) % 3
    return images, labels


def _ce(logits, targets):
    return nn.functional.cross_entropy(logits, targets)


def _separable(n=120, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % k
    images = torch.randint(0, 60, (n, 1, 2, 2), generator=g, dtype=torch.uint8)
    images.view(n, 4)[torch.arange(n), labels] += 150
    return images, labels


def _mlp(seed=0, k=3):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, k))
