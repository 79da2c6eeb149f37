"""Argument helpers shared by the verb modules (no verb lives here).

Verb modules import from here and from the library only, never from each other.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

#: Bounds of the user-controlled sizes, checked by argparse before any work starts.
DPI_RANGE = (10, 1200)  # a 6 x 4 inch figure at 1200 dpi is 7200 x 4800 pixels
BOOTSTRAP_RANGE = (0, 100_000)
BATCH_RANGE = (1, 1 << 16)
#: Longest model / calibrator / dataset name: names become file names and Snakemake wildcards.
MAX_NAME = 64
#: Largest JSON given on the command line or as @file (a spec or a parameter object).
MAX_JSON_ARG_BYTES = 16 << 20


def bounded_int(name: str, low: int, high: int):
    """An argparse ``type``: an integer in [``low``, ``high``], else a one-line usage error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{name} = {value} is out of range; use an integer in [{low}, {high}]"
            )
        return value

    parse.__name__ = name  # argparse names the type in its messages
    return parse


def n_bins_arg(text: str) -> int:
    from calbench._checks import MAX_BINS  # lazy: cli start-up

    return bounded_int("--n-bins", 1, MAX_BINS)(text)


def bootstrap_arg(text: str) -> int:
    return bounded_int("--n-bootstrap", *BOOTSTRAP_RANGE)(text)


def batch_size_arg(text: str) -> int:
    return bounded_int("--batch-size", *BATCH_RANGE)(text)


def name_arg(text: str) -> str:
    """An argparse ``type`` for a model / calibrator name: a slug of at most :data:`MAX_NAME`
    characters (lowercase letters, digits, '_')."""
    if len(text) > MAX_NAME:
        raise argparse.ArgumentTypeError(
            f"name {text[:20]!r}... has {len(text)} characters; use at most {MAX_NAME}"
        )
    if not re.fullmatch(r"[a-z0-9][a-z0-9_]*", text):
        raise argparse.ArgumentTypeError(
            f"name {text!r} is not a slug; use lowercase letters, digits and '_'"
        )
    return text


def parse_json_arg(text: str, what: str) -> dict:
    """Parse a JSON object given on the command line (or ``@file.json``), at most
    :data:`MAX_JSON_ARG_BYTES` long and nested at most 64 levels deep."""
    if text.startswith("@"):
        path = Path(text[1:])
        if path.is_dir():
            raise ValueError(f"{what} {path} is a directory; pass a JSON file")
        if not path.is_file():
            raise ValueError(f"{what} {path} does not exist; pass an existing JSON file")
        if path.stat().st_size > MAX_JSON_ARG_BYTES:
            raise ValueError(f"{what} {path} is larger than {MAX_JSON_ARG_BYTES} bytes; is it the right file?")
        text = path.read_text()
    if len(text) > MAX_JSON_ARG_BYTES:
        raise ValueError(f"{what} is longer than {MAX_JSON_ARG_BYTES} characters; pass a smaller object")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{what} is not valid JSON ({exc.msg}); pass an object like '{{}}'"
        ) from exc
    except RecursionError:
        raise ValueError(f"{what} nests too deeply; pass a flat JSON object") from None
    from calbench.calibrators.base import _json_depth_exceeds  # lazy: cli start-up

    if _json_depth_exceeds(value, 64):
        raise ValueError(f"{what} nests more than 64 levels deep; pass a flat JSON object")
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
    p.add_argument(
        "--n-bins", type=n_bins_arg, default=10, help="bins (default 10, the study's diagrams)"
    )
    p.add_argument("--style", default="guo", help="guo or coursework (default guo)")
    p.add_argument("--title", help="figure title")
    p.add_argument(
        "--dpi",
        type=bounded_int("--dpi", *DPI_RANGE),
        default=100,
        help=f"PNG resolution (default 100, at most {DPI_RANGE[1]})",
    )


def plot_options(args: argparse.Namespace) -> dict:
    return {"n_bins": args.n_bins, "style": args.style, "title": args.title, "dpi": args.dpi}


def timeout_arg(text: str) -> float:
    """``--timeout``: seconds in (0, 3600]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--timeout must be a number of seconds, got {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"--timeout = {text} is out of range; use (0, 3600] seconds")
    return value


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
    p.add_argument(
        "--timeout", type=timeout_arg, default=60.0, help="seconds per download attempt (<= 3600)"
    )
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
    from calbench.models.pretrained import load_registry  # lazy: cli start-up

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


def set_threads(n, *, torch_now: bool = True) -> None:
    """``--threads``: :func:`calbench._device.set_threads` (torch's and BLAS's CPU threads;
    ``torch_now=False`` leaves torch unimported until a fit needs it). ``None``: leave the
    threads as they are."""
    from calbench._device import set_threads as _set_threads  # lazy: cli start-up

    _set_threads(n, torch_now=torch_now)
