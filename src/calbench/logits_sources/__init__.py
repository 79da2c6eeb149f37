"""Models whose logits come from a file (``source: logits``): obtain, verify, read, import.

A model entry with ``source: logits`` names a published or user-supplied logits file instead of
a network. :func:`import_logits` (the workflow's ``import_logits`` rule, verb
``calbench import-logits``) obtains the file, verifies it, reads it with the reader of its
``format`` (:mod:`.formats`) and writes the same ``results/logits/{dataset}/{model}.npz`` that
``cache_logits`` writes (:func:`calbench.logits.save_logits`), so every later step is unchanged.
Sources that come pre-split (``split: file``; Kängsepp's pickles) also write their own split,
``results/split/{dataset}/{model}.npz``, in the format of the study split
(:func:`calbench.split.save_split`); the workflow gives that file to the model's
fit/evaluate/compare/plot steps instead of the dataset's study split.

The ``logits:`` entry (validated by workflow/schemas/config.schema.yaml)::

    logits:
      format: coursework | kull_pickle | npz | calarena | lm_eval | helm
      file: densenet121.pt          # the file's name (no folders)
      folder: cifar10_v1            # coursework: the study's folder (resolved in any layout)
      sha256: null                  # published checksum; null = pinned on first use
      size: null                    # bytes, checked with sha256
      split: study | file           # default: file for kull_pickle and calarena, study otherwise
      targets: file | class_blocks  # coursework: targets.txt, or (only if absent) class order
      local_path: null              # a file or folder you downloaded: nothing is fetched
      yandex_disk: {public_key: https://disk.yandex.ru/d/..., api_base: null}
      github_lfs: {repo: owner/name, ref: <commit>, path: logits/<file>,
                   media_base: null, api_base: null}
      huggingface: {repo: owner/name, revision: <commit>, path: null, endpoint: null}
      group: c10/densenet40         # calarena: the experiment (dataset/model) in the .h5
      choices: null                 # lm_eval / helm: import the items with this many choices
      filter: null                  # lm_eval: the filter whose lines are read
      trial: 0                      # helm: train_trial_index
      perturbation: null            # helm: a perturbation's name (default: unperturbed)
      urls: []                      # further copies (mirrors), tried last

Order of places tried: ``local_path`` (or ``--file``), the ``mirrors:`` directories (searched by
folder and name), the copy already under ``resources/logits/{dataset}/{model}/`` (a Hugging Face
file: ``resources/logits/huggingface.co/{owner}/{repo}/{revision}/``, shared by its models), the
service (Yandex Disk, Git LFS: media URL, then batch API, or the Hub), then ``urls``. Every file is
verified before it is read: against ``sha256``/``size`` when the entry pins them ("published"), else against the
record in ``resources/checksums.lock`` (:mod:`calbench.lockfile`) under the key
``logits/{dataset}/{model}/{file}``, which the first download (or first use of a local copy of
a downloadable file) writes ("pinned on first use"). A purely local file (no download source
configured) is read as it is and its digest reported ("unpinned").
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from calbench.io import array_digest, atomic_write_text
from calbench.lockfile import LOCK_NAME, Lock, lock_key
from calbench.logits_sources import formats
from calbench.logits_sources.entry import (
    TARGETS_FILE,
    check_entry,
    is_presplit,
    model_dir,
)
from calbench.logits_sources.fetch import obtain

__all__ = ["check_entry", "describe_source", "import_logits", "is_presplit", "obtain", "plan_files"]


#: what an import's provenance says of its sample order: a file has no sample identities
ORDER_CHECK = "labels only"


def labels_order_hash(labels: np.ndarray) -> str:
    """The ``order_hash`` of imported logits: the labels' content hash (the images are unknown);
    models of one folder share their ``targets.txt`` and so their order hash. Beside models
    computed here, such a file's order is checked by its labels only
    (:data:`calbench.split.LABELS_ONLY`)."""
    from calbench.split import LABELS_ONLY  # lazy: code inputs

    return LABELS_ONLY + array_digest(np.asarray(labels, dtype=np.int64))


def import_logits(
    name: str,
    entry: Mapping,
    out: str | os.PathLike,
    *,
    split_out: str | os.PathLike | None = None,
    provenance_out: str | os.PathLike | None = None,
    resources: str | os.PathLike = "resources",
    mirrors: Iterable[str | os.PathLike] = (),
    local_file: str | os.PathLike | None = None,
    timeout: float = 60.0,
    strict: bool = False,
    repin: bool = False,
) -> dict:
    """Obtain, verify and read model ``name``'s logits; write ``out`` (and ``split_out`` for
    pre-split sources, ``provenance_out`` JSON). Returns a summary dict. ``strict`` and
    ``repin``: see :func:`obtain`."""
    from calbench.logits import save_logits  # lazy: code inputs
    from calbench.split import save_split  # lazy: code inputs

    lg = check_entry(name, entry)
    presplit = is_presplit(entry)
    if presplit and split_out is None:
        raise ValueError(
            f"model {name} comes with its own split (split: file); pass --split-out "
            f"results/split/{entry['dataset']}/{name}.npz"
        )
    if not presplit and split_out is not None:
        raise ValueError(f"model {name} uses the study split (split: study); drop --split-out")
    got = obtain(
        name, entry, resources, mirrors, local_file=local_file, timeout=timeout, strict=strict,
        repin=repin,
    )
    synth = (
        lg["format"] == "coursework"
        and lg.get("targets") == "class_blocks"
        and got["targets"] is None
    )
    imp = formats.read(
        lg["format"],
        got["logits"],
        targets=got["targets"],
        synthesise_targets=synth,
        use_split=presplit,
        options=lg,
    )
    k = entry.get("num_classes")
    if k is not None and imp.logits.shape[1] != int(k):
        raise ValueError(
            f"model {name}: {got['logits']} holds logits of {imp.logits.shape[1]} classes, but "
            f"the entry declares num_classes: {k}; fix num_classes or point at the right file"
        )
    ohash = labels_order_hash(imp.labels)
    written = []  # the model's files are all or none: a later write that fails removes these
    try:
        save_logits(
            out, imp.logits, imp.labels, order_hash=ohash, model=name, dataset=entry["dataset"]
        )
        written.append(out)
        summary = {
            "model": name,
            "dataset": entry["dataset"],
            "format": lg["format"],
            "n": int(imp.labels.shape[0]),
            "classes": int(imp.logits.shape[1]),
            "accuracy": float(np.mean(imp.logits.argmax(1) == imp.labels)),
            "order_hash": ohash,
            "order_check": ORDER_CHECK,
            "targets": (
                "class_blocks (synthesised)" if synth else ("file" if got["targets"] else None)
            ),
            "files": got["files"],
        }
        if presplit:
            val, test = imp.split
            summary["split"] = {
                "val": int(val.size), "test": int(test.size), "source": lg["format"]
            }  # fmt: skip
            save_split(
                split_out,
                val,
                test,
                labels=imp.labels,
                order_hash=np.str_(ohash),
                n=np.int64(imp.labels.size),
                source=np.str_(lg["format"]),
            )
            written.append(split_out)
        if provenance_out is not None:
            atomic_write_text(provenance_out, json.dumps(summary, indent=1, sort_keys=True) + "\n")
    except BaseException:
        for path in written:
            Path(path).unlink(missing_ok=True)
        raise
    return summary


# --------------------------------------------------------------------------- staging


def plan_files(name: str, entry: Mapping, resources="resources") -> list[dict]:
    """What ``calbench stage`` places for model ``name``: ``{"dest", "size", "pin"}`` per file,
    ``pin`` one of ``pinned`` (checksum in the config), ``lock`` (pinned on first use, recorded in
    the lock file),
    ``first use`` (will be pinned when fetched) or ``local`` (nothing to fetch)."""
    lg = check_entry(name, entry)
    mdir = model_dir(name, entry, resources)
    lock_file = Lock(Path(resources) / LOCK_NAME)
    out = []
    names = [lg["file"]] + ([TARGETS_FILE] if lg["format"] == "coursework" else [])
    for f in names:
        key = lock_key(mdir / f, resources)
        if lg.get("local_path"):
            pin = "local"
        elif lg.get("sha256") if f == lg["file"] else lg.get("targets_sha256"):
            pin = "pinned"
        elif lock_file.get(key):
            pin = "lock"
        else:
            pin = "first use"
        size = lg.get("size") if f == lg["file"] else None
        out.append({"dest": mdir / f, "size": size, "pin": pin})
    return out


def describe_source(record: Mapping) -> str:
    """One line for the report's provenance from an import's ``.source.json`` record, e.g.
    ``coursework: densenet121.pt sha256 1f2e3d4c5b6a, 1,234 bytes, pinned on first use``."""
    parts = []
    for f in record.get("files") or []:
        parts.append(
            f"{Path(f['path']).name} sha256 {str(f['sha256'])[:12]}, {int(f['size']):,} bytes, "
            f"{f['status']}"
        )
    text = f"{record.get('format', '?')}: " + "; ".join(parts)
    if record.get("targets") and str(record["targets"]).startswith("class_blocks"):
        text += "; labels in class-folder order (synthesised)"
    if record.get("order_check"):
        text += f"; sample order checked by {record['order_check']}"
    if record.get("split"):
        text += f"; own split {record['split']['val']} / {record['split']['test']}"
    return text
