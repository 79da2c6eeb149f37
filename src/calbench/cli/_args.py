"""Argument helpers shared by the verb modules (no verb lives here).

Verb modules import from here and from the library only, never from each other.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

from calbench.calibrate_spec import DEFAULTS

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


def text_arg(text: str) -> str:
    """An argparse ``type`` for a name that reaches the CSVs (``--model``, ``--dataset``,
    ``--name``): plain text (:func:`calbench._checks.check_text`)."""
    from calbench._checks import check_text  # lazy: cli start-up

    try:
        return check_text(text, "the name", "pass plain text")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_json_arg(text: str, what: str) -> dict:
    """Parse a JSON object given on the command line (or ``@file.json``), at most
    :data:`MAX_JSON_ARG_BYTES` long and nested at most 64 levels deep."""
    if text.startswith("@"):
        from calbench._checks import not_regular_file  # lazy: cli start-up

        path = Path(text[1:])
        why = not_regular_file(path)
        if why == "missing":
            raise ValueError(f"{what} {path} does not exist; pass an existing JSON file")
        if why is not None:
            raise ValueError(f"{what} {path} is {why}; pass a JSON file")
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
    from calbench._checks import json_depth_exceeds  # lazy: cli start-up

    if json_depth_exceeds(value, 64):
        raise ValueError(f"{what} nests more than 64 levels deep; pass a flat JSON object")
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def parse_list(text: str | None) -> list[str] | None:
    """``"a, b,c"`` -> ``["a", "b", "c"]``; ``None`` stays ``None`` (the verb's default)."""
    if text is None:
        return None
    return [t for t in (s.strip() for s in text.split(",")) if t]


#: where a command names plug-ins (:func:`load_named_plugins`): a config slice (``--spec``,
#: ``--config``), a calibrator method, comma-separated metric names, calibrator JSON files (or,
#: for compare-implementations, comma-separated calibrator names)
SPEC_ARGS = ("spec", "config")
METHOD_ARGS = ("method",)
METRIC_ARGS = ("metrics", "ci_metrics", "compare_metrics")
CALIBRATOR_ARGS = ("calibrator", "calibrators", "summary_calibrators")


def named_plugins(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(calibrator methods, metric names) the command ``args`` names (see
    :func:`load_named_plugins`); what does not parse is skipped here, the verb reports it."""
    from calbench.calibrators.storage import read_sealed  # lazy: cli start-up
    from calbench.plugins import named_in  # lazy: cli start-up

    cals: list[str] = []
    metrics: list[str] = []
    for dest in SPEC_ARGS:
        text = getattr(args, dest, None)
        if isinstance(text, str):
            try:
                c, m = named_in(parse_json_arg(text, f"--{dest}"))
            except (ValueError, OSError):
                continue
            cals += c
            metrics += m
    cals += [v for d in METHOD_ARGS if isinstance(v := getattr(args, d, None), str)]
    for dest in METRIC_ARGS:
        value = getattr(args, dest, None)
        metrics += parse_list(value) or [] if isinstance(value, str) else []
    for dest in CALIBRATOR_ARGS:
        value = getattr(args, dest, None)
        for v in [value] if isinstance(value, str) else value or []:
            if not str(v).endswith(".json"):
                cals += parse_list(str(v)) or []
                continue
            try:
                data = read_sealed(v)
            except (ValueError, OSError):
                continue
            if isinstance(data, dict) and isinstance(data.get("method"), str):
                cals.append(data["method"])
    return cals, metrics


def load_named_plugins(
    args: argparse.Namespace, *, calibrators: bool = True, metrics: bool = True
) -> None:
    """Load the plug-in calibrators (``calibrators``) and metrics (``metrics``) the command
    ``args`` names, explicitly (:func:`calbench.plugins.load_plugins`): the methods and metric
    lists of its ``--spec`` / ``--config`` (a config slice), ``--method``, the comma-separated
    ``--metrics`` / ``--ci-metrics`` / ``--compare-metrics`` and the method each calibrator JSON
    file records. A verb calls it first, before it imports the library code that reads the
    registries; an installed plug-in nothing names is never imported. A plug-in that does not
    load is a one-line error naming it; a name that is no plug-in is left to the verb."""
    from calbench.plugins import load_plugins  # lazy: cli start-up

    cals, mets = named_plugins(args)
    load_plugins(cals if calibrators else (), mets if metrics else ())


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
    n_bins, style = DEFAULTS["plots"]["n_bins"], DEFAULTS["plots"]["style"]
    p.add_argument(
        "--n-bins", type=n_bins_arg, default=n_bins, help=f"bins (default {n_bins}, the study's)"
    )
    p.add_argument("--style", default=style, help=f"guo or coursework (default {style})")
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


def _check_logits_entry(name, entry) -> None:
    from calbench import logits_sources  # lazy: pulls numpy

    logits_sources.check_entry(name, entry)


def load_model_registry(path) -> dict:
    """The registry document of ``--config`` with every entry checked, ``source: logits`` ones
    by :func:`calbench.logits_sources.check_entry` (numpy imported only for those)."""
    from calbench.models.pretrained import load_registry  # lazy: cli start-up

    return load_registry(path, {"logits": _check_logits_entry})


def download_setup(args):
    """``(config document, resources folder, mirror folders)`` from the download options."""
    doc = load_model_registry(args.config)
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


# --------------------------------------------------------------------------------------------
# outputs never replace inputs
# --------------------------------------------------------------------------------------------
#: options whose values are names or lists of names, never paths
_NOT_PATHS = frozenset(
    {"command", "name", "title", "model", "dataset", "method", "style", "half", "halves",
     "baselines", "ci_halves", "ci_metrics", "temperatures", "curve", "corruption", "device",
     "models", "compare_metrics"}
)  # fmt: skip


def writes(p: argparse.ArgumentParser, *flags: str, files=None) -> None:
    """Declare the options of verb parser ``p`` that name files the verb writes, and with
    ``files`` a function of the parsed arguments returning ``(label, path)`` of the files it
    writes inside output folders. :func:`check_outputs` (run by ``calbench.cli.main`` before
    every verb) refuses an output that is an input or another output."""
    p.set_defaults(_writes=tuple(flags), _writes_files=files)


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _values(value) -> list:
    return [v for v in (value if isinstance(value, list | tuple) else [value]) if v]


def same_file(a, b) -> bool:
    """Whether paths ``a`` and ``b`` name one file: :func:`os.path.samefile` where both exist
    (symbolic and hard links), else their resolved absolute paths (symbolic links of folders
    followed) are equal."""
    return file_identity(a) == file_identity(b)


def file_identity(path) -> tuple:
    """What :func:`same_file` compares: an existing file's device and inode (its symbolic and
    hard links share them), else its resolved absolute path (a path that does not exist cannot
    be an existing file). As a key, it finds the paths naming one file among ``n`` in one pass
    instead of ``n^2`` comparisons (a batch of small models has hundreds of outputs)."""
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    return ("file", st.st_dev, st.st_ino)


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before anything is written, a verb whose output is one of its inputs (``--out``
    equal to ``--logits``, the template of ``render-report``, the same file through a symbolic
    or hard link) or whose two outputs are one file (``evaluate --plot X --out X``).

    The outputs are the options the verb declared with :func:`writes`; the inputs are every
    other option's value (``@file`` arguments included) that names an existing regular file."""
    outputs = [(flag, str(v)) for flag in getattr(args, "_writes", ()) for v in _values(getattr(args, _dest(flag), None))]
    extra = getattr(args, "_writes_files", None)
    if extra is not None:
        outputs += [(label, str(path)) for label, path in extra(args)]
    if not outputs:
        return
    skip = {_dest(f) for f in getattr(args, "_writes", ())} | _NOT_PATHS
    inputs = []
    for dest, value in sorted(vars(args).items()):
        if dest.startswith("_") or dest in skip or dest == "func":
            continue
        for v in _values(value):
            if isinstance(v, str):
                path = v[1:] if v.startswith("@") else v
                if os.path.isfile(path):
                    inputs.append((f"--{dest.replace('_', '-')}", path))
    named = {}  # identity -> (flag, path) of the first input or output naming that file
    for in_flag, src in inputs:
        named.setdefault(file_identity(src), (in_flag, src, True))
    for flag, out in outputs:
        key = file_identity(out)
        if key not in named:
            named[key] = (flag, out, False)
            continue
        other_flag, other, is_input = named[key]
        if is_input:
            raise ValueError(
                f"{flag} {out} is the input {other_flag} {other}: writing it would replace the "
                f"input; choose another {flag.split(' ')[0]} path"
            )
        raise ValueError(
            f"{other_flag} {other} and {flag} {out} are one file: the second would "
            "replace the first; give each output its own path"
        )


# --------------------------------------------------------------------------------------------
# display names
# --------------------------------------------------------------------------------------------
def check_display_names(spec, what: str = "--spec") -> None:
    """Refuse display names that would reach a CSV or table unsafely or give two identical rows
    or columns: every display name of a spec's ``datasets``, ``calibrators`` and ``models``
    (with a model's ``loss`` label) must be plain text (:func:`calbench._checks.check_text`), and
    no two datasets, no two calibrators, and no two models of one dataset may share a label
    (a model's label is its name, loss and seed, :func:`calbench.display.model_label`)."""
    from calbench._checks import check_text  # lazy: cli start-up
    from calbench.display import model_label  # lazy: cli start-up

    if not isinstance(spec, dict):
        return
    for section in ("datasets", "calibrators", "models"):
        entries = spec.get(section)
        if not isinstance(entries, dict):
            continue
        seen: dict[tuple, str] = {}
        for key, entry in entries.items():
            entry = entry if isinstance(entry, dict) else {}
            display = entry.get("display")
            fix = f"give {section}.{key} a display name of plain text"
            where = f"{what}: {section}.{key}"
            if section == "models":
                display = display if isinstance(display, dict) else {}
                for field in ("name", "loss"):
                    if display.get(field) is not None:
                        check_text(display[field], f"{where} display {field}", fix)
                label, group = model_label(key, display), entry.get("dataset")
            else:
                if isinstance(display, dict):  # calibrators may give {"name": ...}
                    display = display.get("name")
                label = check_text(key if display is None else display, f"{where} display", fix)
                group = None
            other = seen.get((group, label))
            if other is not None:
                raise ValueError(
                    f"{what}: {section}.{other} and {section}.{key} are both displayed as "
                    f"{label!r}, which gives two identical rows or columns; give each its own "
                    "display name"
                )
            seen[(group, label)] = key
