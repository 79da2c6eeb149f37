"""Devices and CPU threads, shared by the library and the CLI.

* :func:`resolve_device`: ``"auto"`` -> ``"cuda"`` or ``"cpu"``, other values checked;
* :func:`use_device`: what ``"auto"`` means in this process (``calbench calibrate --device``);
* :func:`set_threads`: limit the CPU threads of torch and the BLAS libraries;
* :func:`set_fit_threads`: threads of the scaling fits' matrix products only
  (``calbench calibrate --threads``), everything else on one thread.

Importing this module does not import torch.
"""

from __future__ import annotations

import functools
import os
import sys

#: environment variables read by the OpenMP, MKL and OpenBLAS thread pools when they start
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: this process's choices: the device ``"auto"`` stands for (None: a GPU when one is available)
#: and the threads of the scaling fits' data term (None: torch's thread count)
_CHOSEN: dict[str, str | int | None] = {"device": None, "fit_threads": None}


@functools.cache
def _cuda_available() -> bool:
    """``torch.cuda.is_available()``, asked once per process: on a CUDA build of torch without a
    GPU every call probes the driver again (about a second each)."""
    import torch

    return torch.cuda.is_available()


def resolve_device(device: str = "auto") -> str:
    """``"auto"`` -> the device chosen by :func:`use_device`, else ``"cuda"`` when a GPU is
    available, else ``"cpu"``; other values are checked."""
    if device == "auto" and _CHOSEN["device"] is not None:
        device = _CHOSEN["device"]
    if device == "cpu":  # the common case, without importing torch
        return "cpu"
    import torch

    if device == "auto":
        return "cuda" if _cuda_available() else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device {device!r} is not a torch device; use auto, cpu or cuda"
        ) from None
    if dev.type == "cuda" and not _cuda_available():
        raise ValueError(f"device {device!r} requested but no GPU is available; use --device cpu")
    return str(dev)


def set_threads(n: int | None, *, torch_now: bool = True) -> None:
    """Limit torch and the BLAS libraries to ``n`` CPU threads (``None``: leave them as they are).

    Sets :data:`THREAD_VARIABLES` (read when a thread pool starts: numpy's BLAS, and torch if it
    is imported later) and, when torch is already imported or ``torch_now`` is true (which
    imports it), ``torch.set_num_threads(n)``. ``torch_now=False`` keeps a job that may never
    need torch from importing it.
    """
    if n is None:
        return
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"--threads must be >= 1, got {n}")
    for var in THREAD_VARIABLES:
        os.environ[var] = str(n)
    if torch_now or "torch" in sys.modules:
        import torch

        torch.set_num_threads(n)


def use_device(device: str | None) -> str | None:
    """Make ``"auto"`` (the default ``device`` of the torch-based calibrators) mean ``device``
    in this process, checked now: ``"cuda"`` without a GPU is a one-line error. ``"auto"`` is
    resolved here (a GPU when one is available); ``None`` restores the default. Returns the
    chosen device, which :func:`chosen_device` reports (the reuse cache's digest records it)."""
    _CHOSEN["device"] = None
    if device is not None:
        _CHOSEN["device"] = resolve_device(device)
    return _CHOSEN["device"]


def chosen_device() -> str | None:
    """The device set by :func:`use_device` (``None``: not set)."""
    return _CHOSEN["device"]


def set_fit_threads(n: int | None) -> None:
    """Run this process on one CPU thread except the data term of the multi-threaded scaling
    fits (:mod:`calbench.calibrators.fit_threads`), which gets ``n`` (``None``: leave the threads
    as they are). Those fits' results do not depend on ``n``, and nothing else runs on more than
    one thread, so every output is the same for any ``n``. Call it before numpy's BLAS starts."""
    if n is None:
        return
    set_threads(n, torch_now=False)  # checks n
    set_threads(1, torch_now=False)
    _CHOSEN["fit_threads"] = n


def fit_threads() -> int | None:
    """Threads of the scaling fits' data term set by :func:`set_fit_threads` (``None``: not set)."""
    return _CHOSEN["fit_threads"]
