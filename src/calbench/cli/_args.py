"""Argument helpers shared by the verb modules (no verb lives here).

Verb modules import from here and from the library only, never from each other.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def parse_json_arg(text: str, what: str) -> dict:
    """Parse a JSON object given on the command line (or ``@file.json``)."""
    if text.startswith("@"):
        text = Path(text[1:]).read_text()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{what} is not valid JSON ({exc.msg}); pass an object like '{{}}'"
        ) from exc
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def parse_list(text: str | None) -> list[str] | None:
    """``"a, b,c"`` -> ``["a", "b", "c"]``; ``None`` stays ``None`` (the verb's default)."""
    if text is None:
        return None
    return [t for t in (s.strip() for s in text.split(",")) if t]


def add_logits_split(p: argparse.ArgumentParser) -> None:
    p.add_argument("--logits", required=True, help="logits .npz written by cache-logits")
    p.add_argument("--split", required=True, help="split .npz written by split")


def add_allow_other_logits(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-other-logits",
        action="store_true",
        help="apply calibrators fitted on other logits (default: refuse, naming the file)",
    )


def add_plot_options(p: argparse.ArgumentParser) -> None:
    """``--n-bins --style --title --dpi`` of a reliability diagram."""
    p.add_argument("--n-bins", type=int, default=10, help="bins (default 10, the study's diagrams)")
    p.add_argument("--style", default="guo", help="guo or coursework (default guo)")
    p.add_argument("--title", help="figure title")
    p.add_argument("--dpi", type=int, default=100, help="PNG resolution (default 100)")


def plot_options(args: argparse.Namespace) -> dict:
    return {"n_bins": args.n_bins, "style": args.style, "title": args.title, "dpi": args.dpi}


def add_download_options(p: argparse.ArgumentParser, config_required: bool = True) -> None:
    """``--config --resources --mirror --timeout --strict-checksums`` of the download verbs."""
    p.add_argument(
        "--config",
        required=config_required,
        help="workflow configuration / registry YAML with a models: mapping (config/coursework.yaml)",
    )
    p.add_argument(
        "--resources",
        default=None,
        help="resources folder (default: config 'resources' or ./resources)",
    )
    add_fetch_options(p)


def add_fetch_options(p: argparse.ArgumentParser) -> None:
    """``--mirror --timeout --strict-checksums``: where local copies are, how long a download
    may take, whether unpinned files are refused."""
    p.add_argument(
        "--mirror",
        action="append",
        default=[],
        metavar="DIR",
        help="directory holding local copies (searched by folder and file name; repeatable)",
    )
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per download attempt")
    p.add_argument(
        "--strict-checksums",
        action="store_true",
        help="refuse files without a published sha256 (default: pin them on first use in "
        "<resources>/checksums.lock; config key strict_checksums)",
    )


def add_repin(p: argparse.ArgumentParser) -> None:
    """``--repin``: pin a file without a published checksum on purpose (docs/workflow.md)."""
    p.add_argument(
        "--repin",
        action="store_true",
        help="pin this file on purpose: record its sha256 in <resources>/checksums.lock even "
        "where it cannot be proven right (e.g. an expected accuracy not checkable here), "
        "replacing an existing record (stated on stderr); published checksums are never replaced",
    )


def download_setup(args):
    """``(config document, resources folder, mirror folders)`` from the download options."""
    from calbench.models.pretrained import load_registry

    doc = load_registry(args.config)
    resources = Path(args.resources or doc.get("resources") or "resources")
    mirrors = [*args.mirror, *(doc.get("mirrors") or [])]
    return doc, resources, mirrors


def add_threads_arg(p) -> None:
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for torch (default: torch's choice; Snakemake passes {threads})",
    )


def set_threads(n) -> None:
    """``--threads``: :func:`calbench._device.set_threads` (torch's and BLAS's CPU threads)."""
    from calbench._device import set_threads as _set_threads

    _set_threads(n)
