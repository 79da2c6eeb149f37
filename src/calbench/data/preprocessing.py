"""Named evaluation preprocessing presets of the replicated study (Vasilev 2021, section 5.1).

Every preset is a plain dict (no torch import until :func:`build_transform` is called):
``size`` (input side), ``resize`` (shorter side before the centre crop, or None for no resize),
``interpolation`` and per-channel ``mean``/``std`` applied after ``ToTensor``.

* ``cifar10_huy``: huyvnphan/PyTorch_CIFAR10 v3.0.1 data.py statistics.
* ``cifar100_chen``: chenyaofo's CIFAR-100 training statistics.
* ``cifar10_focal``: focal_calibration ``Data/cifar10.py`` test loader.
* ``cifar100_focal``: focal_calibration ``Data/cifar100.py`` test loader, which normalises with
  the **ImageNet** mean/std although training used CIFAR statistics; the study's group-2
  CIFAR-100 numbers were produced with it, so it is reproduced here on purpose.
* ``tiny_focal``: 64x64 Tiny ImageNet, ImageNet statistics, no resize.
* ``timm_*``: the eval transforms timm resolves for the four ImageNet models (resize the shorter
  side to floor(size / crop_pct), centre-crop, normalise); ``timm`` alone means "ask timm's own
  data config for the model" (:func:`timm_data_config`).
"""

from __future__ import annotations

import math

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _preset(size, mean, std, resize=None, interpolation="bilinear", crop_pct=None):
    return {
        "size": size,
        "resize": resize,
        "interpolation": interpolation,
        "crop_pct": crop_pct,
        "mean": tuple(mean),
        "std": tuple(std),
    }


PRESETS: dict[str, dict] = {
    "cifar10_huy": _preset(32, (0.4914, 0.4822, 0.4465), (0.2471, 0.2435, 0.2616)),
    "cifar100_chen": _preset(32, (0.5070, 0.4865, 0.4409), (0.2673, 0.2564, 0.2761)),
    "cifar10_focal": _preset(32, (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)),
    "cifar100_focal": _preset(32, IMAGENET_MEAN, IMAGENET_STD),
    "tiny_focal": _preset(64, IMAGENET_MEAN, IMAGENET_STD),
    "timm_224_bilin": _preset(224, IMAGENET_MEAN, IMAGENET_STD, 256, "bilinear", 0.875),
    "timm_224_bicub": _preset(224, IMAGENET_MEAN, IMAGENET_STD, 256, "bicubic", 0.875),
    "timm_672_bicub": _preset(672, IMAGENET_MEAN, IMAGENET_STD, 704, "bicubic", 0.954),
}


def get_preset(name: str) -> dict:
    """Return a copy of the preset ``name``; a one-line ValueError lists the known names."""
    if name not in PRESETS:
        raise ValueError(
            f"unknown preprocessing preset {name!r}; use one of {sorted(PRESETS)} "
            "(or 'timm' to take the model's own timm data config)"
        )
    return dict(PRESETS[name])


def resize_side(size: int, crop_pct: float) -> int:
    """timm's eval resize rule: shorter side = floor(size / crop_pct) (e.g. 224/0.875 = 256)."""
    return int(math.floor(size / crop_pct))


def preset_from_timm_config(cfg: dict) -> dict:
    """Convert a timm data config (``resolve_data_config`` output) to a preset dict."""
    size = int(cfg["input_size"][-1])
    crop_pct = float(cfg.get("crop_pct") or 1.0)
    return _preset(
        size,
        cfg["mean"],
        cfg["std"],
        resize_side(size, crop_pct),
        cfg.get("interpolation", "bilinear"),
        crop_pct,
    )


def timm_data_config(model_name: str, model=None) -> dict:
    """timm's own eval data config for ``model_name`` (a ``name.tag``), as timm resolves it.

    With ``model`` (a timm model) the config attached to that model is used; otherwise the
    registered pretrained config of the tag is read without building the network.
    """
    import timm
    from timm.data import resolve_data_config

    if model is not None:
        return resolve_data_config({}, model=model)
    cfg = timm.models.get_pretrained_cfg(model_name)
    if cfg is None:
        raise ValueError(f"timm knows no pretrained config {model_name!r}; check the name.tag")
    return resolve_data_config({}, pretrained_cfg=cfg.to_dict())


def build_transform(preset: str | dict):
    """torchvision transform for a preset name or dict: [Resize, CenterCrop,] ToTensor, Normalize."""
    from torchvision import transforms as T

    p = get_preset(preset) if isinstance(preset, str) else preset
    steps = []
    if p.get("resize"):
        modes = {"bilinear": T.InterpolationMode.BILINEAR, "bicubic": T.InterpolationMode.BICUBIC}
        if p["interpolation"] not in modes:
            raise ValueError(
                f"interpolation must be one of {sorted(modes)}, got {p['interpolation']!r}"
            )
        steps += [
            T.Resize(p["resize"], interpolation=modes[p["interpolation"]]),
            T.CenterCrop(p["size"]),
        ]
    steps += [T.ToTensor(), T.Normalize(p["mean"], p["std"])]
    return T.Compose(steps)


def transform_for(spec: dict):
    """The PIL -> tensor eval transform of a model spec: its ``preprocessing`` preset, or with
    ``preprocessing: timm`` the data config timm resolves for ``spec['timm']['name']``."""
    preset = spec.get("preprocessing")
    if not preset:
        raise ValueError(
            "the model entry needs a 'preprocessing' preset (e.g. timm_224_bilin, or timm)"
        )
    if preset == "timm":
        name = (spec.get("timm") or {}).get("name")
        if not name:
            raise ValueError(
                "preprocessing: timm needs timm: {name: <name.tag>} in the model entry"
            )
        return build_transform(preset_from_timm_config(timm_data_config(name)))
    return build_transform(preset)


def uint8_preprocessor(preset: str | dict):
    """``f(uint8 batch (B, C, H, W) on any device) -> float32``: x/255 then per-channel normalise.

    Equal to ``ToTensor`` + ``Normalize`` for presets without resize (the CIFAR and Tiny ImageNet
    ones); presets that resize (ImageNet) must go through :func:`build_transform` on PIL images.
    """
    p = get_preset(preset) if isinstance(preset, str) else preset
    if p.get("resize"):
        raise ValueError("this preset resizes images; use build_transform on PIL images instead")
    mean, std = p["mean"], p["std"]

    def preprocess(x):
        import torch

        m = torch.tensor(mean, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
        s = torch.tensor(std, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
        return (x.to(torch.float32) / 255.0 - m) / s

    return preprocess
