"""Corruptions (calbench.shift.corruptions): hand-computed cases, determinism, severity ordering,
value range and dtype, for 28 x 28 grey and 32 x 32 RGB images."""

from __future__ import annotations

import hashlib
import io

import numpy as np
import pytest
from PIL import Image

from calbench.shift import corruptions as C
from calbench.shift.corruptions import CORRUPTIONS, PARAMS, corrupt, corruption_rng

NAMES = sorted(CORRUPTIONS)
RANDOM = ("gaussian_noise", "shot_noise", "impulse_noise", "elastic_transform", "rotation")


def _dist(a, b) -> float:
    return float(np.abs(a.astype(np.float64) - b).mean())


# ------------------------------------------------------------------------------------------
# contract: dtype, shape, range, determinism


@pytest.mark.parametrize("name", NAMES)
def test_dtype_shape_and_range(name, grey, rgb):
    for x in (grey, rgb, grey[..., 0]):
        for s in (1, 5):
            y = corrupt(x, name, s)
            assert y.dtype == np.uint8 and y.shape == x.shape


@pytest.mark.parametrize("name", NAMES)
def test_deterministic_and_prefix_stable(name, grey):
    a = corrupt(grey, name, 3, seed=0)
    b = corrupt(grey, name, 3, seed=0)
    assert np.array_equal(a, b)
    # the first images do not depend on how many follow (one stream per kind of draw)
    assert np.array_equal(corrupt(grey[:5], name, 3), a[:5])
    if name in RANDOM:
        assert not np.array_equal(corrupt(grey, name, 3, seed=1), a)
    else:
        assert np.array_equal(corrupt(grey, name, 3, seed=1), a)


#: SHA-256 prefixes of corrupt(first 8 test images, name, severity 3, seed 0): the same bytes
#: on every machine and every version (a change here changes every corrupted test set).
GOLDEN = {
    "gaussian_noise": "aec4c0966cdd6ab8",
    "shot_noise": "79c02a91290c92b4",
    "impulse_noise": "f195d21a2b28024b",
    "defocus_blur": "4cbc984deeac765e",
    "gaussian_blur": "9cc848c3f210c141",
    "contrast": "e337c44aa741750c",
    "brightness": "7ec733e5c02aedb0",
    "pixelate": "5cf365dbbf8a86ef",
    "jpeg_compression": "ef783ac2caa0b824",
    "elastic_transform": "e2772d91cf0f2e38",
    "rotation": "d75f4173a9175f3e",
}


@pytest.mark.parametrize("name", NAMES)
def test_golden_bytes(name, grey):
    digest = hashlib.sha256(corrupt(grey[:8], name, 3).tobytes()).hexdigest()
    assert digest.startswith(GOLDEN[name])


def test_every_corruption_has_five_parameters():
    assert set(PARAMS) == set(CORRUPTIONS)
    assert all(len(v) == 5 for v in PARAMS.values())


# ------------------------------------------------------------------------------------------
# severity ordering: the distortion grows with the severity


@pytest.mark.parametrize("name", [n for n in NAMES if n != "elastic_transform"])
def test_severity_ordering_grey(name, grey):
    d = [_dist(corrupt(grey, name, s), grey) for s in range(1, 6)]
    assert all(b >= a for a, b in zip(d, d[1:], strict=False)), d
    assert d[-1] > d[0]


@pytest.mark.parametrize("name", [n for n in NAMES if n not in ("elastic_transform", "pixelate")])
def test_severity_ordering_rgb(name, rgb):
    d = [_dist(corrupt(rgb, name, s), rgb) for s in range(1, 6)]
    assert all(b >= a for a, b in zip(d, d[1:], strict=False)), d


def test_pixelate_resolution_decreases_with_severity():
    # on 32 x 32 the pixel distance of the round trip is not monotone for every image set
    # (28 then 27 pixels alias differently); the intermediate resolution is
    sides = [int(32 * c) for c in PARAMS["pixelate"]]
    assert sides == sorted(sides, reverse=True) and len(set(sides)) == 5


def test_elastic_ordering_of_the_elastic_part(grey):
    """The generator's elastic_transform shrinks its random affine part (corner shift .08 S ->
    .03 S) while the smoothed displacement field grows; the field alone orders by severity."""
    d = []
    for amp, sigma, _ in PARAMS["elastic_transform"]:
        rngs = corruption_rng("elastic_transform", 1, 0, 2)
        d.append(_dist(C.elastic_transform(grey, (amp, sigma, 0.0), rngs), grey))
    assert d[0] == 0.0  # severity 1 has no displacement field
    assert all(b > a for a, b in zip(d, d[1:], strict=False)), d


# ------------------------------------------------------------------------------------------
# hand-computed cases


def test_contrast_two_pixels():
    # mean 100/255; severity 1 (c = .75): (x - m) .75 + m -> 25/255 and 175/255
    x = np.zeros((1, 4, 4, 1), np.uint8)
    x[0, :2] = 200
    y = corrupt(x, "contrast", 1)
    assert set(np.unique(y)) <= {24, 25, 174, 175}
    assert y[0, 0, 0, 0] in (174, 175) and y[0, 3, 3, 0] in (24, 25)


def test_contrast_is_per_channel():
    x = np.zeros((1, 4, 4, 3), np.uint8)
    x[..., 0] = 90  # a constant channel keeps its value
    x[0, :2, :, 1] = 200
    y = corrupt(x, "contrast", 5)
    assert np.all(y[..., 0] >= 89) and np.all(y[..., 0] <= 90)


def test_brightness_grey_and_rgb():
    # grey: 100/255 + .05 -> 112.75 -> 112 (truncation, as the published files)
    g = np.full((1, 4, 4, 1), 100, np.uint8)
    assert np.all(corrupt(g, "brightness", 1) == 112)
    # pure red (200, 0, 0): HSV value 200/255 + .05 = .8333 -> (212.5, 0, 0) -> 212
    r = np.zeros((1, 4, 4, 3), np.uint8)
    r[..., 0] = 200
    y = corrupt(r, "brightness", 1)
    assert np.all(y[..., 0] == 212) and np.all(y[..., 1:] == 0)
    # a grey RGB pixel brightens like the grey image
    assert np.all(corrupt(np.repeat(g, 3, axis=-1), "brightness", 1) == 112)


def test_defocus_kernel_by_hand():
    # radius .3 covers only the centre; the 3 x 3 Gaussian of std .4 gives the centre weight
    # (1 / (1 + 2 exp(-1 / .32)))^2 and the edge neighbours that times exp(-1 / .32)
    k = C.disk_kernel(0.3, 0.4)
    e = np.exp(-1.0 / 0.32)
    centre = (1.0 / (1.0 + 2.0 * e)) ** 2
    assert k.shape == (17, 17)
    assert k[8, 8] == pytest.approx(centre, rel=1e-6)
    assert k[8, 9] == pytest.approx(centre * e, rel=1e-6)
    assert k[9, 9] == pytest.approx(centre * e * e, rel=1e-5)
    assert k.sum() == pytest.approx(1.0, rel=1e-6)
    # radius 1 covers the centre and its 4 neighbours before smoothing
    assert (C.disk_kernel(1.0, 1e-3) > 1e-3).sum() == 5


def test_defocus_of_a_point():
    x = np.zeros((1, 9, 9, 1), np.uint8)
    x[0, 4, 4, 0] = 255
    y = corrupt(x, "defocus_blur", 1)
    k = C.disk_kernel(0.3, 0.4).astype(np.float64)
    assert y[0, 4, 4, 0] == int(255 * k[8, 8])
    assert y[0, 4, 5, 0] == int(255 * k[8, 9])


@pytest.mark.parametrize("name", ["defocus_blur", "gaussian_blur", "elastic_transform", "pixelate"])
def test_constant_image_stays_constant(name):
    x = np.full((3, 28, 28, 1), 128, np.uint8)
    y = corrupt(x, name, 5)
    assert np.all(np.abs(y.astype(int) - 128) <= 1)


def test_gaussian_blur_preserves_mass():
    x = np.zeros((1, 15, 15, 1), np.uint8)
    x[0, 7, 7, 0] = 255
    y = corrupt(x, "gaussian_blur", 5)  # std 1 pixel: centre weight 1 / (2 pi) ~ .159
    assert y[0, 7, 7, 0] == pytest.approx(255 / (2 * np.pi), abs=2)
    # mass 255 is kept up to truncation, < 1 level on each of the 9 x 9 pixels of the support
    assert 255 - 81 < int(y.sum()) <= 255 and np.count_nonzero(y) <= 81


def test_gaussian_noise_statistics():
    x = np.full((200, 28, 28, 1), 128, np.uint8)
    y = corrupt(x, "gaussian_noise", 5).astype(np.float64)  # std .10 * 255 = 25.5
    assert y.std() == pytest.approx(25.5, rel=0.02)
    assert y.mean() == pytest.approx(127.5, abs=0.3)  # truncation: -0.5 on average


def test_shot_noise_statistics():
    assert np.all(corrupt(np.zeros((2, 8, 8, 1), np.uint8), "shot_noise", 5) == 0)
    x = np.full((200, 28, 28, 1), 102, np.uint8)  # .4: Poisson(.4 c) / c has variance .4 / c
    y = corrupt(x, "shot_noise", 5).astype(np.float64) / 255
    assert y.var() == pytest.approx(0.4 / 50, rel=0.05)


def test_impulse_noise_share():
    x = np.full((100, 28, 28, 1), 128, np.uint8)
    y = corrupt(x, "impulse_noise", 5)  # c = .07 of the values, half salt, half pepper
    changed = y != 128
    assert changed.mean() == pytest.approx(0.07, abs=0.005)
    assert set(np.unique(y[changed])) == {0, 255}
    assert (y == 255).mean() == pytest.approx(0.035, abs=0.004)


def test_pixelate_matches_box_round_trip(grey):
    y = corrupt(grey[:3], "pixelate", 5)  # int(28 * .65) = 18
    for i in range(3):
        img = Image.fromarray(grey[i, :, :, 0])
        ref = img.resize((18, 18), Image.BOX).resize((28, 28), Image.BOX)
        assert np.array_equal(y[i, :, :, 0], np.asarray(ref))


def test_jpeg_matches_pil_at_the_quality(grey):
    y = corrupt(grey[:2], "jpeg_compression", 5)  # quality 40
    buf = io.BytesIO()
    Image.fromarray(grey[0, :, :, 0]).save(buf, "JPEG", quality=40)
    assert np.array_equal(y[0, :, :, 0], np.asarray(Image.open(io.BytesIO(buf.getvalue()))))


def test_affine_from_points_by_hand():
    src = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    m = C.affine_from_points(src, src + [1.0, 2.0])
    assert np.allclose(m, [[1, 0, 1], [0, 1, 2]])
    m = C.affine_from_points(src, src * 2.0)
    assert np.allclose(m, [[2, 0, 0], [0, 2, 0]])


def test_rotation_by_hand():
    x = np.full((4, 28, 28, 1), 255, np.uint8)
    y = corrupt(x, "rotation", 3)  # 45 degrees: the corners leave the image (black)
    assert np.all(y[:, 0, 0] == 0) and np.all(y[:, 14, 14] >= 254)
    # a 90-degree rotation of an asymmetric image is exact
    z = np.zeros((1, 5, 5, 1), np.uint8)
    z[0, 0, 2] = 200
    r = C.rotation(z, 90.0, corruption_rng("rotation", 1, 0, 1))
    assert r[0, :, :, 0].max() >= 199 and r[0, 0, 2, 0] == 0
    assert (r[0, 2, 0, 0] >= 199) or (r[0, 2, 4, 0] >= 199)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "fog", "severity": 1}, "unknown corruption"),
        ({"name": "contrast", "severity": 6}, "severity must be"),
        ({"name": "contrast", "severity": True}, "severity must be"),
    ],
)
def test_bad_arguments(kwargs, match, grey):
    with pytest.raises(ValueError, match=match):
        corrupt(grey, **kwargs)


def test_bad_images():
    with pytest.raises(ValueError, match="uint8"):
        corrupt(np.zeros((2, 28, 28, 1), np.float32), "contrast", 1)
    with pytest.raises(ValueError, match="shape"):
        corrupt(np.zeros((2, 28, 28, 2), np.uint8), "contrast", 1)
