"""The ``logits:`` entry of a ``source: logits`` model: checks the schema cannot make, whether
the file carries its own split, and where its downloads are kept."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from calbench.logits_sources import formats

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_SAFE_FOLDER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*(/[A-Za-z0-9][A-Za-z0-9._+-]*)*")
_SERVICE_KEYS = ("yandex_disk", "github_lfs", "huggingface", "urls")
#: entry keys that only some formats take
_FORMAT_KEYS = {
    "group": ("calarena",),
    "choices": ("lm_eval", "helm"),
    "filter": ("lm_eval",),
    "trial": ("helm",),
    "perturbation": ("helm",),
}
#: where Hugging Face Hub files are kept, shared by every model that reads them (one CalArena
#: benchmark file holds hundreds of experiments); a dot keeps it apart from dataset slugs
HUB_DIR = "huggingface.co"
TARGETS_FILE = "targets.txt"

#: provenance wording of calbench.lockfile's statuses
STATUS = {
    "published": "published checksum",
    "first-use": "pinned on first use",
    "unpinned": "local file, not pinned",
}


def check_entry(name: str, entry: Mapping) -> dict:
    """Return the model's ``logits:`` mapping after the checks the schema cannot make."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9_]*", str(name)):
        raise ValueError(f"model name {name!r} is not a slug; use lowercase letters, digits, '_'")
    if len(str(name)) > 64:
        raise ValueError(
            f"model name {str(name)[:20]!r}... has {len(str(name))} characters; use at most 64 "
            "(it names files)"
        )
    if entry.get("source") != "logits":
        raise ValueError(f"model {name}: source is {entry.get('source')!r}, not logits")
    lg = entry.get("logits")
    if not isinstance(lg, Mapping):
        raise ValueError(f"model {name}: source logits needs a logits: {{format, file, ...}} entry")
    fmt = lg.get("format")
    if fmt not in formats.FORMATS:
        raise ValueError(
            f"model {name}: logits.format {fmt!r} is not one of {list(formats.FORMATS)}"
        )
    file = lg.get("file")
    if not isinstance(file, str) or not _SAFE_NAME.fullmatch(file) or file == TARGETS_FILE:
        raise ValueError(
            f"model {name}: logits.file {file!r} must be a plain file name (letters, digits, "
            "'.', '_', '-', '+'; no folders)"
        )
    folder = lg.get("folder")
    if folder is not None and (not isinstance(folder, str) or not _SAFE_FOLDER.fullmatch(folder)):
        raise ValueError(f"model {name}: logits.folder {folder!r} is not a safe relative folder")
    split = lg.get("split")
    if split not in (None, "study", "file"):
        raise ValueError(f"model {name}: logits.split {split!r} must be study or file")
    if fmt == "coursework" and split == "file":
        raise ValueError(
            f"model {name}: coursework files hold the whole test set; use split: study"
        )
    if fmt == "kull_pickle" and split == "study":
        raise ValueError(
            f"model {name}: kull_pickle files come split into validation and test; use split: file"
        )
    if lg.get("targets", "file") not in formats.TARGETS:
        raise ValueError(f"model {name}: logits.targets must be one of {list(formats.TARGETS)}")
    if lg.get("targets", "file") != "file" and fmt != "coursework":
        raise ValueError(f"model {name}: logits.targets applies to format coursework only")
    for key, fmts in _FORMAT_KEYS.items():
        if lg.get(key) is not None and fmt not in fmts:
            raise ValueError(
                f"model {name}: logits.{key} applies to format {' / '.join(fmts)} only"
            )
    if fmt == "calarena" and not lg.get("group"):
        raise ValueError(
            f"model {name}: format calarena needs logits.group, the experiment's dataset/model "
            "in the benchmark file (a row of its experiments CSV, e.g. c10/densenet40)"
        )
    if fmt in ("lm_eval", "helm") and split == "file":
        raise ValueError(f"model {name}: {fmt} logs have no split of their own; use split: study")
    hf = lg.get("huggingface")
    if hf and fmt == "coursework":
        raise ValueError(f"model {name}: huggingface does not serve coursework's targets.txt")
    if hf:
        parts = [
            *str(hf.get("repo", "")).split("/"),
            str(hf.get("revision", "main")),
            *PurePosixPath(hf.get("path") or file).parts,
        ]
        if len(str(hf.get("repo", "")).split("/")) != 2 or not all(
            _SAFE_NAME.fullmatch(p) for p in parts
        ):
            raise ValueError(
                f"model {name}: huggingface repo / revision / path must be owner/name, a commit or "
                "branch name and a relative path, of letters, digits, '.', '_', '-', '+'"
            )
    if hf and hf.get("path") and PurePosixPath(hf["path"]).name != file:
        raise ValueError(
            f"model {name}: huggingface.path {hf['path']!r} must end in logits.file {file!r}"
        )
    if lg.get("github_lfs") and not lg.get("sha256"):
        raise ValueError(
            f"model {name}: github_lfs needs sha256 and size (the LFS object id and size)"
        )
    if lg.get("github_lfs") and lg.get("size") is None:
        raise ValueError(f"model {name}: github_lfs needs size (bytes) beside sha256")
    if lg.get("yandex_disk") and fmt == "coursework" and not folder:
        raise ValueError(f"model {name}: yandex_disk needs logits.folder (e.g. cifar10_v1)")
    return dict(lg)


def is_presplit(entry: Mapping) -> bool:
    """True when the model's file carries its own validation/test split (``split: file``)."""
    lg = entry.get("logits") or {}
    split = lg.get("split") or (
        "file" if lg.get("format") in formats.PRESPLIT_BY_DEFAULT else "study"
    )
    return split == "file"


def model_dir(name: str, entry: Mapping, resources="resources") -> Path:
    """Where downloads of model ``name`` are kept: ``resources/logits/{dataset}/{model}/``; a
    Hugging Face file in ``resources/logits/huggingface.co/{owner}/{repo}/{revision}/{folder}/``
    (its folder in the repository), shared by the models that read it."""
    hf = (entry.get("logits") or {}).get("huggingface")
    if hf:
        folder = PurePosixPath(hf.get("path") or "x").parent.parts
        base = Path(resources) / "logits" / HUB_DIR / hf["repo"] / hf.get("revision", "main")
        return base.joinpath(*folder)
    return Path(resources) / "logits" / entry["dataset"] / name


def has_service(lg: Mapping) -> bool:
    return any(lg.get(k) for k in _SERVICE_KEYS)
