"""Meta-Calibration: DECE-driven meta-learning of unit-wise L2 regularisation.

Bohdal, Yang and Hospedales 2021, "Meta-Calibration: Meta-Learning of Model Calibration Using
Differentiable Expected Calibration Error" (Bohdal et al. 2021), section 2.3 and Algorithm 1. The
meta-knowledge is one L2 coefficient per weight and bias of the final linear layer ``phi``
(``omega``, initialised at 0, learned with Adam, lr 1e-3). The base objective is::

    L_i = CE(f(x_t), y_t) + sum(omega * phi^2)                    (Algorithm 1, line 7)

Every training step pairs a training batch with a meta-validation batch and (2021 protocol, as in
the authors' released code):

1. computes ``L_i`` on the training batch;
2. takes one differentiable SGD step on the classifier only with the current base learning rate
   (``phi' = phi - lr * dL_i/dphi``, no momentum; the feature extractor is left as it is);
3. evaluates the meta-validation batch with ``phi'`` and computes the meta-loss, DECE with 15 bins,
   ``tau_a = 100``, ``tau_b = 0.01`` (Algorithm 1 line 9);
4. back-propagates through the one-step update into ``omega`` and takes an Adam step (line 10);
5. recomputes ``L_i`` with the updated ``omega``;
6. takes a normal step of the base optimiser on the whole network, after clipping the gradient
   norm at 2.

The CE of the base objective is summed over the batch (``reduction="sum"``, as in the released
code). Ablation rows of the paper's Table 2: ``variant="m1"`` trains on ``CE + beta * DECE`` with
no meta-learning (the released 2021 code does not contain M1; here DECE is scaled by the batch size
under sum reduction so the weighting equals mean-CE + beta * DECE), ``variant="m2"`` meta-learns
``omega`` with a CE meta-loss, and ``variant="m0"`` is vanilla CE in the same loop.

The meta-batch forward pass runs the whole network in training mode, so batch-norm running
statistics also see the meta-validation batch (as in the released code).

One deliberate difference from the released code: there, the meta-loss's ``backward`` also
leaves its gradient in the network's parameters, so the base update of step 6 descends
``L_i + meta-loss``. Here the meta-gradient reaches ``omega`` only; set
``meta_grad_to_model=True`` to reproduce the released behaviour.

Data (section 3.1 and the released ``Data/cifar10.py``): :func:`meta_calibration_split` gives the
80 / 10 / 10 training / validation / meta-validation split of the training set.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from calbench._checks import check_choice
from calbench._torch import eager_optimizers, eager_step

VARIANTS = ("metacal", "m0", "m1", "m2")


def meta_calibration_split(
    n: int, seed: int = 1, valid_size: float = 0.1, meta_val_size: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Training / validation / meta-validation indices of a training set of ``n`` samples.

    Reproduces the released Meta-Calibration loaders: the indices ``0..n-1`` are shuffled with
    ``np.random.seed(seed); np.random.shuffle(indices)`` (here: the identical permutation from
    ``np.random.RandomState(seed).permutation(n)``, leaving numpy's global state alone); with
    ``split = floor(valid_size * n)`` and ``split_meta = floor((1 + meta_val_size) * valid_size * n)``
    the validation set is ``perm[:split]``, the meta-validation set ``perm[split:split_meta]`` and
    the training set ``perm[split_meta:]``. Defaults (seed 1, 10 %, same size) give 80 / 10 / 10.
    Returns int64 arrays in the shuffled order: ``(train_idx, val_idx, meta_idx)``.
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 3:
        raise ValueError(f"n must be an integer >= 3 (the training-set size), got {n!r}")
    if not (0.0 < float(valid_size) < 1.0):
        raise ValueError(f"valid_size must lie in (0, 1), got {valid_size!r}")
    if not (float(meta_val_size) > 0.0):
        raise ValueError(
            f"meta_val_size must be > 0 (a multiple of valid_size), got {meta_val_size!r}"
        )
    n = int(n)
    split = int(np.floor(valid_size * n))
    split_meta = int(np.floor((1.0 + meta_val_size) * valid_size * n))
    if split < 1 or split_meta <= split or split_meta >= n:
        raise ValueError(
            f"n={n} with valid_size={valid_size} and meta_val_size={meta_val_size} leaves an empty "
            "part; use a larger n or other fractions"
        )
    perm = np.random.RandomState(seed).permutation(n).astype(np.int64)
    return perm[split_meta:], perm[:split], perm[split:split_meta]


def paired_batches(train_batches: Iterable[Any], meta_batches: Iterable[Any]) -> Iterator[tuple]:
    """Yield ``(train_batch, meta_batch)`` for every training batch, restarting the meta iterable
    whenever it runs out (the released code uses ``zip(train, itertools.cycle(meta))``, which
    replays the first pass's meta batches; restarting draws a fresh shuffle each time)."""
    meta_iter = iter(meta_batches)
    for tb in train_batches:
        try:
            mb = next(meta_iter)
        except StopIteration:
            meta_iter = iter(meta_batches)
            try:
                mb = next(meta_iter)
            except StopIteration:
                raise ValueError(
                    "meta_batches is empty; pass at least one meta-validation batch"
                ) from None
        yield tb, mb


class MetaCalibration:
    """Meta-Calibration trainer (Bohdal et al. 2021, Algorithm 1) around ``model``.

    Parameters
    ----------
    model : torch.nn.Module whose submodule ``classifier`` (dotted name, default ``"fc"``) is the
        final ``nn.Linear``.
    optimizer : base optimiser over ``model.parameters()``; default SGD lr 0.1, momentum 0.9,
        weight decay 5e-4 (the paper's). Its first group's current ``lr`` is the inner-step rate,
        so an outside LR scheduler also drives the simulated step.
    variant : ``"metacal"`` (meta-loss DECE), ``"m2"`` (meta-loss CE), ``"m1"`` (CE + DECE,
        no meta-learning) or ``"m0"`` (CE, no meta-learning).
    meta_lr : Adam learning rate for ``omega`` (1e-3).
    n_bins, tau_a, tau_b : DECE settings (15, 100, 0.01).
    reduction : ``"sum"`` (released code) or ``"mean"`` for the CE of the base objective.
    clip_norm : gradient-norm clip of the base update (2.0); ``None`` disables it.
    m1_beta : DECE weight of variant ``m1``.
    meta_grad_to_model : also add the meta-loss gradient to the network's update (released code).

    ``omega`` is a list of tensors shaped like the classifier's weight and bias.
    """

    def __init__(
        self,
        model,
        optimizer=None,
        *,
        variant: str = "metacal",
        classifier: str = "fc",
        meta_lr: float = 1e-3,
        n_bins: int = 15,
        tau_a: float = 100.0,
        tau_b: float = 0.01,
        reduction: str = "sum",
        clip_norm: float | None = 2.0,
        m1_beta: float = 1.0,
        meta_grad_to_model: bool = False,
    ):
        import torch
        from torch import nn

        from calbench.losses import get_loss  # lazy: pulls torch
        from calbench.losses._base import check_nonneg, check_positive  # lazy: pulls torch

        if not isinstance(model, nn.Module):
            raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.variant = check_choice(variant, "variant", VARIANTS)
        self.reduction = check_choice(reduction, "reduction", ("sum", "mean"))
        try:
            clf = model.get_submodule(classifier)
        except AttributeError:
            names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
            raise ValueError(
                f"model has no submodule {classifier!r}; pass classifier= one of its linear layers {names}"
            ) from None
        if not isinstance(clf, nn.Linear):
            raise ValueError(
                f"classifier {classifier!r} is a {type(clf).__name__}, not nn.Linear; "
                "pass the name of the final linear layer"
            )
        self.model = model
        self.classifier = classifier
        self._clf = clf
        self._clf_names = [f"{classifier}.{n}" for n, _ in clf.named_parameters()]
        eager_optimizers(torch.optim.SGD, torch.optim.Adam)
        self.optimizer = optimizer or torch.optim.SGD(
            model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4
        )
        self.omega = [
            torch.zeros_like(p, requires_grad=True, memory_format=torch.contiguous_format)
            for p in clf.parameters()
        ]
        self.meta_optimizer = torch.optim.Adam(self.omega, lr=check_positive(meta_lr, "meta_lr"))
        self.clip_norm = None if clip_norm is None else check_positive(clip_norm, "clip_norm")
        self.m1_beta = check_nonneg(m1_beta, "m1_beta")
        self.meta_grad_to_model = bool(meta_grad_to_model)
        self.dece = get_loss("dece", n_bins=n_bins, tau_a=tau_a, tau_b=tau_b)
        self.n_steps = 0
        #: the training batch's logits of the last :meth:`step` (detached), for logging
        self.last_logits = None

    # ------------------------------------------------------------------ pieces of one step
    @property
    def lr(self) -> float:
        """The base optimiser's current learning rate (the inner-step rate)."""
        return float(self.optimizer.param_groups[0]["lr"])

    def _ce(self, logits, targets):
        import torch.nn.functional as F

        return F.cross_entropy(logits, targets, reduction=self.reduction)

    def regularised_loss(self, logits, targets, omega=None):
        """``CE(logits, targets) + sum(omega * phi^2)`` over the classifier's weight and bias."""
        omega = self.omega if omega is None else omega
        loss = self._ce(logits, targets)
        for w, p in zip(omega, self._clf.parameters(), strict=True):
            loss = loss + (w * p.pow(2)).sum()
        return loss

    def fast_weights(self, logits, targets, omega=None, *, create_graph: bool = True) -> dict:
        """One SGD step on the classifier only: ``{name: phi - lr * dL_i/dphi}`` (step 2)."""
        import torch

        params = list(self._clf.parameters())
        loss = self.regularised_loss(logits, targets, omega)
        grads = torch.autograd.grad(loss, params, create_graph=create_graph)
        lr = self.lr
        return {n: p - lr * g for n, p, g in zip(self._clf_names, params, grads, strict=True)}

    def meta_loss(self, logits, targets):
        """The meta-objective on meta-validation logits: DECE (``metacal``) or mean CE (``m2``)."""
        import torch.nn.functional as F

        if self.variant == "m2":
            return F.cross_entropy(logits, targets)
        return self.dece(logits, targets)

    def meta_objective(self, train_batch, meta_batch, omega=None):
        """Meta-loss on ``meta_batch`` after one simulated classifier step on ``train_batch``;
        differentiable in ``omega`` (steps 1-3)."""
        from torch.func import functional_call

        x, y = train_batch
        xv, yv = meta_batch
        logits = self.model(x)
        fast = self.fast_weights(logits, y, omega)
        logits_v = functional_call(self.model, fast, (xv,), strict=False)
        return self.meta_loss(logits_v, yv), logits

    # ------------------------------------------------------------------ the step
    def step(self, train_batch, meta_batch=None) -> dict[str, float]:
        """One training step (steps 1-6); returns ``{"loss", "meta_loss", "omega_abs_mean",
        "grad_norm", "lr"}`` as floats (``meta_loss`` is NaN for m0 / m1)."""
        import torch

        x, y = self._check_batch(train_batch, "train_batch")
        self.model.train()
        meta_value = float("nan")
        if self.variant in ("metacal", "m2"):
            if meta_batch is None:
                raise ValueError(
                    f"variant {self.variant!r} needs a meta_batch (x, y) from the meta-validation split"
                )
            xv, yv = self._check_batch(meta_batch, "meta_batch")
            self.optimizer.zero_grad(set_to_none=True)
            meta, logits = self.meta_objective((x, y), (xv, yv))
            self.meta_optimizer.zero_grad(set_to_none=True)
            if self.meta_grad_to_model:
                meta.backward(retain_graph=True)
            else:
                grads = torch.autograd.grad(meta, self.omega, retain_graph=True)
                for w, g in zip(self.omega, grads, strict=True):
                    w.grad = g
            eager_step(self.meta_optimizer)
            meta_value = float(meta.detach())
            omega = [w.detach() for w in self.omega]
            loss = self.regularised_loss(logits, y, omega)
        else:
            self.optimizer.zero_grad(set_to_none=True)
            logits = self.model(x)
            loss = self._ce(logits, y)
            if self.variant == "m1" and self.m1_beta:
                scale = x.shape[0] if self.reduction == "sum" else 1
                loss = loss + self.m1_beta * scale * self.dece(logits, y)
        loss.backward()
        params = [p for p in self.model.parameters() if p.grad is not None]
        if self.clip_norm is not None:
            gnorm = torch.nn.utils.clip_grad_norm_(params, self.clip_norm)
        else:
            gnorm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params]))
        eager_step(self.optimizer)
        self.n_steps += 1
        self.last_logits = logits.detach()
        return {
            "loss": float(loss.detach()),
            "meta_loss": meta_value,
            "omega_abs_mean": float(
                sum(w.detach().abs().sum() for w in self.omega) / sum(w.numel() for w in self.omega)
            ),
            "grad_norm": float(gnorm),
            "lr": self.lr,
        }

    @staticmethod
    def _check_batch(batch, what):
        import torch

        if not isinstance(batch, tuple | list) or len(batch) != 2:
            raise ValueError(f"{what} must be a pair (inputs, targets)")
        x, y = batch
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            raise ValueError(f"{what} must hold torch tensors (inputs, targets)")
        if y.ndim != 1 or x.shape[0] != y.shape[0] or y.shape[0] == 0:
            raise ValueError(
                f"{what} has {x.shape[0]} inputs but targets of shape {tuple(y.shape)}; "
                "pass one class index per input"
            )
        return x, y.long()

    def state_dict(self) -> dict:
        """``omega`` and both optimisers' states (the model's own state is saved separately).

        Optimiser states are deep copies: torch's ``state_dict`` returns live tensors that a later
        ``step`` updates in place.
        """
        return {
            "omega": [w.detach().clone() for w in self.omega],
            "meta_optimizer": copy.deepcopy(self.meta_optimizer.state_dict()),
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),
            "n_steps": self.n_steps,
            "variant": self.variant,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned."""
        import torch

        if state.get("variant") != self.variant:
            raise ValueError(
                f"state is for variant {state.get('variant')!r}, this trainer is {self.variant!r}"
            )
        with torch.no_grad():
            for w, v in zip(self.omega, state["omega"], strict=True):
                w.copy_(v)
        self.meta_optimizer.load_state_dict(state["meta_optimizer"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.n_steps = int(state["n_steps"])
