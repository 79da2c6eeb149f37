"""Common image corruptions at five severities (Hendrycks & Dietterich 2019, CIFAR-10-C).

Every function maps uint8 images ``(N, H, W, C)`` (C = 1 grey or 3 RGB) to corrupted uint8
images of the same shape. The definitions and severity parameters are those of Hendrycks &
Dietterich's (2019, ICLR, "Benchmarking neural network robustness to common corruptions and
perturbations", §3 and appendix) CIFAR-10-C generator, the 32 x 32 version of ImageNet-C, which
is the closest published resolution to Fashion-MNIST's 28 x 28. As there, each corruption works
on ``x / 255`` in float, clips to [0, 1], scales by 255 and truncates to uint8 (``np.uint8`` of a
float truncates; the published files were made that way).

==================  ======================================  ==================================
corruption          operation                               parameter per severity 1..5
==================  ======================================  ==================================
gaussian_noise      x + N(0, c^2) per pixel                 c = .04 .06 .08 .09 .10
shot_noise          Poisson(x c) / c per pixel              c = 500 250 100 75 50
impulse_noise       salt-and-pepper on a share c of values  c = .01 .02 .03 .05 .07
defocus_blur        disk kernel of radius r, alias blur s   (r, s) = (.3,.4) (.4,.5) (.5,.6)
                                                            (1,.2) (1.5,.1)
gaussian_blur       Gaussian filter, std c pixels           c = .4 .6 .7 .8 1
contrast            (x - mean) c + mean, per channel        c = .75 .5 .4 .3 .15
brightness          HSV value + c                           c = .05 .1 .15 .2 .3
pixelate            box-resize to int(S c), back to S       c = .95 .9 .85 .75 .65
jpeg_compression    JPEG at quality c (PIL / libjpeg)       c = 80 65 58 50 40
elastic_transform   random affine (corner shift a S) then   (e, s, a) = (0, 0, .08)
                    smoothed displacement field             (.05, .2, .07) (.08, .06, .06)
                    (amplitude e S, std s S)                (.1, .04, .05) (.1, .03, .03)
rotation            rotation by +-c degrees (random sign)   c = 15 30 45 60 75
==================  ======================================  ==================================

S is the image side (32 for CIFAR, 28 for Fashion-MNIST). Adaptations for 28 x 28 grey images:
the two size-relative parameters (pixelate, elastic) are fractions of S, as in the generator
(``IMSIZE``), so they scale with the side; everything else is per pixel or per channel and
applies to one grey channel unchanged (brightness of a grey pixel: its HSV value is the grey
level and its saturation 0, so "value + c" is "grey + c"). ``rotation`` is not a CIFAR-10-C
corruption; it follows the rotated-MNIST shift of Ovadia et al. (2019, §4.1) with bilinear
interpolation and black corners (Fashion-MNIST's background), an angle of c degrees with a
random sign per image.

Implementation: numpy, scipy.ndimage and Pillow only (all already dependencies of calbench).
OpenCV and scikit-image calls of the generator are rebuilt from their definitions:
``cv2.filter2D`` and ``cv2.warpAffine`` with BORDER_REFLECT_101 are scipy's ``mode="mirror"``;
``cv2.GaussianBlur(ksize=3)`` is a 3-tap kernel ``exp(-i^2 / (2 s^2))``, normalised;
``skimage.filters.gaussian`` is ``scipy.ndimage.gaussian_filter`` (mode "nearest", truncate 4
unless given); ``skimage.util.random_noise(mode="s&p")`` flips each value with probability c to
1 or 0 with equal odds.

Why not a library: ``imagecorruptions`` (PyPI 1.1.2, Apache-2.0, last release 2020) implements
the ImageNet-C parameters (for 224-pixel images; e.g. Gaussian noise std .08-.38 instead of
.04-.10), draws from numpy's global random state (no per-call seed), needs OpenCV and
scikit-image, and its blur kernels assume images larger than 32 pixels. ``albumentations``
(2.0.8, MIT) has different parameterisations (no H&D severities), requires OpenCV, albucore
and pydantic, and its random state is not a numpy Generator. Neither gives the published
severities on 28 x 28 grey images from a seed, so the transforms are written here and tested
against hand-computed cases (tests/test_corruptions.py).

Determinism: every random draw comes from ``numpy.random.default_rng`` seeded with
``SeedSequence([seed, crc32(name), severity])`` (:func:`corruption_rng`), one child stream per
kind of draw, images in order, so the same inputs give the same bytes on every run and the
first n images do not depend on how many follow. JPEG goes through the installed libjpeg;
the corrupted files' SHA-256 recorded in the manifests (:mod:`calbench.shift.io`) detects a
machine whose libraries produce other bytes.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable

import numpy as np

SEVERITIES = (1, 2, 3, 4, 5)

#: Parameters per severity (index severity - 1), as in the table of the module docstring.
PARAMS: dict[str, tuple] = {
    "gaussian_noise": (0.04, 0.06, 0.08, 0.09, 0.10),
    "shot_noise": (500, 250, 100, 75, 50),
    "impulse_noise": (0.01, 0.02, 0.03, 0.05, 0.07),
    "defocus_blur": ((0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1.0, 0.2), (1.5, 0.1)),
    "gaussian_blur": (0.4, 0.6, 0.7, 0.8, 1.0),
    "contrast": (0.75, 0.5, 0.4, 0.3, 0.15),
    "brightness": (0.05, 0.1, 0.15, 0.2, 0.3),
    "pixelate": (0.95, 0.9, 0.85, 0.75, 0.65),
    "jpeg_compression": (80, 65, 58, 50, 40),
    "elastic_transform": (
        (0.0, 0.0, 0.08),
        (0.05, 0.2, 0.07),
        (0.08, 0.06, 0.06),
        (0.1, 0.04, 0.05),
        (0.1, 0.03, 0.03),
    ),
    "rotation": (15.0, 30.0, 45.0, 60.0, 75.0),
}


# --------------------------------------------------------------------------------------------
# helpers


def corruption_rng(name: str, severity: int, seed: int = 0, n_streams: int = 1) -> list:
    """``n_streams`` independent generators for ``(name, severity, seed)`` (stable everywhere)."""
    ss = np.random.SeedSequence([int(seed), zlib.crc32(name.encode("ascii")), int(severity)])
    return [np.random.default_rng(child) for child in ss.spawn(n_streams)]


def to_uint8(x: np.ndarray) -> np.ndarray:
    """``np.uint8(clip(x, 0, 1) * 255)``: truncation, as the published CIFAR-10-C files."""
    return (np.clip(x, 0.0, 1.0) * 255.0).astype(np.uint8)


def _check_images(images) -> np.ndarray:
    x = np.asarray(images)
    if x.dtype != np.uint8:
        raise ValueError(f"images must be uint8 (N, H, W, C), got dtype {x.dtype}; pass raw pixels")
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4 or x.shape[-1] not in (1, 3) or x.shape[1] < 4 or x.shape[2] < 4:
        raise ValueError(
            f"images must have shape (N, H, W, C) with C 1 or 3 and H, W >= 4, got {x.shape}"
        )
    return x


def disk_kernel(radius: float, alias_blur: float) -> np.ndarray:
    """The generator's defocus kernel: the 17 x 17 grid points within ``radius`` of the centre,
    normalised, smoothed by a 3 x 3 Gaussian of std ``alias_blur`` (OpenCV's ``GaussianBlur``,
    reflect-101 border), float32."""
    grid = np.arange(-8, 9)
    xx, yy = np.meshgrid(grid, grid)
    disk = ((xx**2 + yy**2) <= radius**2).astype(np.float32)
    disk /= disk.sum()
    taps = np.exp(-(np.arange(-1, 2, dtype=np.float64) ** 2) / (2.0 * alias_blur**2))
    taps /= taps.sum()
    from scipy.ndimage import correlate1d

    out = correlate1d(disk.astype(np.float64), taps, axis=0, mode="mirror")
    out = correlate1d(out, taps, axis=1, mode="mirror")
    return out.astype(np.float32)


# --------------------------------------------------------------------------------------------
# the corruptions: (x uint8 (N, H, W, C), parameter, generators) -> uint8


def gaussian_noise(x, c, rngs):
    return to_uint8(x / 255.0 + rngs[0].normal(0.0, c, size=x.shape))


def shot_noise(x, c, rngs):
    return to_uint8(rngs[0].poisson(x / 255.0 * c) / c)


def impulse_noise(x, c, rngs):
    out = x / 255.0
    flip = rngs[0].random(size=x.shape) < c
    salt = rngs[1].random(size=x.shape) < 0.5
    out[flip & salt] = 1.0
    out[flip & ~salt] = 0.0
    return to_uint8(out)


def defocus_blur(x, c, rngs):
    from scipy.ndimage import correlate

    kernel = disk_kernel(*c).astype(np.float64)
    out = correlate(x / 255.0, kernel[None, :, :, None], mode="mirror")
    return to_uint8(out)


def gaussian_blur(x, c, rngs):
    from scipy.ndimage import gaussian_filter

    return to_uint8(gaussian_filter(x / 255.0, sigma=(0, c, c, 0), mode="nearest", truncate=4.0))


def contrast(x, c, rngs):
    x = x / 255.0
    means = x.mean(axis=(1, 2), keepdims=True)
    return to_uint8((x - means) * c + means)


def brightness(x, c, rngs):
    x = x / 255.0
    if x.shape[-1] == 1:  # HSV value of a grey pixel is its level (saturation 0)
        return to_uint8(x + c)
    from matplotlib.colors import hsv_to_rgb, rgb_to_hsv

    hsv = rgb_to_hsv(x)
    hsv[..., 2] = np.clip(hsv[..., 2] + c, 0.0, 1.0)
    return to_uint8(hsv_to_rgb(hsv))


def _pil_each(x, fn) -> np.ndarray:
    from PIL import Image

    out = np.empty_like(x)
    grey = x.shape[-1] == 1
    for i in range(x.shape[0]):
        img = Image.fromarray(x[i, :, :, 0] if grey else x[i], mode="L" if grey else "RGB")
        arr = np.asarray(fn(img), dtype=np.uint8)
        out[i] = arr[..., None] if grey else arr
    return out


def pixelate(x, c, rngs):
    from PIL import Image

    h, w = x.shape[1:3]
    small = (int(w * c), int(h * c))
    return _pil_each(x, lambda img: img.resize(small, Image.BOX).resize((w, h), Image.BOX))


def jpeg_compression(x, c, rngs):
    from PIL import Image

    def fn(img):
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=int(c))
        buf.seek(0)
        with Image.open(buf) as out:
            return out.copy()

    return _pil_each(x, fn)


def affine_from_points(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The 2 x 3 matrix ``M`` with ``M @ [p, 1] = q`` for three point pairs (OpenCV's
    ``getAffineTransform``), in float64."""
    a = np.hstack([np.asarray(src, np.float64), np.ones((3, 1))])
    return np.linalg.solve(a, np.asarray(dst, np.float64)).T


def elastic_transform(x, c, rngs):
    from scipy.ndimage import affine_transform, gaussian_filter, map_coordinates

    n, h, w, ch = x.shape
    side = float(w)  # the generator's IMSIZE
    amp, sigma, shift = c[0] * side, c[1] * side, c[2] * side
    centre = np.float32([h, w]) // 2  # (x, y) order as in the generator: square images
    sq = min(h, w) // 3
    pts1 = np.float32([centre + sq, [centre[0] + sq, centre[1] - sq], centre - sq])  # (x, y) points
    rows, cols = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    out = np.empty_like(x)
    for i in range(n):
        img = x[i].astype(np.float32) / 255.0
        pts2 = pts1 + rngs[0].uniform(-shift, shift, size=(3, 2)).astype(np.float32)
        m = affine_from_points(pts1, pts2)  # dst = M src in (x, y)
        inv = np.linalg.inv(np.vstack([m, [0.0, 0.0, 1.0]]))
        # scipy works in (row, col) = (y, x): swap the axes of the inverse map
        perm = np.array([[0, 1], [1, 0]])
        mat = perm @ inv[:2, :2] @ perm
        off = perm @ inv[:2, 2]
        warped = np.stack(
            [
                affine_transform(img[..., k], mat, offset=off, order=1, mode="mirror")
                for k in range(ch)
            ],
            axis=-1,
        )
        dx = rngs[1].uniform(-1.0, 1.0, size=(h, w))
        dy = rngs[1].uniform(-1.0, 1.0, size=(h, w))
        if amp > 0:
            dx = (gaussian_filter(dx, sigma, mode="reflect", truncate=3.0) * amp).astype(np.float32)
            dy = (gaussian_filter(dy, sigma, mode="reflect", truncate=3.0) * amp).astype(np.float32)
            coords = [rows + dy, cols + dx]
            warped = np.stack(
                [
                    map_coordinates(warped[..., k], coords, order=1, mode="reflect")
                    for k in range(ch)
                ],
                axis=-1,
            )
        out[i] = to_uint8(warped)
    return out


def rotation(x, c, rngs):
    from scipy.ndimage import rotate

    signs = np.where(rngs[0].random(size=x.shape[0]) < 0.5, -1.0, 1.0)
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        r = rotate(x[i] / 255.0, c * signs[i], axes=(1, 0), reshape=False, order=1, mode="constant")
        out[i] = to_uint8(r)
    return out


#: name -> (function, number of random streams it draws from)
CORRUPTIONS: dict[str, tuple[Callable, int]] = {
    "gaussian_noise": (gaussian_noise, 1),
    "shot_noise": (shot_noise, 1),
    "impulse_noise": (impulse_noise, 2),
    "defocus_blur": (defocus_blur, 0),
    "gaussian_blur": (gaussian_blur, 0),
    "contrast": (contrast, 0),
    "brightness": (brightness, 0),
    "pixelate": (pixelate, 0),
    "jpeg_compression": (jpeg_compression, 0),
    "elastic_transform": (elastic_transform, 2),
    "rotation": (rotation, 1),
}


def check_corruption(name: str) -> str:
    if name not in CORRUPTIONS:
        raise ValueError(f"unknown corruption {name!r}; choose from {sorted(CORRUPTIONS)}")
    return name


def check_severity(severity) -> int:
    if isinstance(severity, bool) or not isinstance(severity, int | np.integer):
        raise ValueError(f"severity must be an integer 1-5, got {severity!r}")
    if int(severity) not in SEVERITIES:
        raise ValueError(f"severity must be an integer 1-5, got {severity!r}")
    return int(severity)


def corrupt(images, name: str, severity: int, seed: int = 0) -> np.ndarray:
    """Apply corruption ``name`` at ``severity`` (1-5) to uint8 images ``(N, H, W[, C])``.

    Returns uint8 images of the input's shape. Deterministic in ``(images, name, severity,
    seed)``; see the module docstring for the definitions.
    """
    check_corruption(name)
    severity = check_severity(severity)
    x = _check_images(images)
    fn, n_streams = CORRUPTIONS[name]
    rngs = corruption_rng(name, severity, seed, max(n_streams, 1))
    out = fn(x, PARAMS[name][severity - 1], rngs)
    return out.reshape(np.shape(images))


def corrupt_all_severities(images, name: str, seed: int = 0) -> np.ndarray:
    """The five severities of ``name`` stacked severity-major, ``(5 N, H, W[, C])`` uint8:
    rows ``(s - 1) N .. s N - 1`` hold severity s (the CIFAR-10-C file layout)."""
    return np.concatenate([corrupt(images, name, s, seed) for s in SEVERITIES])
