"""Model sources and architecture zoos, dispatched by a model's config entry (its *spec*).

A spec's ``source`` names where the network comes from; :data:`SOURCES` maps it to the module
that turns the spec (and, where needed, a checkpoint file) into an ``nn.Module`` in eval mode. Such
a module provides ``load_model(spec, checkpoint=None, device="cpu") -> nn.Module``.
Networks the workflow trains itself (``source: train``) are built from a per-dataset zoo:
:data:`ZOOS` maps a dataset to a module whose ``ARCHITECTURES`` dict maps ``arch`` names to
constructors ``f(num_classes=...) -> nn.Module``. Adding a source or a zoo is one entry.

Modules are imported on first use, so importing this package does not import torch.
"""

from __future__ import annotations

import importlib
import json
import os
from types import ModuleType

from calbench._device import resolve_device  # re-exported: the CLI and tests use it from here
from calbench.data import get_dataset

#: spec["source"] -> module providing ``load_model(spec, checkpoint=None, device="cpu")``
SOURCES: dict[str, str] = {
    "train": "calbench.models.trained",
    "checkpoint": "calbench.models.pretrained",
    "torchhub": "calbench.models.pretrained",
    "timm": "calbench.models.pretrained",
}

#: dataset -> module with ``ARCHITECTURES`` {arch: constructor} for networks trained from scratch
ZOOS: dict[str, str] = {
    "fashion_mnist": "calbench.models.fmnist",
    "cifar10": "calbench.models.cifar_train",
    "cifar100": "calbench.models.cifar_train",
}


def _require(spec, key: str, kind=str):
    if not isinstance(spec, dict):
        raise ValueError(
            f"a model spec must be a mapping (a config entry), got {type(spec).__name__}"
        )
    if key not in spec:
        raise ValueError(f"model spec has no {key!r} entry; add {key}: ... to the model's config")
    value = spec[key]
    if not isinstance(value, kind):
        raise ValueError(f"model spec entry {key!r} must be a {kind.__name__}, got {value!r}")
    return value


def parse_spec(text: str) -> dict:
    """Return the model spec given as inline JSON (``'{"arch": ...}'``) or as a path to a JSON or
    YAML file holding one mapping."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("--spec is empty; pass the model's config entry as JSON or a file path")
    src = text.strip()
    if src.startswith("@"):  # @file, as the other verbs' JSON arguments take it
        src = src[1:]
    if not src.startswith("{"):
        if not os.path.isfile(src):
            raise FileNotFoundError(
                f"--spec {src!r} is neither inline JSON (starting with '{{') nor an existing file"
            )
        with open(src) as fh:
            content = fh.read()
        if src.endswith((".yaml", ".yml")):
            from calbench._yaml import load_yaml  # lazy: code inputs

            return _check_mapping(load_yaml(content, f"spec file {src}"), src)
    else:
        content = src
        src = "--spec"
    try:
        spec = json.loads(content)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{src} is not valid JSON ({exc.msg} at char {exc.pos})") from None
    return _check_mapping(spec, src)


def _check_mapping(spec, where: str) -> dict:
    if not isinstance(spec, dict):
        raise ValueError(
            f"{where} must hold one mapping (a model config entry), got {type(spec).__name__}"
        )
    return spec


def get_source(name: str) -> ModuleType:
    """Return the module implementing model source ``name`` (see :data:`SOURCES`)."""
    if name not in SOURCES:
        raise ValueError(
            f"unknown model source {name!r}; choose one of {sorted(SOURCES)} "
            "(or register a module in calbench.models.SOURCES)"
        )
    return importlib.import_module(SOURCES[name])


def architectures(dataset: str) -> dict:
    """Return the ``{arch: constructor}`` zoo of ``dataset`` (see :data:`ZOOS`)."""
    if dataset not in ZOOS:
        raise ValueError(
            f"no architecture zoo for dataset {dataset!r}; datasets with one: {sorted(ZOOS)}"
        )
    return importlib.import_module(ZOOS[dataset]).ARCHITECTURES


def build_arch(dataset: str, arch: str, **kwargs):
    """Construct an untrained ``arch`` of ``dataset``'s zoo (keyword arguments go to it)."""
    zoo = architectures(dataset)
    if arch not in zoo:
        raise ValueError(
            f"unknown arch {arch!r} for dataset {dataset!r}; choose one of {sorted(zoo)}"
        )
    return zoo[arch](**kwargs)


def build_from_spec(spec: dict):
    """Construct the untrained network a ``source: train`` spec describes (``dataset``, ``arch``,
    optional ``arch_kwargs``)."""
    dataset = _require(spec, "dataset")
    arch = _require(spec, "arch")
    kwargs = spec.get("arch_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ValueError(f"model spec entry 'arch_kwargs' must be a mapping, got {kwargs!r}")
    if "num_classes" not in kwargs:  # the dataset decides the width of the classifier
        kwargs = {**kwargs, "num_classes": int(get_dataset(dataset).NUM_CLASSES)}
    try:
        return build_arch(dataset, arch, **kwargs)
    except TypeError as exc:
        raise ValueError(f"arch_kwargs {kwargs} do not fit arch {arch!r}: {exc}") from None


def load_model(spec: dict, checkpoint=None, device: str = "cpu"):
    """Return the network ``spec`` describes, with its weights, in eval mode on ``device``."""
    source = _require(spec, "source")
    return get_source(source).load_model(spec, checkpoint=checkpoint, device=device)


__all__ = [
    "SOURCES",
    "ZOOS",
    "architectures",
    "build_arch",
    "build_from_spec",
    "get_source",
    "load_model",
    "parse_spec",
    "resolve_device",
]
