"""Torch plumbing of the scaling fits: :func:`eager_optimizers`, LBFGS fits without the
``torch._dynamo`` import (below). Devices and CPU threads: :mod:`calbench._device`.

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
