"""The provenance section of the report: package versions and the data's fingerprints.

:func:`package_versions` reads installed versions from metadata (nothing imported);
:func:`provenance_view` shows the logits and split hashes with repeated values once and every
dataset manifest field with what it means (:data:`MANIFEST_FIELDS`).
"""

from __future__ import annotations

import json
import platform
from collections.abc import Mapping, Sequence

#: Distributions whose versions the provenance section lists (read from metadata, not imported).
PACKAGES = (
    "calbench",
    "numpy",
    "scipy",
    "scikit-learn",
    "torch",
    "torchvision",
    "matplotlib",
    "jinja2",
    "snakemake",
)


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str]:
    """Installed version of each distribution (``"not installed"`` if missing)."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


#: What the fields of a dataset manifest mean (provenance section).
MANIFEST_FIELDS = {
    "source": "where the file came from: a mirror path, 'download', or 'existing' (already "
    "in place and re-verified)",
    "sha256": "pinned SHA-256 of the decompressed file; the file was refused unless it matched",
    "bytes": "size of the decompressed file",
    "gz_md5": "MD5 of the .gz archive the file was decompressed from",
    "gz_md5_matches_torchvision": "whether that archive is byte-identical to the one "
    "torchvision downloads. 'false' is harmless: the archive was recompressed (e.g. by a "
    "Linux distribution), but the decompressed content matched the pinned SHA-256",
    "n": "number of samples in the split",
    "label_counts": "samples per class (checked against the published class balance)",
    "order_hash": "hash of the samples in their order: logits and splits made from other files "
    "or another order are refused",
    "manifest_sha256": "SHA-256 over the pinned file hashes: one fingerprint of the dataset",
    "torchvision_class": "the torchvision class that reads the files",
    "root": "folder of the files",
    "dataset": "dataset name",
}


def provenance_view(provenance: Mapping) -> dict:
    """Logits and split hashes with repeated values shown once; manifests as explained fields."""
    logits = [{"source": "", **x} for x in provenance.get("logits") or []]
    orders = {str(x.get("order_hash", "")) for x in logits}
    shared_order = next(iter(orders)) if len(orders) == 1 and len(logits) > 1 else None
    manifests = []
    for d in provenance.get("datasets") or []:
        try:
            content = json.loads(d["content"])
        except (ValueError, TypeError):
            content = None
        fields = []
        if isinstance(content, dict):
            for path, value in _flatten(content):
                last = path.rsplit(" / ", 1)[-1]
                fields.append(
                    {"field": path, "value": value, "meaning": MANIFEST_FIELDS.get(last, "")}
                )
        manifests.append({"path": d["path"], "fields": fields, "content": d["content"]})
    return {
        "checksums": provenance.get("checksums") or {},
        "logits": logits,
        "shared_order": shared_order,
        "splits": list(provenance.get("splits") or []),
        "manifests": manifests,
    }


def _flatten(d, prefix=""):
    for k, v in d.items():
        path = f"{prefix} / {k}" if prefix else str(k)
        if isinstance(v, dict):
            yield from _flatten(v, path)
        else:
            yield path, (str(v).lower() if isinstance(v, bool) else str(v))
