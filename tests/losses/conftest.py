import math

import pytest
import torch


def logits_from_probs(rows):
    """Logits whose softmax is exactly ``rows`` (log of the probabilities), float64."""
    return torch.log(torch.tensor(rows, dtype=torch.float64))


@pytest.fixture
def two_rows():
    # p = [0.25, 0.75] with target 1 (correct, confidence 0.75) and
    # p = [0.2, 0.8] with target 0 (wrong, confidence 0.8).
    z = torch.tensor([[0.0, math.log(3.0)], [0.0, math.log(4.0)]], dtype=torch.float64)
    y = torch.tensor([1, 0])
    return z, y


@pytest.fixture
def rand_batch():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(16, 5, generator=g, dtype=torch.float64) * 2.0
    y = torch.randint(0, 5, (16,), generator=g)
    return z, y
