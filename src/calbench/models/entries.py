"""Registry entries of published pretrained models: reading and checking the registry document,
and where each entry's files live under ``<resources>``.

A registry is a YAML document with a ``models:`` mapping (see ``config/coursework.yaml`` and
:mod:`calbench.models.pretrained` for the three sources). Weights land at
``<resources>/checkpoints/<dataset>/<model>/checkpoint.pt`` (the workflow's
``download_checkpoint`` output), shared archives at ``<resources>/archives/<file>`` and
torch.hub code at ``<resources>/hub/<owner>_<repo>_<ref>``.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import zipfile
from collections.abc import Mapping
from pathlib import Path

from calbench._paths import confined
from calbench.io import atomic_path

SOURCES = ("checkpoint", "torchhub", "timm")
_REQUIRED = ("dataset", "source", "num_classes")


def load_registry(path: str | os.PathLike, entry_checks: Mapping | None = None) -> dict:
    """Read a registry YAML (``models:`` mapping) and check every entry; return the whole document.

    An entry whose ``source`` is a key of ``entry_checks`` (``{source: check(name, entry)}``, the
    caller's: ``source: logits`` is :func:`calbench.logits_sources.check_entry`, a layer this
    package does not import) is checked by that function; a ``source: train`` entry needs nothing
    fetched; every other entry is one of :data:`SOURCES` (:func:`check_entry`), so a source with
    no check given is refused, never passed unchecked."""
    from calbench._yaml import load_yaml  # lazy: code inputs

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"registry {path} not found; pass --config config/coursework.yaml")
    doc = load_yaml(path.read_text(), str(path)) or {}
    if not isinstance(doc, Mapping):
        raise ValueError(f"{path} is not a YAML mapping; write 'models:' with one entry per model")
    models = doc.get("models")
    if not isinstance(models, Mapping) or not models:
        raise ValueError(f"{path} has no 'models:' mapping; add one entry per model")
    for name, entry in models.items():
        source = (entry or {}).get("source")
        if source in (entry_checks or {}):
            entry_checks[source](name, entry)
        elif source != "train":  # trained by the workflow: nothing to fetch
            check_entry(name, entry)
    return doc


def check_entry(name: str, entry: Mapping) -> None:
    """Raise a one-line ValueError if a registry entry lacks what its source needs."""
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
    if ckpt:
        confined("archives", ckpt["filename"], f"models.{name}.checkpoint.filename", plain=True)


def get_entry(registry: Mapping, name: str) -> dict:
    """The entry of model ``name`` in a registry document (one-line error listing near names)."""
    models = registry.get("models", registry)
    if name not in models:
        near = difflib.get_close_matches(name, list(models), n=3)
        hint = f"; did you mean {near}?" if near else ""
        raise ValueError(f"model {name!r} is not in the registry{hint}")
    return dict(models[name])


# --------------------------------------------------------------------------- file locations


CHECKPOINT_FILE = "checkpoint.pt"


def checkpoint_path(name: str, entry: Mapping, resources: str | os.PathLike = "resources") -> Path:
    """Where the (extracted) weights file of model ``name`` lives under ``resources``: the path
    the workflow's ``download_checkpoint`` rule writes (``checkpoints/<dataset>/<model>/checkpoint.pt``)."""
    return Path(resources) / "checkpoints" / entry["dataset"] / name / CHECKPOINT_FILE


def archive_path(
    entry: Mapping, resources: str | os.PathLike = "resources", name: str | None = None
) -> Path:
    """Where a shared weights archive (e.g. the huyvnphan zip) is kept under ``resources``: its
    ``checkpoint.filename``, confined to ``<resources>/archives`` (:func:`calbench._paths.confined`;
    ``name`` is the model, for the error)."""
    key = f"models.{name}.checkpoint.filename" if name else "checkpoint.filename"
    return confined(Path(resources) / "archives", entry["checkpoint"]["filename"], key, plain=True)


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


def extract_member(archive: Path, member: str, dest: Path) -> None:
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
