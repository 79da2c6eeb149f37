"""Devices and CPU threads, shared by the library and the CLI.

* :func:`resolve_device`: ``"auto"`` -> ``"cuda"`` or ``"cpu"``, other values checked;
* :func:`set_threads`: limit the CPU threads of torch and the BLAS libraries.

Importing this module does not import torch.
"""

from __future__ import annotations

import functools
import os
import sys

#: environment variables read by the OpenMP, MKL and OpenBLAS thread pools when they start
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@functools.cache
def _cuda_available() -> bool:
    """``torch.cuda.is_available()``, asked once per process: on a CUDA build of torch without a
    GPU every call probes the driver again (about a second each)."""
    import torch

    return torch.cuda.is_available()


def resolve_device(device: str = "auto") -> str:
    """``"auto"`` -> ``"cuda"`` when a GPU is available, else ``"cpu"``; other values are checked."""
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
