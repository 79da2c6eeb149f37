"""Published pretrained models: registry entries -> verified files -> ``nn.Module`` in eval mode.

Three sources (field ``source`` of a registry entry, see ``config/coursework.yaml``):

* ``checkpoint``: a state dict file built into a package architecture (``arch``:
  ``huyvnphan_<name>`` from :mod:`calbench.models.cifar`, ``focal_<name>`` from
  :mod:`calbench.models.focal`). The file may be a member of an archive (``archive_member``; the
  huyvnphan v3.0.1 weights zip) and may carry a key prefix to strip (``strip_prefix``; the
  ``module.`` that ``nn.DataParallel`` adds to the focal_calibration checkpoints).
* ``torchhub``: architecture code from a torch.hub repository pinned to a commit (``hub.repo``,
  ``hub.ref``, ``hub.entry``), read from a local checkout (``source='local'``, never from the
  network), built with ``pretrained=False`` and given the verified state dict.
* ``timm``: ``timm.create_model(<name.tag>, pretrained=True, pretrained_cfg_overlay={file: ...})``
  so timm applies its own key conversions to the verified local file.

Files land at ``<resources>/checkpoints/<dataset>/<model>/checkpoint.pt`` (the workflow's
``download_checkpoint`` output, so ``calbench stage`` and the workflow share one layout; archives
at ``<resources>/archives/<file>``, torch.hub code at ``<resources>/hub/<owner>_<repo>_<ref>``). Each is verified against the registry's pinned ``sha256``
(a prefix of at least 8 hex digits, as in torch.hub names) or, where none is published, against
the SHA-256 and size recorded in ``<resources>/checksums.lock`` when it was first fetched
(:mod:`calbench.lockfile`; "pinned on first use"), on every later download and load. With
``strict=True`` files without a published checksum are refused. All state dicts are read with
``torch.load(..., weights_only=True)``.

This module builds and loads the networks; :mod:`calbench.models.entries` reads the registry and
names the files' places, :mod:`calbench.models.pins` verifies files against their pins and
:mod:`calbench.models.staging` fetches them (staging imports this module, to prove a file with
:func:`prove_checkpoint` before it pins it; not the other way round). The public names of
entries and pins are importable from here too.
Torch is imported only inside the functions that need it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from calbench.io import torch_load_reason
from calbench.lockfile import PinError
from calbench.models.entries import (
    CHECKPOINT_FILE,
    SOURCES,
    archive_path,
    check_entry,
    checkpoint_path,
    extract_member,
    get_entry,
    hub_dir_candidates,
    load_registry,
)
from calbench.models.pins import checksum_provenance, refuse_unpinned, verify_file

# --------------------------------------------------------------------------- architectures


def build_architecture(arch: str, num_classes: int):
    """Build a package architecture by registry name (``huyvnphan_<n>`` or ``focal_<n>``).

    Focal architectures are built with ``temp=1.0`` as in the study (logits are divided by it).
    """
    family, _, base = arch.partition("_")
    if family == "huyvnphan":
        from calbench.models.cifar import ARCHITECTURES  # lazy: pulls torch
    elif family == "focal":
        from calbench.models.focal import ARCHITECTURES  # lazy: pulls torch
    else:
        raise ValueError(f"unknown architecture {arch!r}; use huyvnphan_<name> or focal_<name>")
    if base not in ARCHITECTURES:
        raise ValueError(
            f"unknown architecture {arch!r}; known: {sorted(family + '_' + a for a in ARCHITECTURES)}"
        )
    if family == "focal":
        return ARCHITECTURES[base](num_classes=num_classes, temp=1.0)
    return ARCHITECTURES[base](num_classes=num_classes)


# --------------------------------------------------------------------------- state dicts


def strip_prefix(state_dict: Mapping, prefix: str = "module.") -> dict:
    """Remove ``prefix`` from every key that has it (``nn.DataParallel`` checkpoints)."""
    n = len(prefix)
    return {(k[n:] if k.startswith(prefix) else k): v for k, v in state_dict.items()}


def read_state_dict(path: str | os.PathLike, *, prefix: str | None = None) -> dict:
    """Read a state dict with ``torch.load(weights_only=True)``; unwrap ``{'state_dict': ...}``."""
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # pickle errors, truncated zip, non-weights objects
        raise ValueError(
            f"{path} is not a loadable state dict ({type(exc).__name__}: {torch_load_reason(exc)}); "
            "delete it and download again"
        ) from None
    if isinstance(obj, Mapping) and "state_dict" in obj and isinstance(obj["state_dict"], Mapping):
        obj = obj["state_dict"]
    if not isinstance(obj, Mapping):
        raise ValueError(f"{path} holds a {type(obj).__name__}, not a state dict mapping")
    return strip_prefix(obj, prefix) if prefix else dict(obj)


def load_weights(model, state_dict: Mapping, *, source: str = "checkpoint"):
    """``model.load_state_dict(state_dict, strict=True)`` with a one-line error on mismatch."""
    result_missing = set(model.state_dict()) - set(state_dict)
    unexpected = set(state_dict) - set(model.state_dict())
    if result_missing or unexpected:
        show = lambda s: sorted(s)[:3]  # noqa: E731
        raise ValueError(
            f"{source} does not fit the architecture: {len(result_missing)} missing key(s) {show(result_missing)}, "
            f"{len(unexpected)} unexpected {show(unexpected)}; check arch/strip_prefix in the registry"
        )
    try:
        model.load_state_dict(state_dict, strict=True)
    except RuntimeError as exc:
        first = str(exc).replace("\n", " ")[:300]
        raise ValueError(
            f"{source} does not fit the architecture ({first}); check arch/num_classes"
        ) from None
    return model


# --------------------------------------------------------------------------- proof for pinning


def prove_checkpoint(
    name: str,
    entry: Mapping,
    path: str | os.PathLike,
    *,
    resources: str | os.PathLike = "resources",
    on_purpose: bool = False,
) -> None:
    """Raise :class:`calbench.lockfile.PinError` unless ``path`` (a local weights file, or the
    entry's archive) is shown to be model ``name``'s weights, so that it may be pinned on first
    use: it must load into the configured architecture with ``torch.load(weights_only=True)``
    and ``load_state_dict(strict=True)`` (every key and shape). An entry with ``expected_acc``
    is refused unless ``on_purpose`` (``--repin``): reaching that accuracy needs the test set and
    a pass of inference, which a download does not have at hand.
    """
    ckpt = entry.get("checkpoint") or {}
    path = Path(path)
    how = (
        f"check the file yourself, then pin it on purpose: calbench download-checkpoint "
        f"--config <config> --model {name} --file {path} --repin"
    )
    with tempfile.TemporaryDirectory(prefix="calbench-proof-") as tmp:
        weights = path
        try:
            if ckpt.get("archive_member"):
                weights = Path(tmp) / "member.pt"
                extract_member(path, ckpt["archive_member"], weights)
            source = entry.get("source")
            prefix = ckpt.get("strip_prefix")
            if source == "checkpoint":
                model = build_architecture(entry["arch"], int(entry["num_classes"]))
                load_weights(model, read_state_dict(weights, prefix=prefix), source=str(path))
            elif source == "torchhub":
                import torch

                code = resolve_hub_dir(entry, resources, (entry.get("hub") or {}).get("dir"))
                model = torch.hub.load(
                    str(code), entry["hub"]["entry"], source="local", pretrained=False
                )
                load_weights(model, read_state_dict(weights, prefix=prefix), source=str(path))
            elif source == "timm":
                build_timm(entry["timm"]["name"], weights, int(entry["num_classes"]))
            else:
                raise ValueError(f"source {source!r} has no architecture to load it into")
        except (ValueError, FileNotFoundError, RuntimeError, ImportError, KeyError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise PinError(
                f"model {name}: {path} is not proven to be its weights ({reason}); nothing was "
                f"pinned. Pass the published file, or add its sha256 to the config"
            ) from None
    expected = entry.get("expected_acc")
    if expected is not None and not on_purpose:
        raise PinError(
            f"model {name}: {path} loads into {entry.get('arch') or entry.get('source')}, but its "
            f"expected accuracy ({expected}) cannot be checked at download time (it needs the test "
            f"set); nothing was pinned. To trust it: {how}"
        )


# --------------------------------------------------------------------------- models


def resolve_hub_dir(
    entry: Mapping, resources: str | os.PathLike = "resources", hub_dir=None
) -> Path:
    """The checkout holding ``hubconf.py`` for the entry's pinned ``hub.repo@hub.ref``."""
    candidates = [Path(hub_dir)] if hub_dir else hub_dir_candidates(entry, resources)
    for c in candidates:
        if (c / "hubconf.py").is_file():
            return c
    hub = entry["hub"]
    raise FileNotFoundError(
        f"torch.hub code for {hub['repo']}@{hub['ref'][:7]} not found in {', '.join(map(str, candidates))}; "
        f"run `calbench stage` (fetches https://github.com/{hub['repo']}/archive/{hub['ref']}.zip) or "
        f"`git clone https://github.com/{hub['repo']} {candidates[0]} && git -C {candidates[0]} checkout {hub['ref']}`"
    )


def load_pretrained(
    name: str,
    entry: Mapping,
    *,
    resources: str | os.PathLike = "resources",
    checkpoint: str | os.PathLike | None = None,
    hub_dir: str | os.PathLike | None = None,
    device: str = "cpu",
):
    """Build model ``name`` with its verified pretrained weights, in eval mode on ``device``.

    ``checkpoint`` overrides the weights file path (default: :func:`checkpoint_path`); the file
    must already be in place (see :func:`download_checkpoint`); nothing is downloaded here.
    """
    source = entry["source"]
    ckpt = entry.get("checkpoint") or {}
    path = (
        Path(checkpoint)
        if checkpoint
        else (checkpoint_path(name, entry, resources) if ckpt else None)
    )
    if path is not None:
        pin = None if ckpt.get("archive_member") else ckpt.get("sha256")
        verify_file(path, pin or ckpt.get("member_sha256"), resources=resources)
    if source == "checkpoint":
        model = build_architecture(entry["arch"], int(entry["num_classes"]))
        load_weights(
            model, read_state_dict(path, prefix=ckpt.get("strip_prefix")), source=str(path)
        )
    elif source == "torchhub":
        import torch

        code = resolve_hub_dir(entry, resources, hub_dir)
        model = torch.hub.load(str(code), entry["hub"]["entry"], source="local", pretrained=False)
        load_weights(
            model, read_state_dict(path, prefix=ckpt.get("strip_prefix")), source=str(path)
        )
    elif source == "timm":
        model = build_timm(entry["timm"]["name"], path, int(entry["num_classes"]))
    else:  # check_entry guards this
        raise ValueError(f"model {name}: unknown source {source!r}")
    return model.to(device).eval()


def load_model(spec: Mapping, checkpoint=None, device: str = "cpu"):
    """The :mod:`calbench.models` source interface: ``spec`` is a registry entry, ``checkpoint`` the
    weights file ``calbench download-checkpoint`` placed (required except for weightless timm).

    torch.hub code is looked up under ``spec['hub']['dir']`` if given, else ``resources/hub``.
    """
    ckpt = spec.get("checkpoint") or {}
    if checkpoint is None and ckpt:
        raise ValueError(
            "pass the weights file (the output of `calbench download-checkpoint`) as checkpoint"
        )
    hub = spec.get("hub") or {}
    return load_pretrained(
        str(spec.get("name", "model")),
        spec,
        resources=spec.get("resources", "resources"),
        checkpoint=checkpoint,
        hub_dir=hub.get("dir"),
        device=device,
    )


def build_timm(model_name: str, weights: str | os.PathLike | None, num_classes: int | None = None):
    """``timm.create_model`` with an explicit ``name.tag``; weights only from a local file.

    The tag is required: a bare ``tf_efficientnet_b8`` resolves to the AdvProp weights
    (``.ap_in1k``, mean/std 0.5) in timm >= 0.9, not the RandAugment weights the study used.
    """
    import timm

    if "." not in model_name:
        raise ValueError(
            f"timm model {model_name!r} has no pretrained tag; pin it (e.g. tf_efficientnet_b8.ra_in1k)"
        )
    kwargs = {} if num_classes is None else {"num_classes": num_classes}
    if weights is None:
        return timm.create_model(model_name, pretrained=False, **kwargs)
    return timm.create_model(
        model_name, pretrained=True, pretrained_cfg_overlay={"file": str(weights)}, **kwargs
    )


__all__ = [
    "CHECKPOINT_FILE",
    "SOURCES",
    "archive_path",
    "build_architecture",
    "build_timm",
    "check_entry",
    "checkpoint_path",
    "checksum_provenance",
    "get_entry",
    "hub_dir_candidates",
    "load_model",
    "load_pretrained",
    "load_registry",
    "load_weights",
    "prove_checkpoint",
    "read_state_dict",
    "refuse_unpinned",
    "resolve_hub_dir",
    "strip_prefix",
    "verify_file",
]
