"""The training loop: index splits per method, seeded batches, epochs and their history rows.

The models are trained the way Guo et al. ("On Calibration of Modern Neural Networks", ICML
2017, §3) found modern networks become over-confident: no data augmentation and, by default, no
weight decay, for enough epochs that the training NLL keeps falling after the training error
stops. The whole training subset is held on the device as one uint8 tensor and normalised per
batch, so an epoch is a loop of tensor indexing with no data-loader processes.

Runs are deterministic given ``seed``: the batch order comes from a seeded ``torch.Generator``,
weights from ``torch.manual_seed(seed)``, and deterministic algorithms are switched on for the
duration of training (the number of CPU threads is the caller's choice).
"""

from __future__ import annotations

import math
import os
import sys
import time

from calbench.metacal import meta_calibration_split, paired_batches
from calbench.training.history import evaluate_logits, validation_metrics
from calbench.training.options import TrainingConfig
from calbench.training.steps import build_objective, make_optimizer, make_step


def _use_deterministic_algorithms(mode: bool) -> None:
    """``torch.use_deterministic_algorithms(mode)`` without its import of torch's compiler
    (``torch._inductor.config``, ~0.9 CPU-s in every training job): the compiler's own
    deterministic flag, which that function also sets, matters only to compiled code, which
    calbench never runs, so it is set only when the compiler is already loaded. Falls back to
    the public function if torch lacks the internal setter."""
    import torch

    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:  # pragma: no cover - other torch versions
        torch.use_deterministic_algorithms(mode)
        return
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None:
        inductor.deterministic = mode
    setter(mode, warn_only=False)


class _Deterministic:
    """Context: deterministic algorithms on (restored on exit), cuDNN autotuning off."""

    def __enter__(self):
        import torch

        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        self._prev = torch.are_deterministic_algorithms_enabled()
        self._prev_bench = torch.backends.cudnn.benchmark
        self._prev_fill = torch.utils.deterministic.fill_uninitialized_memory
        _use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
        # filling every new tensor with NaN (a debugging aid of deterministic mode) costs ~2x on CPU
        torch.utils.deterministic.fill_uninitialized_memory = False
        return self

    def __exit__(self, *exc):
        import torch

        _use_deterministic_algorithms(self._prev)
        torch.backends.cudnn.benchmark = self._prev_bench
        torch.utils.deterministic.fill_uninitialized_memory = self._prev_fill
        return False


def _batches(idx, batch_size: int, gen, device):
    """``idx`` (int64 CPU tensor) in a seeded random order, cut into batches, on ``device``."""
    import torch

    order = idx[torch.randperm(idx.shape[0], generator=gen)].to(device)
    return [order[s : s + batch_size] for s in range(0, order.shape[0], batch_size)]


class _MetaBatches:
    """Meta-validation index batches for :func:`calbench.metacal.paired_batches`: each pass
    draws a fresh seeded shuffle when the previous one is used up (drawn lazily, at the first
    batch it is needed for); a shuffle left unfinished at the end of an epoch is continued in
    the next one."""

    def __init__(self, idx, batch_size: int, gen, device):
        self.idx, self.batch_size, self.gen, self.device = idx, batch_size, gen, device
        self._queue: list = []

    def __iter__(self):
        if not self._queue:
            self._queue = _batches(self.idx, self.batch_size, self.gen, self.device)
        while self._queue:
            yield self._queue.pop(0)


def split_indices(config: TrainingConfig, images, labels, val=None):
    """``(train_idx, held_idx, meta_idx, val)`` of ``config.method`` over ``len(labels)`` images.

    ``standard``: all images train; ``interleaved``: the majority and held-out parts of
    :func:`calbench.losses.interleaved_split` (seed ``config.seed``); ``metacal``: the training
    and meta-validation parts of :func:`calbench.metacal.meta_calibration_split`, whose
    validation part becomes ``val`` unless one is given. Unused parts are ``None``.
    """
    import torch

    n = int(labels.shape[0])
    if images.shape[0] != n or n == 0:
        raise ValueError(
            f"images ({images.shape[0]}) and labels ({n}) must have the same non-zero length"
        )
    if config.method == "metacal":
        tr, va, me = meta_calibration_split(
            n,
            seed=config.metacal.get("split_seed", 1),
            valid_size=config.metacal.get("valid_size", 0.1),
        )
        if val is None:
            val = (images[torch.from_numpy(va)], labels[torch.from_numpy(va)])
        return torch.from_numpy(tr), None, torch.from_numpy(me), val
    if config.method == "interleaved":
        from calbench.losses import interleaved_split  # lazy: pulls torch

        major, held = interleaved_split(n, config.holdout_fraction, config.seed)
        return torch.from_numpy(major), torch.from_numpy(held), None, val
    return torch.arange(n), None, None, val


def _channels_last(model, device) -> bool:
    """Train a convolutional network in channels-last layout on a CPU: oneDNN's convolutions
    run 1.4-1.6x faster in it with one thread (Fashion-MNIST zoo, one training step of LeNet-5,
    ResNet-, MobileNet- and DenseNet-small; ``perf/bench_training.py`` prints epoch times).
    GPUs keep the default layout (not measured here)."""
    import torch

    return torch.device(device).type == "cpu" and any(
        isinstance(m, torch.nn.Conv2d) for m in model.modules()
    )


class _Loop:
    """The state of one run: data on the device, optimiser, method step, schedule position."""

    def __init__(self, model, images, labels, loss_fn, preprocess, config, device, split):
        import torch

        self.train_idx, self.held_idx, meta_idx, self.val = split
        self.model, self.preprocess, self.config, self.device = model, preprocess, config, device
        self.gen = torch.Generator().manual_seed(config.seed)
        model.to(device).train()
        if _channels_last(model, device):
            model.to(memory_format=torch.channels_last)
        self.x_all = images.to(device)
        self.y_all = labels.to(device=device, dtype=torch.int64)
        params = [p for p in model.parameters() if p.requires_grad]
        self.opt = make_optimizer(config, params)
        self.step_fn = make_step(model, self.opt, params, loss_fn, config, device)
        bs = config.batch_size
        self.meta = None if meta_idx is None else _MetaBatches(meta_idx, bs, self.gen, device)
        steps_per_epoch = math.ceil(self.train_idx.shape[0] / bs)
        if self.held_idx is not None:
            steps_per_epoch += math.ceil(self.held_idx.shape[0] / bs)
        self.total_steps = steps_per_epoch * config.epochs
        self.step = 0
        self.bar = None

    def plan(self):
        """This epoch's steps as ``(phase, index batch, meta index batch or None)``: the
        majority batches, then (``interleaved``) the held-out ones
        (:func:`calbench.losses.epoch_phases`), or (``metacal``) each training batch paired with
        a meta-validation batch (:func:`calbench.metacal.paired_batches`)."""
        from calbench.losses.interleaved import epoch_phases  # lazy: pulls torch

        bs = self.config.batch_size
        batches = _batches(self.train_idx, bs, self.gen, self.device)
        if self.meta is not None:
            return (("primary", b, m) for b, m in paired_batches(batches, self.meta))
        held = [] if self.held_idx is None else _batches(self.held_idx, bs, self.gen, self.device)
        phases = epoch_phases(len(batches), len(held))
        return ((p, b, None) for p, b in zip(phases, batches + held, strict=True))

    def run_epoch(self, epoch: int) -> dict:
        """Train one epoch; its history row (see :func:`train`)."""
        import torch

        config, device = self.config, self.device
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        correct = torch.zeros((), dtype=torch.int64, device=device)
        seen = 0
        for phase, idx, midx in self.plan():
            lr = config.lr_at(self.step, self.total_steps, epoch)
            for group in self.opt.param_groups:
                group["lr"] = lr
            xb = self.preprocess(self.x_all[idx])
            yb = self.y_all[idx]
            meta = None if midx is None else (self.preprocess(self.x_all[midx]), self.y_all[midx])
            loss, logits = self.step_fn(xb, yb, phase, meta)
            self.step += 1
            seen += int(idx.shape[0])
            loss_sum += loss.detach().to(device=device, dtype=torch.float64) * idx.shape[0]
            correct += (logits.detach().argmax(1) == yb).sum()
            if self.bar is not None:
                self.bar.update(1)
        mean_loss = float(loss_sum.item() / seen)
        if not math.isfinite(mean_loss):
            raise ValueError(
                f"training diverged in epoch {epoch} (loss {mean_loss}); lower training.lr"
            )
        row = {
            "epoch": epoch,
            "loss": mean_loss,
            "accuracy": float(correct.item() / seen),
            "lr": float(self.opt.param_groups[0]["lr"]),
        }
        row.update(self.step_fn.epoch_columns())
        return row

    def validate(self, row: dict) -> None:
        """Add :data:`calbench.training.VAL_COLUMNS` of the validation set to ``row``."""
        import numpy as np

        if self.val is None:
            return
        images, labels = self.val
        z = evaluate_logits(
            self.model,
            images,
            labels,
            self.preprocess,
            batch_size=max(self.config.batch_size, 500),
            device=self.device,
        )
        row.update(validation_metrics(z, np.asarray(labels)))


def train(
    model,
    images,
    labels,
    *,
    loss_fn=None,
    preprocess,
    config: TrainingConfig,
    device: str = "cpu",
    progress: bool = False,
    val=None,
) -> list[dict]:
    """Train ``model`` in place on ``images`` (uint8 tensor (N, ...)) and ``labels`` (int64 (N,)).

    Each epoch visits every training sample once in a seeded random order, in batches of
    ``config.batch_size`` (the last one smaller); ``preprocess`` maps a uint8 batch to the
    network's float input on the device. ``loss_fn`` defaults to :func:`build_objective`
    (``standard`` / ``interleaved``; ``metacal`` runs build their own objective). With
    ``method: interleaved`` an epoch is the primary loss over the majority batches, then the
    secondary over the held-out batches (:func:`calbench.losses.interleaved_split`, seed
    ``config.seed``); with ``method: metacal`` the images are split 80 / 10 / 10
    (:func:`calbench.metacal.meta_calibration_split`) and every training batch is paired with a
    meta-validation batch (a fresh seeded shuffle whenever they run out). The per-method step is
    :mod:`calbench.training.steps`.

    ``val``: optional ``(images, labels)`` evaluated after every epoch (default for metacal: its
    validation part). Returns one dict per epoch with the mean training ``loss`` (per sample)
    and ``accuracy`` over that epoch's batches (as seen during the epoch), the ``lr`` at its end
    and, with a validation set, :data:`VAL_COLUMNS`. Each epoch's wall time is printed to stderr
    (the job's log), never stored, so outputs are byte-identical between identical runs.
    """
    import torch

    split = split_indices(config, images, labels, val)
    if loss_fn is None and config.method != "metacal":
        loss_fn = build_objective(config)
    if loss_fn is not None and hasattr(loss_fn, "to"):
        loss_fn = loss_fn.to(device)
    with _Deterministic():
        torch.manual_seed(config.seed)
        loop = _Loop(model, images, labels, loss_fn, preprocess, config, device, split)
        if progress:
            from tqdm import tqdm

            loop.bar = tqdm(total=loop.total_steps, desc="train", unit="batch", disable=None)
        history: list[dict] = []
        for epoch in range(1, config.epochs + 1):
            t0 = time.perf_counter()
            row = loop.run_epoch(epoch)
            print(
                f"epoch {epoch}/{config.epochs}: loss {row['loss']:.4f}, "
                f"{time.perf_counter() - t0:.2f} s",
                file=sys.stderr,
            )
            loop.validate(row)
            history.append(row)
        if loop.bar is not None:
            loop.bar.close()
    # the checkpoint keeps torch's default layout, whatever the layout trained in
    model.to(memory_format=torch.contiguous_format).eval()
    return history
