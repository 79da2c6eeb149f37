"""A wall-clock limit on a verb's work (``calbench calibrate --time-limit``, which rule calibrate
passes from its ``runtime`` resource): a job whose code never returns, a plug-in's included,
ends with one line instead of holding its slot indefinitely.

Two stages. At the limit ``SIGALRM`` raises :class:`TimeLimitExceeded` in the main thread: the
verb's own clean-up runs (no partial outputs) and the CLI prints the one line. Code that
swallows it (a plug-in's ``except BaseException``, a loop that never returns to the
interpreter's signal check is not caught by this stage) is ended ``grace`` seconds later by a
watchdog thread: the same line on stderr, then ``os._exit(124)`` (the status of ``timeout``);
Snakemake removes a failed job's outputs."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
from collections.abc import Iterator

#: seconds between the limit and the watchdog's hard exit
GRACE_SECONDS = 30.0


class TimeLimitExceeded(BaseException):
    """The limit passed. A BaseException, as KeyboardInterrupt, so that the code under the limit
    (``except Exception``) does not swallow it."""


def limit_text(minutes: float) -> str:
    """``minutes`` as the message gives it: ``60 min``, ``0.5 min``."""
    return f"{minutes:g} min"


@contextlib.contextmanager
def time_limit(
    minutes: float | None, message: str, *, grace: float = GRACE_SECONDS
) -> Iterator[None]:
    """Run the block under a wall-clock limit of ``minutes`` (``None``: no limit). Past it,
    :class:`TimeLimitExceeded` (``message``) is raised in the main thread; ``grace`` seconds
    later, if the block still runs, ``message`` is written to stderr and the process exits with
    status 124. Main thread only (signals)."""
    if minutes is None:
        yield
        return
    if not (isinstance(minutes, int | float) and math.isfinite(minutes) and minutes > 0):
        raise ValueError(f"a time limit must be a positive number of minutes, got {minutes!r}")

    def on_alarm(signum, frame):
        raise TimeLimitExceeded(message)

    def watchdog():
        os.write(2, f"{message} (ended: the job did not stop within {grace:g} s)\n".encode())
        os._exit(124)

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, minutes * 60.0)
    timer = threading.Timer(minutes * 60.0 + grace, watchdog)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
