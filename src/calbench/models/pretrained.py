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

This module imports torch only inside the functions that need it.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from calbench.data.download import ChecksumError, fetch, verify
from calbench.io import atomic_path, torch_load_reason
from calbench.lockfile import LOCK_NAME, Lock, PinError, lock_key

SOURCES = ("checkpoint", "torchhub", "timm")
_REQUIRED = ("dataset", "source", "num_classes")


# --------------------------------------------------------------------------- registry


def load_registry(path: str | os.PathLike) -> dict:
    """Read a registry YAML (``models:`` mapping) and check every entry; return the whole document."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"registry {path} not found; pass --config config/coursework.yaml")
    doc = yaml.safe_load(path.read_text()) or {}
    models = doc.get("models")
    if not isinstance(models, Mapping) or not models:
        raise ValueError(f"{path} has no 'models:' mapping; add one entry per model")
    for name, entry in models.items():
        source = (entry or {}).get("source")
        if source == "logits":  # a logits file, not a network (calbench.logits_sources)
            from calbench.logits_sources import check_entry as check_logits_entry

            check_logits_entry(name, entry)
        elif source != "train":  # trained by the workflow: nothing to fetch
            check_entry(name, entry)
    return doc


def check_entry(name: str, entry: Mapping) -> None:
    """Raise a one-line ValueError if a registry entry lacks what its source needs."""
    import re

    if not re.fullmatch(r"[a-z0-9][a-z0-9_]*", str(name)):
        raise ValueError(f"model name {name!r} is not a slug; use lowercase letters, digits, '_'")
    missing = [k for k in _REQUIRED if k not in entry]
    if missing:
        raise ValueError(
            f"model {name}: missing field(s) {missing}; add them to the registry entry"
        )
    source = entry["source"]
    if source not in SOURCES:
        raise ValueError(f"model {name}: source {source!r} is not one of {list(SOURCES)}")
    need = {
        "checkpoint": ("arch", "checkpoint"),
        "torchhub": ("hub", "checkpoint"),
        "timm": ("timm",),
    }
    missing = [k for k in need[source] if not entry.get(k)]
    if missing:
        raise ValueError(f"model {name}: source {source} needs field(s) {missing}")
    ckpt = entry.get("checkpoint") or {}
    if ckpt and not ckpt.get("filename"):
        raise ValueError(f"model {name}: checkpoint.filename is missing; name the file to fetch")


def get_entry(registry: Mapping, name: str) -> dict:
    """The entry of model ``name`` in a registry document (one-line error listing near names)."""
    models = registry.get("models", registry)
    if name not in models:
        import difflib

        near = difflib.get_close_matches(name, list(models), n=3)
        hint = f"; did you mean {near}?" if near else ""
        raise ValueError(f"model {name!r} is not in the registry{hint}")
    return dict(models[name])


# --------------------------------------------------------------------------- architectures


def build_architecture(arch: str, num_classes: int):
    """Build a package architecture by registry name (``huyvnphan_<n>`` or ``focal_<n>``).

    Focal architectures are built with ``temp=1.0`` as in the study (logits are divided by it).
    """
    family, _, base = arch.partition("_")
    if family == "huyvnphan":
        from calbench.models.cifar import ARCHITECTURES
    elif family == "focal":
        from calbench.models.focal import ARCHITECTURES
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


# --------------------------------------------------------------------------- files


CHECKPOINT_FILE = "checkpoint.pt"


def checkpoint_path(name: str, entry: Mapping, resources: str | os.PathLike = "resources") -> Path:
    """Where the (extracted) weights file of model ``name`` lives under ``resources``: the path
    the workflow's ``download_checkpoint`` rule writes (``checkpoints/<dataset>/<model>/checkpoint.pt``)."""
    return Path(resources) / "checkpoints" / entry["dataset"] / name / CHECKPOINT_FILE


def archive_path(entry: Mapping, resources: str | os.PathLike = "resources") -> Path:
    """Where a shared weights archive (e.g. the huyvnphan zip) is kept under ``resources``."""
    return Path(resources) / "archives" / entry["checkpoint"]["filename"]


def verify_file(
    path: str | os.PathLike, sha256: str | None = None, *, resources: str | os.PathLike = "resources"
) -> str:
    """Verify against the pinned ``sha256`` or else the record in ``<resources>/checksums.lock``
    (if any); return the pin status (``published``, ``first-use`` or ``unpinned``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist; run `calbench download-checkpoint` or `calbench stage`"
        )
    if sha256:
        verify(path, sha256=sha256)
        return "published"
    try:
        return _lock(resources).check(lock_key(path, resources), path, record=False)
    except PinError as exc:
        raise ChecksumError(f"{exc} (digest recorded when the file was first fetched)") from None


def _lock(resources: str | os.PathLike) -> Lock:
    return Lock(Path(resources) / LOCK_NAME)


def refuse_unpinned(what: str, fix: str) -> PinError:
    """The strict-mode error for a file without a published checksum."""
    return PinError(
        f"{what} has no published sha256 and strict checksums are on; {fix}, or turn strict "
        "mode off (strict_checksums: false / no --strict-checksums) to pin it on first use"
    )


def _fetch_pinned(
    target: Path, key: str, lock: Lock, pin: str | None, **fetch_kwargs
) -> tuple[Path, str]:
    """:func:`fetch` against the published ``pin``, else the lock file's record of ``key``; a
    file fetched for the first time without either is recorded (pinned on first use)."""
    recorded = None if pin else (lock.get(key) or {}).get("sha256")
    try:
        fetched = fetch(target, sha256=pin or recorded, **fetch_kwargs)
    except (FileNotFoundError, ChecksumError) as exc:
        if recorded:
            raise type(exc)(f"{exc} (pinned on first use in {lock.path})") from None
        raise
    source = ", ".join(fetch_kwargs.get("urls") or ()) or str(fetch_kwargs.get("filename") or "")
    return fetched, lock.check(key, fetched, published=pin, source=source)


def _extract_member(archive: Path, member: str, dest: Path) -> None:
    """Copy ``member`` (matched by path suffix, so a top-level folder is allowed) out of a zip."""
    try:
        zf = zipfile.ZipFile(archive)
    except zipfile.BadZipFile:
        raise ValueError(f"{archive} is not a zip archive; delete it and download again") from None
    with zf:
        names = [n for n in zf.namelist() if n == member or n.endswith("/" + member)]
        if not names:
            raise ValueError(f"{archive} has no member {member!r}; is it the right archive?")
        with (
            zf.open(sorted(names, key=len)[0]) as src,
            atomic_path(dest) as tmp,
            open(tmp, "wb") as out,
        ):
            shutil.copyfileobj(src, out, 1 << 20)


def download_checkpoint(
    name: str,
    entry: Mapping,
    resources: str | os.PathLike = "resources",
    mirrors: Iterable[str | os.PathLike] = (),
    local_file: str | os.PathLike | None = None,
    timeout: float = 60.0,
    out: str | os.PathLike | None = None,
    strict: bool = False,
) -> Path:
    """Place the verified weights file of model ``name`` under ``resources`` and return its path.

    ``local_file`` (a user-supplied copy of the file or archive; default the entry's
    ``checkpoint.local_path``) and ``mirrors`` (directories holding files under their registry
    ``filename``) are tried before the registry's ``urls``. Files without a published checksum
    are pinned on first use in ``<resources>/checksums.lock`` and verified against it on every
    later fetch; ``strict=True`` refuses them. ``out`` overrides the destination
    (:func:`checkpoint_path`); shared archives stay under ``resources/archives``.
    """
    if entry.get("source") == "timm" and not entry.get("checkpoint"):
        raise ValueError(
            f"model {name}: no checkpoint file in the registry (timm would download it itself)"
        )
    ckpt = entry["checkpoint"]
    mirrors = list(mirrors)
    if local_file is None and ckpt.get("local_path"):
        local_file = ckpt["local_path"]
    if local_file is not None:
        local_file = Path(local_file).expanduser()
        if not local_file.is_file():
            raise FileNotFoundError(
                f"--file {local_file} does not exist; pass the downloaded {ckpt['filename']}"
            )
        mirrors = [local_file.parent, *mirrors]
        filename = local_file.name
    else:
        filename = ckpt["filename"]
    dest = Path(out) if out is not None else checkpoint_path(name, entry, resources)
    target = archive_path(entry, resources) if ckpt.get("archive_member") else dest
    pin = ckpt.get("sha256")
    if strict and not pin:
        raise refuse_unpinned(
            f"model {name}: {ckpt['filename']}", "add checkpoint.sha256 to its config entry"
        )
    lock = _lock(resources)
    fetched, _ = _fetch_pinned(
        target,
        lock_key(target, resources),
        lock,
        pin,
        urls=ckpt.get("urls") or (),
        mirrors=mirrors,
        filename=filename,
        timeout=timeout,
    )
    if ckpt.get("archive_member"):
        # a member of a published-pinned archive is vouched for by the archive's pin
        member_pin = ckpt.get("member_sha256") or pin
        if dest.exists():
            verify_file(dest, ckpt.get("member_sha256"), resources=resources)
        else:
            _extract_member(fetched, ckpt["archive_member"], dest)
            if ckpt.get("member_sha256"):
                verify(dest, sha256=ckpt["member_sha256"])
        source = f"{ckpt['filename']}:{ckpt['archive_member']}"
        lock.check(lock_key(dest, resources), dest, published=member_pin, source=source)
    return dest


def stage_model(
    name: str,
    entry: Mapping,
    resources: str | os.PathLike = "resources",
    mirrors: Iterable[str | os.PathLike] = (),
    *,
    local_file: str | os.PathLike | None = None,
    timeout: float = 60.0,
    out: str | os.PathLike | None = None,
    strict: bool = False,
) -> Path:
    """Everything model ``name`` needs offline: the verified weights (:func:`download_checkpoint`)
    and, for ``source: torchhub``, the pinned hub code (:func:`stage_hub_code`). The one code path
    of ``calbench download-checkpoint`` (the workflow rule) and ``calbench stage``."""
    if not entry.get("checkpoint"):
        raise ValueError(
            f"model {name} has no checkpoint entry (source {entry.get('source')}); add "
            "checkpoint: {filename, urls, sha256} so the weights can be verified"
        )
    path = download_checkpoint(
        name, entry, resources, mirrors, local_file=local_file, timeout=timeout, out=out,
        strict=strict,
    )
    if entry.get("source") == "torchhub":
        stage_hub_code(entry, resources, mirrors, timeout=timeout, strict=strict)
    return path


# --------------------------------------------------------------------------- models


def hub_dir_candidates(entry: Mapping, resources: str | os.PathLike = "resources") -> list[Path]:
    """Local directories searched for the pinned torch.hub code, in order."""
    hub = entry["hub"]
    owner, repo = hub["repo"].split("/")
    stem = f"{owner}_{repo}_{hub['ref']}"
    out = [Path(resources) / "hub" / stem]
    try:
        import torch.hub

        out.append(Path(torch.hub.get_dir()) / stem)
    except ImportError:  # pragma: no cover
        pass
    return out


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


def stage_hub_code(
    entry: Mapping,
    resources: str | os.PathLike = "resources",
    mirrors: Iterable[str | os.PathLike] = (),
    timeout: float = 60.0,
    strict: bool = False,
) -> Path:
    """Fetch the pinned torch.hub code (GitHub archive of ``hub.ref``) and unpack it for offline use.

    The archive is verified against ``hub.archive_sha256`` or pinned on first use (see
    :func:`download_checkpoint`); the commit ``hub.ref`` itself pins the code's content."""
    hub = entry["hub"]
    dest = hub_dir_candidates(entry, resources)[0]
    if (dest / "hubconf.py").is_file():
        return dest
    archive = dest.with_name(dest.name + ".zip")
    if strict and not hub.get("archive_sha256"):
        raise refuse_unpinned(f"torch.hub code {archive.name}", "add hub.archive_sha256")
    _fetch_pinned(
        archive,
        lock_key(archive, resources),
        _lock(resources),
        hub.get("archive_sha256"),
        urls=[f"https://github.com/{hub['repo']}/archive/{hub['ref']}.zip"],
        mirrors=mirrors,
        timeout=timeout,
    )
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            parts = Path(info.filename).parts[1:]  # drop the "<repo>-<ref>/" top folder
            if not parts or info.is_dir():
                continue
            if ".." in parts:
                raise ValueError(f"{archive} has an unsafe member {info.filename!r}")
            out = tmp.joinpath(*parts)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(zf.read(info))
    if not (tmp / "hubconf.py").is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        raise ValueError(
            f"{archive} holds no hubconf.py; is {hub['repo']}@{hub['ref']} a torch.hub repository?"
        )
    tmp.rename(dest)
    return dest


# --------------------------------------------------------------------------- provenance


def checksum_provenance(config: Mapping) -> dict:
    """How every downloaded file of ``config`` (a workflow configuration or registry) is
    trusted, for the report: ``{"published": n, "files": [{"model", "file", "status",
    "sha256"}]}`` where ``files`` lists those *without* a published checksum, status ``pinned on
    first use`` (SHA-256 recorded in ``<resources>/checksums.lock``) or ``not pinned`` (not yet
    fetched, or a local file read as it is)."""
    from calbench.lockfile import Lock

    resources = Path(config.get("resources") or "resources")
    lock = Lock(resources / LOCK_NAME)
    published, files = 0, []

    def add(model: str, path: Path, pin: str | None) -> None:
        nonlocal published
        if pin:
            published += 1
            return
        entry = lock.get(lock_key(path, resources))
        files.append(
            {
                "model": model,
                "file": lock_key(path, resources),
                "status": "pinned on first use" if entry else "not pinned",
                "sha256": entry["sha256"] if entry else "",
            }
        )

    for name, entry in (config.get("models") or {}).items():
        entry = entry or {}
        source = entry.get("source")
        ckpt = entry.get("checkpoint") or {}
        if source == "logits":
            from calbench.logits_sources import plan_files

            for f in plan_files(name, entry, resources):
                add(name, Path(f["dest"]), "published" if f["pin"] == "pinned" else None)
        elif source in SOURCES and ckpt:
            if ckpt.get("archive_member"):
                add(name, archive_path(entry, resources), ckpt.get("sha256"))
            add(
                name,
                checkpoint_path(name, entry, resources),
                ckpt.get("member_sha256") or ckpt.get("sha256"),
            )
            if source == "torchhub":  # the archive stage_hub_code fetches (no torch import)
                hub = entry.get("hub") or {}
                stem = f"{hub.get('repo', '').replace('/', '_')}_{hub.get('ref')}"
                add(name, resources / "hub" / f"{stem}.zip", hub.get("archive_sha256"))
    seen, unique = set(), []
    for f in files:  # shared archives once
        if f["file"] not in seen:
            seen.add(f["file"])
            unique.append(f)
    return {"published": published, "files": unique}
