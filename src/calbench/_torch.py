"""Torch plumbing shared by the library: devices, CPU threads, and eager optimizers.

* :func:`resolve_device`: ``"auto"`` -> ``"cuda"`` or ``"cpu"``, other values checked;
* :func:`set_threads`: limit the CPU threads of torch and the BLAS libraries;
* :func:`eager_optimizers`: LBFGS fits without the ``torch._dynamo`` import (below).

Keep short torch jobs short: ``torch.optim.Optimizer`` wraps several methods
(``add_param_group``, ``zero_grad``, ...) in
``torch._disable_dynamo``, whose first call imports ``torch._dynamo`` to build a "run without
the compiler" version of the method and caches it on the method as ``__dynamo_disable``. In eager
mode, which is all calbench uses, that version behaves exactly like the method itself, but the
import costs about 2-3 CPU-seconds: more than a whole temperature-scaling fit, paid by each of
the workflow's many short fit and training jobs. :func:`eager_optimizers` fills that cache with
the method itself, so nothing is imported and every computation is unchanged. If a future torch
changes the mechanism, the function does nothing and torch imports the compiler as usual.

It pays off for ``torch.optim.LBFGS`` (the scaling calibrators' fits): the ``step`` of SGD, Adam
and other first-order optimizers imports ``torch._dynamo`` by itself, so it is not used there.

Importing this module does not import torch.
"""

from __future__ import annotations

import os
import sys

#: environment variables read by the OpenMP, MKL and OpenBLAS thread pools when they start
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def resolve_device(device: str = "auto") -> str:
    """``"auto"`` -> ``"cuda"`` when a GPU is available, else ``"cpu"``; other values are checked."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device {device!r} is not a torch device; use auto, cpu or cuda"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
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


def eager_optimizers(*classes) -> None:
    """Pre-fill torch's ``_disable_dynamo`` cache of ``torch.optim.Optimizer`` (and ``classes``)."""
    import torch

    disable = getattr(torch, "_disable_dynamo", None)
    if disable is None:
        return
    wrapper_code = disable(lambda: None).__code__
    for cls in (torch.optim.Optimizer, *classes):
        for klass in cls.__mro__:
            for attr in list(vars(klass).values()):
                fn = getattr(attr, "__func__", attr)
                if getattr(fn, "__code__", None) is not wrapper_code:
                    continue
                inner = getattr(fn, "__wrapped__", None)
                if inner is not None and getattr(inner, "__dynamo_disable", None) is None:
                    setattr(inner, "__dynamo_disable", inner)
