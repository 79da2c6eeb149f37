"""Placing a dataset for the workflow: step ``download-dataset`` (and ``stage``).

:func:`prepare_dataset` tries mirror directories before the dataset's own URLs, verifies every
file (the dataset module's pinned hashes, split sizes and label counts) and writes a JSON
manifest with the hashes; :func:`dataset_options` is the part of a dataset's config entry its
interface takes (:func:`calbench.data.get_dataset`).
"""

from __future__ import annotations

import json
from pathlib import Path

from calbench.data import get_dataset
from calbench.io import atomic_write_text

#: Keys of a dataset config entry that belong to the workflow, not to the dataset's files.
WORKFLOW_DATASET_KEYS = frozenset(
    {"name", "display", "root", "mirrors", "default_mirrors", "limit", "split", "n_eval"}
)


def dataset_options(entry: dict) -> dict:
    """The part of a dataset config entry its interface takes as ``options`` (see
    :func:`calbench.data.get_dataset`): everything but the workflow's own keys."""
    return {k: v for k, v in entry.items() if k not in WORKFLOW_DATASET_KEYS}


def prepare_dataset(
    name: str,
    root,
    *,
    entry: dict | None = None,
    mirrors=(),
    default_mirrors: bool = True,
    download: bool = True,
    timeout: float = 60.0,
    manifest=None,
) -> dict:
    """Place and verify dataset ``name`` under ``root`` and write its manifest (default
    ``ROOT/manifest.json``); the one code path of ``download-dataset`` and ``stage``.

    ``entry`` is the dataset's config entry: its ``mirrors`` are searched after ``mirrors`` and
    its file settings (e.g. ``path``, ``md5``) configure the dataset interface.
    """
    entry = dict(entry or {})
    ds = get_dataset(name, dataset_options(entry) or None)
    mirrors = list(dict.fromkeys(str(m) for m in [*mirrors, *(entry.get("mirrors") or [])]))
    if default_mirrors and entry.get("default_mirrors", True):
        mirrors += [m for m in ds.DEFAULT_MIRRORS if m not in mirrors]
    urls = ds.URLS if download else ()
    result = ds.prepare(root, mirrors=mirrors, urls=urls, timeout=timeout)
    result["mirrors"] = mirrors
    path = Path(manifest) if manifest else Path(root) / "manifest.json"
    atomic_write_text(path, json.dumps(result, indent=2, sort_keys=True) + "\n")
    result["manifest_path"] = str(path)
    return result
