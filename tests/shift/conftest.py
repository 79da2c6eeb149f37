"""Test-made images for the dataset-shift tests: shapes on a black background (Fashion-MNIST's
look) in 28 x 28 grey and 32 x 32 RGB."""

import numpy as np
import pytest


def make_images(n: int, side: int, channels: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:side, 0:side]
    out = np.zeros((n, side, side, channels), dtype=np.uint8)
    for i in range(n):
        cy, cx = rng.uniform(side * 0.3, side * 0.7, size=2)
        ry, rx = rng.uniform(side * 0.15, side * 0.35, size=2)
        mask = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0
        level = rng.integers(120, 256, size=channels)
        texture = rng.integers(0, 40, size=(side, side, 1))
        img = np.where(mask[..., None], np.clip(level - texture, 0, 255), 0)
        top = int(rng.integers(2, side // 3))
        img[top : top + 2, 2:-2] = 255  # an edge
        out[i] = img.astype(np.uint8)
    return out


@pytest.fixture(scope="session")
def grey():
    return make_images(40, 28, 1)


@pytest.fixture(scope="session")
def rgb():
    return make_images(12, 32, 3, seed=1)
