"""The ``calbench`` command line: one verb per workflow step, so every step runs by hand too.

Each submodule listed in ``_COMMAND_MODULES`` defines ``register(subparsers)``, which adds its
verbs with ``subparsers.add_parser(...)`` and sets ``func`` (a callable taking the parsed
``argparse.Namespace`` and returning an exit code or None) via ``parser.set_defaults(func=...)``.

Errors that are the user's (bad input, bad config, a checksum mismatch) are raised as
``ValueError`` / ``FileNotFoundError`` and printed here as one line, exit status 2, no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from calbench import __version__
from calbench.cli._args import check_outputs

_COMMAND_MODULES = (
    "data",
    "models",
    "logits",
    "calibrate",
    "plots",
    "report",
    "replication",
    "stage",
    "shift",
    "check",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="calbench",
        description="Calibration benchmark: each verb is one step of the workflow.",
    )
    parser.add_argument("--version", action="version", version=f"calbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="VERB", required=True)
    for mod in _COMMAND_MODULES:
        importlib.import_module(f"calbench.cli.{mod}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """``calbench <verb> ...``: parse ``argv`` and run its verb; user errors are one line,
    status 2."""
    from_command_line = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        check_outputs(args)  # before anything is written: no output replaces an input
        rc = args.func(args)
    except (ValueError, FileNotFoundError, KeyError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"calbench {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except OSError as exc:  # an output folder that is read-only, full, or a file
        print(f"calbench {args.command}: error: {_os_error(exc)}", file=sys.stderr)
        return 2
    if from_command_line:
        print(resource_line(args.command), file=sys.stderr)
    return int(rc or 0)


def resource_line(command: str) -> str:
    """``calbench <verb>: <t> CPU-s, <m> MB peak memory``: the process's own CPU time (user +
    system, with any child processes it waited for) and peak resident memory, the last line of a
    successful verb's stderr, so a job's log holds its exact cost (Snakemake's benchmark files
    sample CPU time every few seconds and miss the end of a job; ``perf/bench_workflow.py``
    reads this line)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    peak_mb = max(own.ru_maxrss, kids.ru_maxrss) / 1024.0  # kilobytes on Linux
    return f"calbench {command}: {cpu:.2f} CPU-s, {peak_mb:.0f} MB peak memory"


def _os_error(exc: OSError) -> str:
    """One line for an operating-system error: what failed on which path, and the fix."""
    import errno

    where = f" {exc.filename}" if exc.filename else ""
    fixes = {
        errno.EACCES: "make the folder writable or choose another --out",
        errno.EROFS: "the file system is read-only; choose another --out",
        errno.ENOSPC: "the disk is full; free space or choose another --out",
        errno.EEXIST: "a parent of the output path is a file; choose another --out",
        errno.ENOTDIR: "a parent of the output path is a file; choose another --out",
    }
    fix = fixes.get(exc.errno, "check the path and try again")
    return f"cannot write or read{where}: {exc.strerror or exc}; {fix}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
