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
      format: coursework | kull_pickle | npz
      file: densenet121.pt          # the file's name (no folders)
      folder: cifar10_v1            # coursework: the study's folder (resolved in any layout)
      sha256: null                  # published checksum; null = pinned on first use
      size: null                    # bytes, checked with sha256
      split: study | file           # default: file for kull_pickle, study otherwise
      targets: file | class_blocks  # coursework: targets.txt, or (only if absent) class order
      local_path: null              # a file or folder you downloaded: nothing is fetched
      yandex_disk: {public_key: https://disk.yandex.ru/d/..., api_base: null}
      github_lfs: {repo: owner/name, ref: <commit>, path: logits/<file>,
                   media_base: null, api_base: null}
      urls: []                      # further copies (mirrors), tried last

Order of places tried: ``local_path`` (or ``--file``), the ``mirrors:`` directories (searched by
folder and name), the copy already under ``resources/logits/{dataset}/{model}/``, the service
(Yandex Disk or Git LFS: media URL, then batch API), then ``urls``. Every file is verified before
it is read: against ``sha256``/``size`` when the entry pins them ("published"), else against the
record in ``resources/checksums.lock`` (:mod:`calbench.lockfile`) under the key
``logits/{dataset}/{model}/{file}``, which the first download (or first use of a local copy of
a downloadable file) writes ("pinned on first use"). A purely local file (no download source
configured) is read as it is and its digest reported ("unpinned").
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from calbench.io import atomic_write_text, file_digest
from calbench.lockfile import LOCK_NAME, Lock, PinError, lock_key
from calbench.logits_sources import formats
from calbench.logits_sources import services as S

__all__ = ["check_entry", "describe_source", "import_logits", "is_presplit", "obtain", "plan_files"]

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_SAFE_FOLDER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*(/[A-Za-z0-9][A-Za-z0-9._+-]*)*")
_SERVICE_KEYS = ("yandex_disk", "github_lfs", "urls")
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
    """Where downloads of model ``name`` are kept: ``resources/logits/{dataset}/{model}/``."""
    return Path(resources) / "logits" / entry["dataset"] / name


def _has_service(lg: Mapping) -> bool:
    return any(lg.get(k) for k in _SERVICE_KEYS)


# --------------------------------------------------------------------------- verification


def _verify(path: Path, key: str, *, sha256, size, lock: Lock, origin: str, pin: bool) -> dict:
    """Check ``path`` against the config's pin, else the lock file (pinning it on first use)."""
    actual_size = path.stat().st_size
    if size is not None and actual_size != int(size):
        raise ValueError(
            f"{path}: {actual_size} bytes, expected {size}; the file is incomplete or a different "
            "version: delete it and fetch it again"
        )
    digest = file_digest(path)
    if sha256 and digest != sha256:
        raise ValueError(
            f"{path}: sha256 {digest[:12]} does not match the pinned {sha256[:12]}; the file is "
            "corrupt or a different version: delete it and fetch it again"
        )
    status = lock.check(key, path, published=sha256, source=origin, record=pin)
    return {
        "path": str(path),
        "sha256": digest,
        "size": actual_size,
        "status": STATUS[status],
        "origin": origin,
    }


# --------------------------------------------------------------------------- obtaining


def _local_lookup(where: Path, lg: Mapping, name: str) -> tuple[Path, Path | None] | None:
    """``(file, targets or None)`` in a local file/folder, or None if it is not there."""
    where = where.expanduser()
    if where.is_file():
        t = where.parent / TARGETS_FILE
        return where, (t if t.is_file() else None)
    if not where.is_dir():
        return None
    direct = where / name
    if lg.get("folder"):
        try:
            hit, targets = S.find_in_tree(S.local_tree(where), lg["folder"], name, str(where))
        except FileNotFoundError:
            hit = None
        if hit is not None:
            f = where / hit.path.lstrip("/")
            return f, (where / targets.path.lstrip("/") if targets else None)
    if direct.is_file():
        t = where / TARGETS_FILE
        return direct, (t if t.is_file() else None)
    return None


def _yandex(lg: Mapping, timeout: float) -> S.YandexDisk:
    y = lg["yandex_disk"]
    return S.YandexDisk(y["public_key"], y.get("api_base"), timeout=timeout)


def obtain(
    name: str,
    entry: Mapping,
    resources: str | os.PathLike = "resources",
    mirrors: Iterable[str | os.PathLike] = (),
    *,
    local_file: str | os.PathLike | None = None,
    timeout: float = 60.0,
    strict: bool = False,
) -> dict:
    """Find or download model ``name``'s verified files; nothing is fetched if a local copy is
    given or found. Returns ``{"logits": path, "targets": path | None, "files": [provenance]}``.

    ``strict`` (config ``strict_checksums``) refuses a downloadable file that has neither a
    published checksum nor a record in the lock file, before anything is fetched."""
    lg = check_entry(name, entry)
    fname, fmt = lg["file"], lg["format"]
    needs_targets = fmt == "coursework"
    mdir = model_dir(name, entry, resources)
    lock_file = Lock(Path(resources) / LOCK_NAME)
    pin = _has_service(lg)  # downloadable files without a published checksum: pin on first use
    key = lock_key(mdir / fname, resources)
    tkey = lock_key(mdir / TARGETS_FILE, resources)
    t_sha = lg.get("targets_sha256")
    if strict and pin:
        for k, sha, what in ((key, lg.get("sha256"), fname), (tkey, t_sha, TARGETS_FILE)):
            if what == TARGETS_FILE and fmt != "coursework":
                continue
            if not sha and lock_file.get(k) is None:
                raise PinError(
                    f"model {name}: {what} has no published checksum and strict checksums are "
                    "on; add its sha256 to the model's logits entry, or turn strict mode off to "
                    "pin it on first use"
                )

    def done(path: Path, targets: Path | None, origin: str) -> dict:
        recs = [
            _verify(path, key, sha256=lg.get("sha256"), size=lg.get("size"), lock=lock_file,
                    origin=origin, pin=pin)
        ]
        if targets is not None:
            recs.append(
                _verify(targets, tkey, sha256=t_sha, size=None, lock=lock_file, origin=origin,
                        pin=pin)
            )
        elif needs_targets and lg.get("targets", "file") == "file":
            raise FileNotFoundError(
                f"no {TARGETS_FILE} beside {path}; the coursework format needs the folder's "
                f"{TARGETS_FILE} (or targets: class_blocks for class-folder order)"
            )
        return {"logits": path, "targets": targets, "files": recs}

    local = local_file if local_file is not None else lg.get("local_path")
    if local:
        found = _local_lookup(Path(local), lg, fname)
        if found is None:
            raise FileNotFoundError(
                f"model {name}: {fname} not found at {local} (logits.local_path / --file)"
            )
        return done(*found, origin=f"local {local}")
    for m in mirrors:
        found = _local_lookup(Path(m), lg, fname)
        if found is not None:
            return done(*found, origin=f"mirror {m}")
    dest, tdest = mdir / fname, mdir / TARGETS_FILE
    if dest.is_file() and (not needs_targets or tdest.is_file() or lg.get("targets") == "class_blocks"):
        return done(dest, tdest if tdest.is_file() else None, origin="resources")
    if not _has_service(lg):
        raise FileNotFoundError(
            f"model {name}: {fname} is not in {mdir} and the entry names no source; set "
            "logits.local_path, a mirrors: directory, yandex_disk, github_lfs or urls"
        )
    path, targets, got = _download(name, lg, dest, tdest, lock_file, key, tkey, timeout)
    return done(path, targets, origin=got["origin"])


def _expected(lg: Mapping, lock_file: Lock, key: str, listed: S.Entry | None):
    """``(sha256, size)`` to check a download against: config pin, else lock, else listing."""
    rec = lock_file.get(key)
    sha = lg.get("sha256") or (rec or {}).get("sha256")
    size = lg.get("size") if lg.get("size") is not None else (rec or {}).get("size")
    if listed is not None:
        for what, mine, theirs in (("sha256", sha, listed.sha256), ("size", size, listed.size)):
            if mine is not None and theirs is not None and str(mine) != str(theirs):
                raise ValueError(
                    f"{key}: the service lists {what} {str(theirs)[:12]} but {str(mine)[:12]} is "
                    f"pinned; the published file changed: check it, then update the pin"
                )
        sha = sha or listed.sha256
        size = size if size is not None else listed.size
    return sha, size


def _download(name, lg, dest: Path, tdest: Path, lock_file, key, tkey, timeout):
    fname = lg["file"]
    cands, tcands, listed, tlisted = [], [], None, None
    if lg.get("yandex_disk"):
        disk = _yandex(lg, timeout)
        folder = lg.get("folder") or ""
        where = f"Yandex Disk folder {lg['yandex_disk']['public_key']}"
        listed, tlisted = S.find_in_tree(disk.tree(), folder, fname, where)
        cands.append(disk.candidate(listed.path))
        if tlisted is not None:
            tcands.append(disk.candidate(tlisted.path))
    if lg.get("github_lfs"):
        cands += S.lfs_candidates(lg["github_lfs"], lg["sha256"], int(lg["size"]))
    urls = list(lg.get("urls") or [])
    cands += S.url_candidates(urls)
    if lg["format"] == "coursework":  # targets.txt beside each mirror URL
        tcands += S.url_candidates(u.rsplit("/", 1)[0] + "/" + TARGETS_FILE for u in urls if "/" in u)
    sha, size = _expected(lg, lock_file, key, listed)
    got = S.fetch_verified(dest, cands, sha256=sha, size=size, timeout=timeout)
    targets = None
    if lg["format"] == "coursework":
        if tdest.is_file():  # kept from an earlier download; verified with the logits file
            targets = tdest
        elif tcands:
            tsha, tsize = _expected({"sha256": lg.get("targets_sha256")}, lock_file, tkey, tlisted)
            try:
                S.fetch_verified(tdest, tcands, sha256=tsha, size=tsize, timeout=timeout)
                targets = tdest
            except S.DownloadError:
                if lg.get("targets", "file") == "file":
                    dest.unlink(missing_ok=True)
                    raise
        elif lg.get("targets", "file") == "file":
            dest.unlink(missing_ok=True)
            raise FileNotFoundError(
                f"model {name}: the source has no {TARGETS_FILE} beside {fname}; set targets: "
                "class_blocks if its rows are in class-folder order"
            )
    return dest, targets, got


# --------------------------------------------------------------------------- import


def labels_order_hash(labels: np.ndarray) -> str:
    """The ``order_hash`` of imported logits: the labels' content hash (the images are unknown);
    models of one folder share their ``targets.txt`` and so their order hash."""
    from calbench.io import array_digest

    return "labels:" + array_digest(np.asarray(labels, dtype=np.int64))


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
) -> dict:
    """Obtain, verify and read model ``name``'s logits; write ``out`` (and ``split_out`` for
    pre-split sources, ``provenance_out`` JSON). Returns a summary dict. ``strict``: see
    :func:`obtain`."""
    from calbench.logits import save_logits
    from calbench.split import save_split

    lg = check_entry(name, entry)
    presplit = is_presplit(entry)
    if presplit and split_out is None:
        raise ValueError(
            f"model {name} comes with its own split (split: file); pass --split-out "
            f"results/split/{entry['dataset']}/{name}.npz"
        )
    if not presplit and split_out is not None:
        raise ValueError(
            f"model {name} uses the study split (split: study); drop --split-out"
        )
    got = obtain(
        name, entry, resources, mirrors, local_file=local_file, timeout=timeout, strict=strict
    )
    synth = lg["format"] == "coursework" and lg.get("targets") == "class_blocks" and got["targets"] is None
    imp = formats.read(
        lg["format"], got["logits"], targets=got["targets"], synthesise_targets=synth,
        use_split=presplit,
    )
    ohash = labels_order_hash(imp.labels)
    save_logits(out, imp.logits, imp.labels, order_hash=ohash, model=name, dataset=entry["dataset"])
    summary = {
        "model": name,
        "dataset": entry["dataset"],
        "format": lg["format"],
        "n": int(imp.labels.shape[0]),
        "classes": int(imp.logits.shape[1]),
        "accuracy": float(np.mean(imp.logits.argmax(1) == imp.labels)),
        "order_hash": ohash,
        "targets": "class_blocks (synthesised)" if synth else ("file" if got["targets"] else None),
        "files": got["files"],
    }
    if presplit:
        val, test = imp.split
        summary["split"] = {"val": int(val.size), "test": int(test.size), "source": lg["format"]}
        save_split(split_out, val, test, order_hash=np.str_(ohash), n=np.int64(imp.labels.size),
                   source=np.str_(lg["format"]))
    if provenance_out is not None:
        atomic_write_text(provenance_out, json.dumps(summary, indent=1, sort_keys=True) + "\n")
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
        elif (lg.get("sha256") if f == lg["file"] else lg.get("targets_sha256")):
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
    if record.get("split"):
        text += f"; own split {record['split']['val']} / {record['split']['test']}"
    return text
