"""The provenance section of the report: the run, package versions and the data's fingerprints.

:func:`run_provenance` records how the report was made: the git commit of the workflow and
whether its working tree had uncommitted changes (``"not a git checkout"`` outside git, never an
error), the date and time of the run (``SOURCE_DATE_EPOCH`` when set, as reproducible-build
checks expect, https://reproducible-builds.org/specs/source-date-epoch/), and what only the
workflow knows, passed as a small JSON file (:data:`RUN_INFO_KEYS`, ``calbench render-report
--run-info FILE``): the command line, the Snakemake version and the configuration files, whose
SHA-256 is computed here. The library never imports snakemake.

The report travels: no absolute path of the machine appears in it (:func:`display_path`: paths
relative to the study folder or the workflow folder, others by their name only), so the same
study run in two folders gives byte-identical reports when ``SOURCE_DATE_EPOCH`` is set.
:func:`hardware` records the machine that rendered the report (CPU model, cores, GPUs) and
:func:`wall_time` the run's duration from Snakemake's ``benchmarks/`` files (see there how it is
measured); wall time is a clock reading, so it is left out when ``SOURCE_DATE_EPOCH`` is set.

:func:`package_versions` reads installed versions from metadata (nothing imported);
:func:`provenance_view` shows the run as a compact field/value table, the logits and split
hashes with repeated values once and every dataset manifest field with what it means
(:data:`MANIFEST_FIELDS`).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from calbench.io import file_digest
from calbench.report.machine import duration as _duration
from calbench.report.machine import hardware, wall_time

#: The keys of the run-info JSON file (``calbench render-report --run-info FILE``), what the
#: workflow knows and the library does not. Every key is optional; no other key is accepted.
#: Example: ``{"command": ["snakemake", "--cores", "8"], "snakemake_version": "9.1.1",
#: "config_files": ["config.yaml"], "workflow_dir": "/home/me/calbench"}``.
RUN_INFO_KEYS = {
    "command": "the command line that ran the workflow: a list of arguments (shell-quoted "
    "when shown) or one string",
    "snakemake_version": "the version of Snakemake that ran the workflow (snakemake.__version__)",
    "config_files": "paths of the configuration files, in the order Snakemake read them; their "
    "SHA-256 is computed when the report is rendered",
    "workflow_dir": "the workflow's directory (where the Snakefile is): the git commit is read "
    "there; default the current directory",
    "benchmarks_dir": "the folder of Snakemake's benchmark files (benchmarks/): the run's wall "
    "time is measured from them (wall_time)",
}

#: The text shown for the commit outside a git working tree (a tarball, a copied folder).
NOT_GIT = "not a git checkout"


def read_run_info(path: str | os.PathLike) -> dict:
    """The run-info JSON file (:data:`RUN_INFO_KEYS`), checked; a one-line error otherwise."""
    p = Path(path)
    try:
        info = json.loads(p.read_text())
    except FileNotFoundError:
        raise ValueError(
            f"run-info file {p} does not exist; pass the JSON the workflow wrote"
        ) from None
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"run-info file {p} is not JSON ({exc.msg}); write it with json.dump"
        ) from None
    return check_run_info(info, str(p))


def check_run_info(info, where: str = "run info") -> dict:
    """``info`` checked against :data:`RUN_INFO_KEYS` (types and names); returns a copy."""
    if not isinstance(info, Mapping):
        raise ValueError(f"{where} must be a JSON object with keys {sorted(RUN_INFO_KEYS)}")
    unknown = sorted(set(info) - set(RUN_INFO_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; use only {sorted(RUN_INFO_KEYS)}")
    out = dict(info)
    cmd = out.get("command")
    if cmd is not None and not (
        isinstance(cmd, str) or (isinstance(cmd, list) and all(isinstance(a, str) for a in cmd))
    ):
        raise ValueError(f"{where}: command must be a string or a list of strings, got {cmd!r}")
    for key in ("snakemake_version", "workflow_dir", "benchmarks_dir"):
        if out.get(key) is not None and not isinstance(out[key], str):
            raise ValueError(f"{where}: {key} must be a string, got {out[key]!r}")
    files = out.get("config_files")
    if files is not None and not (
        isinstance(files, list) and all(isinstance(f, str) for f in files)
    ):
        raise ValueError(f"{where}: config_files must be a list of paths, got {files!r}")
    return out


def git_state(directory: str | os.PathLike = ".") -> dict:
    """``{"commit": sha | None, "dirty": bool | None, "text": ...}`` of the git working tree
    holding ``directory``: ``dirty`` when tracked files differ from the commit or untracked
    files that git does not ignore exist. Outside git, or without git, ``commit`` is None and
    ``text`` says so (never an error)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(directory), *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
        ).stdout

    try:
        if git("rev-parse", "--is-inside-work-tree").strip() != "true":
            raise subprocess.CalledProcessError(1, "git")
        commit = git("rev-parse", "--verify", "HEAD").strip()
        dirty = bool(git("status", "--porcelain", "--untracked-files=normal").strip())
    except FileNotFoundError:
        return {"commit": None, "dirty": None, "text": f"{NOT_GIT} (git is not installed)"}
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
        return {"commit": None, "dirty": None, "text": NOT_GIT}
    text = commit + (" with uncommitted changes" if dirty else " (clean working tree)")
    return {"commit": commit, "dirty": dirty, "text": text}


def run_time(env: Mapping[str, str] | None = None) -> dict:
    """Date and time of the run in UTC, ``{"iso": "2026-01-02T03:04:05Z", "source": ...}``:
    ``SOURCE_DATE_EPOCH`` (seconds since 1970, UTC) when set, else the clock."""
    env = os.environ if env is None else env
    raw = env.get("SOURCE_DATE_EPOCH")
    if raw is not None and raw != "":
        try:
            seconds = int(raw)
        except ValueError:
            raise ValueError(
                f"SOURCE_DATE_EPOCH must be whole seconds since 1970-01-01 UTC, got {raw!r}; "
                "unset it or give an integer"
            ) from None
        when = _dt.datetime.fromtimestamp(seconds, _dt.UTC)
        source = "SOURCE_DATE_EPOCH"
    else:
        when = _dt.datetime.now(_dt.UTC).replace(microsecond=0)
        source = "clock"
    return {"iso": when.strftime("%Y-%m-%dT%H:%M:%SZ"), "source": source}


def display_path(path: str | os.PathLike, bases: Sequence[str | os.PathLike] = ()) -> str:
    """``path`` as the report shows it, without this machine's layout: a relative path as given;
    an absolute one relative to the first of ``bases`` (default: the current directory, the
    study folder) that holds it, else ``.../<name>`` (outside the study: its name only)."""
    p = Path(path)
    if not p.is_absolute():
        return str(path)
    for base in [*bases, Path.cwd()]:
        base = Path(os.path.abspath(base))
        if Path(os.path.abspath(p)).is_relative_to(base):
            return Path(os.path.abspath(p)).relative_to(base).as_posix() or "."
    return f".../{p.name}"


def _display_command(cmd, bases) -> list[str] | str | None:
    """The command line with every absolute path argument (``/a/b``, ``--opt=/a/b``, the
    interpreter) shown by :func:`display_path`."""
    if not isinstance(cmd, list):
        return cmd

    def one(arg: str) -> str:
        if arg.startswith("/"):
            return display_path(arg, bases)
        if "=" in arg and arg.split("=", 1)[1].startswith("/"):
            opt, value = arg.split("=", 1)
            return f"{opt}={display_path(value, bases)}"
        return arg

    return [one(a) for a in cmd]


def run_provenance(run_info: Mapping | None = None, env: Mapping[str, str] | None = None) -> dict:
    """How this report was made: git state, run time, command, Snakemake version, config files
    with their SHA-256 (``run_info``: :data:`RUN_INFO_KEYS`, or None when not given), the
    hardware and the run's wall time. Paths are shown by :func:`display_path` (relative to the
    study folder or the workflow folder): no absolute path of the machine."""
    info = check_run_info(run_info or {})
    bases = [b for b in (Path.cwd(), info.get("workflow_dir")) if b]
    configs = []
    for path in info.get("config_files") or []:
        p = Path(path)
        if not p.is_file():
            raise ValueError(
                f"config file {display_path(p, bases)} named in the run info does not exist; "
                "pass existing paths"
            )
        configs.append({"path": display_path(path, bases), "sha256": file_digest(p)})
    return {
        "git": git_state(info.get("workflow_dir") or "."),
        "time": run_time(env),
        "command": _display_command(info.get("command"), bases),
        "snakemake_version": info.get("snakemake_version"),
        "config_files": configs,
        "hardware": hardware(),
        "wall_time": wall_time(info.get("benchmarks_dir"), env)
        if run_info is not None
        else {"note": "not recorded (calbench render-report --run-info FILE)"},
        "given": run_info is not None,
    }


def run_view(run: Mapping | None) -> list[dict]:
    """The run as rows ``{"field", "value", "code", "id"}`` (one line each in the report)."""
    missing = "not recorded (calbench render-report --run-info FILE)"
    if not run:
        return [
            {
                "field": "Run",
                "value": missing,
                "code": False,
                "id": "run-missing",
                "note": "",
                "warn": False,
            }
        ]
    git = run.get("git") or {}
    rows = [
        {
            "field": "Workflow commit",
            "value": git.get("commit") or git.get("text") or NOT_GIT,
            "code": bool(git.get("commit")),
            "id": "run-commit",
        }
    ]
    if git.get("commit"):
        rows.append(
            {
                "field": "Working tree",
                "value": "uncommitted changes: the results may not match this commit"
                if git.get("dirty")
                else "clean (no uncommitted changes)",
                "code": False,
                "id": "run-dirty",
                "warn": bool(git.get("dirty")),
            }
        )
    time = run.get("time") or {}
    rows.append(
        {
            "field": "Run date (UTC)",
            "value": time.get("iso", ""),
            "code": False,
            "id": "run-date",
            "note": "from SOURCE_DATE_EPOCH" if time.get("source") == "SOURCE_DATE_EPOCH" else "",
        }
    )
    cmd = run.get("command")
    if isinstance(cmd, list):
        cmd = shlex.join(cmd)
    rows.append(
        {"field": "Command", "value": cmd or missing, "code": bool(cmd), "id": "run-command"}
    )
    rows.append(
        {
            "field": "Snakemake",
            "value": run.get("snakemake_version") or missing,
            "code": False,
            "id": "run-snakemake",
        }
    )
    configs = run.get("config_files") or []
    for i, c in enumerate(configs):
        rows.append(
            {
                "field": "Config SHA-256",
                "value": c["sha256"],
                "code": True,
                "id": f"run-config-{i}",
                "note": c["path"],
            }
        )
    if not configs:
        rows.append(
            {"field": "Config file SHA-256", "value": missing, "code": False, "id": "run-config"}
        )
    hw = run.get("hardware")
    if hw:
        gpus = ", ".join(hw.get("gpus") or []) or "none found"
        rows.append(
            {
                "field": "Hardware",
                "value": f"{hw.get('cpu')}, {hw.get('cores')} cores; GPU: {gpus}",
                "code": False,
                "id": "run-hardware",
                "note": "the machine that rendered the report",
            }
        )
    wall = run.get("wall_time")
    if wall:
        if "elapsed_s" in wall:
            value = (
                f"{_duration(wall['elapsed_s'])} elapsed (first job start to last job end), "
                f"{_duration(wall['job_s'])} summed over {wall['jobs']} jobs"
            )
            note = "from Snakemake's benchmark files"
        else:
            value, note = wall.get("note", ""), ""
        rows.append({"field": "Wall time", "value": value, "code": False, "id": "run-wall", "note": note})
    return [{"note": "", "warn": False, **r} for r in rows]


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
        "run_rows": run_view(provenance.get("run")),
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
