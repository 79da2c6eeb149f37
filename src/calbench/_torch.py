"""Torch plumbing of every optimiser loop: :func:`eager_optimizers` and :func:`eager_step` keep
fits and training from importing ``torch._dynamo`` (below). Devices and CPU threads:
:mod:`calbench._device`.

Keep short torch jobs short: ``torch.optim.Optimizer`` wraps several methods
(``add_param_group``, ``zero_grad``, ...) in
``torch._disable_dynamo``, whose first call imports ``torch._dynamo`` to build a "run without
the compiler" version of the method and caches it on the method as ``__dynamo_disable``. In eager
mode, which is all calbench uses, that version behaves exactly like the method itself, but the
import costs about 2-3 CPU-seconds: more than a whole temperature-scaling fit, paid by each of
the workflow's many short fit and training jobs. :func:`eager_optimizers` fills that cache with
the method itself, so nothing is imported and every computation is unchanged. If a future torch
changes the mechanism, the function does nothing and torch imports the compiler as usual.

The ``step`` of SGD, Adam and the other first-order optimisers is wrapped once more
(``_use_grad_for_differentiable``): the wrapper imports ``torch._dynamo`` on every call to mark a
graph break, which only compiled code sees, and runs the step with gradients off.
:func:`eager_step` runs the unwrapped step with gradients off, so training jobs and the
TS-SB-ECE fit skip the import too. Both give bit-identical parameters
(``tests/test_torch_eager.py``).

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


def eager_step(optimizer, closure=None):
    """``optimizer.step(closure)`` without importing ``torch._dynamo``.

    Runs the innermost ``step`` (below torch's profiling and ``_use_grad_for_differentiable``
    wrappers) with gradients enabled only for a ``differentiable`` optimiser, as the wrapper
    does. With step hooks registered (which the wrappers would run) it calls
    ``optimizer.step`` itself.
    """
    import torch
    from torch.optim import optimizer as optim_module

    hooks = (
        getattr(optimizer, "_optimizer_step_pre_hooks", None),
        getattr(optimizer, "_optimizer_step_post_hooks", None),
        getattr(optim_module, "_global_optimizer_pre_hooks", None),
        getattr(optim_module, "_global_optimizer_post_hooks", None),
    )
    if any(h is None or len(h) for h in hooks):
        return optimizer.step() if closure is None else optimizer.step(closure)
    raw = type(optimizer).step
    while getattr(raw, "__wrapped__", None) is not None:
        raw = raw.__wrapped__
    with torch.set_grad_enabled(bool(optimizer.defaults.get("differentiable", False))):
        return raw(optimizer) if closure is None else raw(optimizer, closure)
