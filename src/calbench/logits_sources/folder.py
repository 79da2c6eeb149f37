"""A folder of predictions as a study: the config key ``logits_folder:``.

A config that names a folder of logits files needs nothing else::

    logits_folder: my_predictions
    # study, datasets, models and calibrators follow from the folder

:func:`complete_config` (called by the Snakefile before the config is validated) turns every
``.npz`` / ``.pt`` file directly in the folder into a ``source: logits`` model entry read
through ``local_path`` (format ``npz``: keys ``logits`` (N x K) and ``labels`` (N); a ``.pt``
holds the same two tensors in a dict, saved with ``torch.save``):

* model name: the file name's stem made a slug (lowercase; runs of other characters become
  ``_``), displayed as the stem itself; two files with one slug, or a stem with no letter or
  digit, are refused in one line naming the files;
* dataset: the file's ``dataset`` key (a string, ``.npz`` only), else the folder's name, as a
  slug; each dataset the folder brings gets an entry of its own;
* study title: the folder's name.

Sections the config omits get defaults, so that a config holds only what it adds: ``study``
(the title above, or ``title_default``), ``datasets`` (one entry per dataset its models name),
and ``calibrators``: the default study's set, written once in the workflow's ``config.yaml``
(its ``calibrators:`` section, with the reasons for what it leaves out). A folder is a study of
many models, often small ones, so ``plots.per_calibrator`` is ``false`` unless the config sets
it: each model's grid of every calibrator's diagram, which the report shows, and no PNG per
calibrator besides it (at 1,000 x 2, 16 such PNGs cost twice the fitting work of the model's
16 calibrators and make the report 3x larger; docs/performance.md). The other sections
(evaluation, compare, the rest of plots, report) take the schema's defaults
(workflow/schemas/config.schema.yaml). A section the config gives replaces the default whole
(no merging: a config's ``calibrators:`` is the full list it runs).
"""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from calbench._yaml import load_yaml_file

#: the files of a logits folder that become models
SUFFIXES = (".npz", ".pt")
_SLUG_MAX = 64


def slugify(text: str) -> str:
    """``text`` as a slug: lowercase, runs of characters other than ``a-z0-9`` as one ``_``,
    no leading or trailing ``_``; ``""`` when nothing is left."""
    return re.sub(r"[^a-z0-9]+", "_", str(text).lower()).strip("_")


def _slug(text: str, what: str) -> str:
    slug = slugify(text)
    if not slug:
        raise ValueError(
            f"{what} {text!r} has no letter or digit to name a model or dataset by; rename it"
        )
    if len(slug) > _SLUG_MAX:
        raise ValueError(
            f"{what} {text!r} gives a name of {len(slug)} characters; rename it to at most "
            f"{_SLUG_MAX} (it names files)"
        )
    return slug


def _npz_dataset(path: Path) -> str | None:
    """The ``.npz``'s ``dataset`` key (a string) or ``None``; refuses, in one line naming the
    file, a file that is not an ``.npz`` of ``logits`` and ``labels``. Reads the zip directory
    and the small ``dataset`` member only."""
    fix = "save it with np.savez(path, logits=..., labels=...), or move it out of the folder"
    try:
        with zipfile.ZipFile(path) as zf:
            members = set(zf.namelist())
    except (OSError, zipfile.BadZipFile) as exc:
        raise ValueError(f"logits_folder: {path} is not an .npz file ({exc}); {fix}") from None
    missing = [k for k in ("logits", "labels") if f"{k}.npy" not in members]
    if missing:
        raise ValueError(f"logits_folder: {path} holds no {' and no '.join(missing)}; {fix}")
    if "dataset.npy" not in members:
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            value = data["dataset"]
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"logits_folder: {path}: its dataset key cannot be read ({exc}); save it as a string"
        ) from None
    if value.ndim != 0 or value.dtype.kind not in "US":
        raise ValueError(
            f"logits_folder: {path}: its dataset key must be one string, got dtype {value.dtype} "
            f"shape {value.shape}; save it as dataset=np.str_('name')"
        )
    return str(value.item().decode() if isinstance(value.item(), bytes) else value.item())


def _check_pt(path: Path) -> None:
    """Refuse, in one line, a ``.pt`` that cannot hold a dict with keys ``logits`` and
    ``labels``: torch's zip container keeps the pickled object in ``*/data.pkl``, and a dict's
    string keys are stored there verbatim, so a file whose pickle lacks either name is not one.
    (A legacy, non-zip ``.pt`` is checked when it is read.)"""
    fix = 'save it with torch.save({"logits": logits, "labels": labels}, path), or move it out'
    if not zipfile.is_zipfile(path):
        return
    with zipfile.ZipFile(path) as zf:
        pkl = [n for n in zf.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pkl) != 1 or zf.getinfo(pkl[0]).file_size > 1 << 20:
            return  # not torch's layout, or an object too large to scan: checked when read
        data = zf.read(pkl[0])
    missing = [k for k in ("logits", "labels") if k.encode() not in data]
    if missing:
        raise ValueError(f"logits_folder: {path} holds no {' and no '.join(missing)}; {fix}")


def folder_models(folder: str | os.PathLike) -> dict[str, dict]:
    """Model entries (name -> entry, sorted by name) for every ``.npz`` / ``.pt`` file
    directly in ``folder``; see the module docstring for the names. One-line ``ValueError`` for
    a missing or empty folder, an odd file name, two files with one name, or an ``.npz`` without
    ``logits`` and ``labels``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(
            f"logits_folder: {folder} is not a folder; give the folder holding your .npz / .pt "
            "files (relative to the working directory)"
        )
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in SUFFIXES and p.is_file())
    if not files:
        raise ValueError(
            f"logits_folder: {folder} holds no .npz or .pt file; save each model's logits and "
            "labels with np.savez(<model>.npz, logits=..., labels=...)"
        )
    folder_dataset = _slug(folder.resolve().name, "logits_folder: the folder name")
    models: dict[str, dict] = {}
    origin: dict[str, Path] = {}
    for path in files:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", path.name):
            raise ValueError(
                f"logits_folder: file name {path.name!r} has characters other than letters, "
                "digits, '.', '_', '-', '+' (or starts with one of the last four); rename it"
            )
        name = _slug(path.stem, "logits_folder: file name")
        if name in models:
            raise ValueError(
                f"logits_folder: {origin[name].name} and {path.name} both give model name "
                f"{name!r}; rename one of them"
            )
        if path.suffix.lower() == ".pt":
            _check_pt(path)
        dataset = _npz_dataset(path) if path.suffix.lower() == ".npz" else None
        dataset = (
            _slug(dataset, f"logits_folder: {path.name}: dataset") if dataset else folder_dataset
        )
        origin[name] = path
        models[name] = {
            "dataset": dataset,
            "source": "logits",
            "display": {"name": path.stem},
            "logits": {"format": "npz", "file": path.name, "local_path": str(folder)},
        }
    return dict(sorted(models.items()))


def complete_config(
    config: dict,
    *,
    default_calibrators: Mapping | None = None,
    title_default: str = "Post-hoc calibration study",
) -> dict:
    """Fill, in place, what ``config`` leaves out (module docstring): the models of its
    ``logits_folder`` and its ``plots.per_calibrator``, then ``study``, ``datasets`` and
    ``calibrators`` (a copy of
    ``default_calibrators``) when absent. Returns ``config``. A folder model whose name a
    ``models:`` entry already uses is refused in one line."""
    folder = config.get("logits_folder")
    if folder is not None:
        if not isinstance(folder, str) or not folder:
            raise ValueError(
                f"logits_folder: {folder!r} is not a folder path; write the folder's path"
            )
        found = folder_models(folder)
        models = config.get("models")
        if models is None:
            models = config["models"] = {}
        if not isinstance(models, dict):
            raise ValueError("models: must be a mapping of model entries (or leave it out)")
        for name, entry in found.items():
            if name in models:
                raise ValueError(
                    f"models.{name}: {folder}/{entry['logits']['file']} also gives a model of "
                    "this name; rename the file or the entry"
                )
            models[name] = entry
        datasets = config.get("datasets")
        if datasets is None:
            datasets = config["datasets"] = {}
        if isinstance(datasets, dict):
            for entry in found.values():
                datasets.setdefault(entry["dataset"], {})
        if "study" not in config:
            config["study"] = {"title": Path(folder).resolve().name}
        plots = config.setdefault("plots", {})
        if isinstance(plots, dict):  # else the config check names what is wrong with it
            plots.setdefault("per_calibrator", False)
    if "study" not in config:
        config["study"] = {"title": title_default}
    models = config.get("models")
    if "datasets" not in config and isinstance(models, Mapping):
        config["datasets"] = {
            e["dataset"]: {}
            for e in models.values()
            if isinstance(e, Mapping) and isinstance(e.get("dataset"), str)
        }
    if "calibrators" not in config and default_calibrators is not None:
        config["calibrators"] = {k: dict(v or {}) for k, v in default_calibrators.items()}
    return config


def default_calibrators(workflow_dir: str | os.PathLike) -> dict:
    """The default study's calibrators (``calibrators:`` of ``<workflow_dir>/config.yaml``): the
    set a config without a ``calibrators:`` section runs."""
    path = Path(workflow_dir) / "config.yaml"
    cals = load_yaml_file(path).get("calibrators")
    if not isinstance(cals, Mapping) or not cals:
        raise ValueError(f"{path} has no calibrators: section to take the default set from")
    return dict(cals)
