"""Reuse of unchanged calibrators inside ``calibrate`` (``--reuse-dir``): each calibrator's three
files are kept under a digest of everything they depend on, and copied back instead of refitted
when nothing changed.

A kept entry is verified, not trusted: ``<reuse_dir>/<key>/<digest>/`` holds the calibrator
JSON, the metrics CSV, the diagram PNG and, written last, ``manifest.json`` recording each
file's SHA-256 (:func:`calbench.io.file_digest`) and the digest the entry was stored under. An
entry is copied back only when the manifest is present and every file matches it (and the CSV
and PNG are not empty, the PNG has a PNG signature); otherwise, whatever the cause (a file
edited, emptied or deleted, a manifest missing or damaged, a folder of an older calbench), the
entry is discarded with a note on stderr and the calibrator is refitted, which stores a fresh
entry. The copies are written from the bytes that were verified, atomically. ``calibrate``
stores an entry only after verifying that the job's logits and labels still hold what was
loaded (plug-in code works on copies or read-only views of them, :mod:`calbench.isolation`), so
no entry holds a result computed on inputs another calibrator or metric changed.

An entry also keeps what the cross-fitted selection found for its calibrator
(``selection.json``: the mean held-out scores, or why it is not a candidate, under the
selection's settings: folds, seed, compared metrics), sealed with the SHA-256 of its content.
Adding a calibrator then refits only the new one on the folds as well; a record of other
settings, or one that fails its seal, is ignored and the calibrator refitted on the folds.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from calbench._device import chosen_device
from calbench.io import atomic_write_bytes, atomic_write_text, bytes_digest, file_digest, hasher
from calbench.metrics import METRICS
from calbench.plugin_inputs import code_digest as plugin_code_digest

#: the numeric libraries whose versions a calibrator's files may depend on
NUMERIC_LIBRARIES = ("numpy", "scipy", "torch", "matplotlib", "scikit-learn")
#: the kept files of one calibrator, in the order of ``calibrate``'s paths (JSON, CSV, PNG; the
#: first two alone when the spec draws no diagram per calibrator, ``plots.per_calibrator``)
NAMES = ("calibrator.json", "metrics.csv", "diagram.png")
#: a cross-fitted calibrator's out-of-fold probabilities ``(R, N, K)`` (``numpy.save``), kept
#: beside its files: what the comparisons, the grid and the ranks read instead of refitting
OOF = "oof.npy"
#: written last into an entry: each file's SHA-256
MANIFEST = "manifest.json"
#: the cross-fitted selection's findings for the entry's calibrator (calbench.stats.selection)
SELECTION = "selection.json"
#: a manifest is a few hundred bytes; anything far larger is not one
_MAX_MANIFEST_BYTES = 1 << 16
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def code_digest() -> str:
    """sha256 over every source file of the calbench package and the versions of
    :data:`NUMERIC_LIBRARIES`: any edit to the library invalidates every reused file."""
    from importlib import metadata

    root = Path(__file__).resolve().parent
    h = hasher()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for name in NUMERIC_LIBRARIES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "absent"
        h.update(f"{name}={version}\0".encode())
    return h.hexdigest()


def reuse_digest(key: str, spec: dict, meta: dict, split_digest: str, code_digest: str) -> str:
    """The digest under which ``calibrate`` keeps calibrator ``key``'s files: everything its
    JSON, metrics CSV and diagram depend on (the spec's entry for ``key``, its evaluation and
    plot sections, the logits and their order, the split file, the names in the CSV, the
    library's code and the numeric libraries' versions, the thread setting, the device of the
    torch-based fits chosen by ``--device``)."""
    record = {
        "key": key,
        "entry": spec["calibrators"][key],
        "evaluation": spec["evaluation"],
        "plots": spec["plots"],
        "logits": [meta["logits_sha256"], meta["order_hash"]],
        "names": [meta["dataset"], meta["model"]],
        "split": split_digest,
        "code": code_digest,
        "threads": os.environ.get("OMP_NUM_THREADS"),
        "device": chosen_device(),
    }
    # a plug-in's code (the calibrator's, the evaluated metrics') is not calbench's: its digest
    plugins = plugin_code_digest(
        [record["entry"]["method"]], spec["evaluation"].get("metrics") or list(METRICS)
    )
    if plugins:
        record["plugins"] = plugins
    text = json.dumps(record, sort_keys=True, default=str)
    return bytes_digest(text)[:32]


def _content_problem(name: str, data: bytes) -> str | None:
    """Why the bytes of kept file ``name`` cannot be an output, or ``None``."""
    if not data:
        return f"{name} is empty"
    if name.endswith(".png") and not data.startswith(_PNG_SIGNATURE):
        return f"{name} is not a PNG image"
    return None


class Reuse:
    """``reuse_dir/<key>/<digest>/`` holds the files of calibrator ``key`` as last computed
    with that digest (:func:`reuse_digest`) and their manifest; a folder appears complete or not
    at all (written under a temporary name, then renamed), older digests of a key are removed,
    and so are the folders of keys no longer in the spec once a run succeeds (:meth:`prune`)."""

    def __init__(self, reuse_dir, spec: dict, data: dict, split_path, log=None) -> None:
        self.root = Path(reuse_dir)
        self.log = log if log is not None else sys.stderr
        self.digests = {}
        split_digest, code = file_digest(split_path), code_digest()
        for key in spec["calibrators"]:
            self.digests[key] = reuse_digest(key, spec, data["meta"], split_digest, code)

    def folder(self, key: str) -> Path:
        return self.root / key / self.digests[key]

    def _verified(self, key: str, names=NAMES) -> list[bytes] | str:
        """The bytes of the kept files ``names`` if the entry matches its manifest, else why
        not (``""``: no entry at all)."""
        folder = self.folder(key)
        if not folder.is_dir():
            return ""
        manifest = folder / MANIFEST
        try:
            if manifest.stat().st_size > _MAX_MANIFEST_BYTES:
                return f"{MANIFEST} is too large"
            record = json.loads(manifest.read_text())
        except FileNotFoundError:
            return f"{MANIFEST} is missing (an interrupted or older entry)"
        except (OSError, ValueError) as exc:
            return f"{MANIFEST} is unreadable ({type(exc).__name__})"
        files = record.get("files") if isinstance(record, dict) else None
        if not isinstance(files, dict) or record.get("digest") != self.digests[key]:
            return f"{MANIFEST} does not describe this entry"
        out = []
        for name in names:
            want = files.get(name)
            try:
                data = (folder / name).read_bytes()
            except FileNotFoundError:
                return f"{name} is missing"
            except OSError as exc:
                return f"{name} is unreadable ({exc.strerror or exc})"
            if not isinstance(want, str) or bytes_digest(data) != want:
                return f"{name} does not match its digest in {MANIFEST} (edited)"
            problem = _content_problem(name, data)
            if problem:
                return problem
            out.append(data)
        return out

    def restore(self, key: str, paths, names=None) -> bool:
        """Write ``key``'s kept files to ``paths`` (JSON, CSV, PNG; ``names`` their kept names,
        default the first ``len(paths)`` of :data:`NAMES`) if its entry is verified against its
        manifest; ``False`` (refit) if there is none or it fails verification, which also
        discards it, with a note on the log."""
        got = self._verified(key, names or NAMES[: len(paths)])
        if isinstance(got, str):
            if got:
                print(
                    f"note: the kept files of calibrator {key!r} in {self.folder(key)} are not "
                    f"reused: {got}; refitting it",
                    file=self.log,
                )
                shutil.rmtree(self.folder(key), ignore_errors=True)
            return False
        for data, dst in zip(got, paths, strict=True):
            atomic_write_bytes(dst, data)
        return True

    def forget(self, key: str, paths) -> None:
        """Drop ``key``'s kept folder and the files :meth:`restore` copied to ``paths``."""
        for path in paths:
            Path(path).unlink(missing_ok=True)
        shutil.rmtree(self.folder(key), ignore_errors=True)

    def store(self, key: str, paths, names=None) -> None:
        """Keep copies of ``key``'s freshly written files (JSON, CSV, PNG; ``names`` as in
        :meth:`restore`) under its digest, with their manifest written last."""
        base = self.root / key
        base.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=base))
        final = base / self.digests[key]
        try:
            files = {}
            for src, name in zip(paths, names or NAMES[: len(paths)], strict=True):
                shutil.copyfile(src, tmp / name)
                files[name] = file_digest(tmp / name)
            record = {"digest": self.digests[key], "files": files}
            atomic_write_text(tmp / MANIFEST, json.dumps(record, indent=1, sort_keys=True) + "\n")
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
        for other in base.iterdir():
            if other.name != final.name and other.is_dir():
                shutil.rmtree(other, ignore_errors=True)

    def prune(self) -> None:
        """Drop the kept folders of calibrators no longer in the spec (after a run succeeded):
        the folder keeps what the study has, not every calibrator it ever had."""
        if not self.root.is_dir():
            return
        for other in self.root.iterdir():
            if other.is_dir() and other.name not in self.digests:
                shutil.rmtree(other, ignore_errors=True)

    def known_selection(self, settings: dict) -> dict:
        """What earlier runs' cross-fitted selection found for each calibrator whose entry is
        kept (:func:`calbench.stats.selection.crossfit_scores`' ``known``), for the same ``settings``
        (folds, seed, compared metrics; JSON-able); a record of other settings or whose seal
        does not match its content is left out (that calibrator is refitted on the folds)."""
        out, wanted = {}, _selection_settings(settings)
        for key in self.digests:
            path = self.folder(key) / SELECTION
            try:
                if path.stat().st_size > _MAX_MANIFEST_BYTES:
                    continue
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if not isinstance(record, dict) or record.get("sha256") != _seal(
                record.get("settings"), record.get("result")
            ):
                continue
            if record["settings"] == wanted:
                out[key] = record["result"]
        return out

    def keep_selection(self, settings: dict, results: dict) -> None:
        """Keep ``results`` (calibrator key -> :func:`calbench.stats.selection.candidate_result`) in
        the kept entries, under ``settings``; a calibrator without a kept entry or without a
        finding (``None``) is skipped."""
        kept = _selection_settings(settings)
        for key, result in results.items():
            if result is None or key not in self.digests or not self.folder(key).is_dir():
                continue
            folder = self.folder(key)
            record = {"settings": kept, "result": result, "sha256": _seal(kept, result)}
            atomic_write_text(folder / SELECTION, json.dumps(record, sort_keys=True) + "\n")


def _selection_settings(settings: dict):
    """``settings`` as they read back from JSON, with the digest of any plug-in metric's code
    among ``settings["metrics"]`` (calbench's own code is in the entry's digest)."""
    full = {**settings, "plugins": plugin_code_digest([], list(settings.get("metrics") or []))}
    return json.loads(json.dumps(full, sort_keys=True))


def _seal(settings, result) -> str:
    """SHA-256 of a selection record's content (floats written by repr: exact round trip)."""
    text = json.dumps({"settings": settings, "result": result}, sort_keys=True)
    return bytes_digest(text)
