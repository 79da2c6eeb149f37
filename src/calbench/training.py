"""Training loop for the workflow's own small models, with a per-epoch history.

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
import time
from dataclasses import asdict, dataclass, field

#: columns of the history CSV, one row per epoch
HISTORY_COLUMNS = ("epoch", "loss", "accuracy", "lr", "seconds")

_OPTIMIZERS = ("sgd", "adam")
_SCHEDULES = ("constant", "cosine")


@dataclass(frozen=True)
class TrainingConfig:
    """A model spec's ``training`` entry.

    ``train_subset``: use the first ``train_subset`` training images (None: all).
    ``optimizer``: ``sgd`` (with ``momentum``) or ``adam``; ``schedule``: ``constant`` or
    ``cosine`` (per-batch cosine decay from ``lr`` to 0).
    """

    loss: str = "ce"
    loss_kwargs: dict = field(default_factory=dict)
    epochs: int = 10
    batch_size: int = 128
    lr: float = 0.05
    seed: int = 0
    train_subset: int | None = None
    optimizer: str = "sgd"
    momentum: float = 0.9
    weight_decay: float = 0.0
    schedule: str = "constant"

    def to_dict(self) -> dict:
        return asdict(self)


def _int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"training.{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _float(value, name: str, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"training.{name} must be a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"training.{name} must be {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)


def parse_training(entry) -> TrainingConfig:
    """Validate a spec's ``training`` mapping and return a :class:`TrainingConfig`."""
    if not isinstance(entry, dict):
        raise ValueError(
            f"training must be a mapping like {{loss: ce, epochs: 10, ...}}, got {entry!r}"
        )
    known = set(TrainingConfig.__dataclass_fields__)
    unknown = sorted(set(entry) - known)
    if unknown:
        raise ValueError(f"unknown training keys {unknown}; allowed: {sorted(known)}")
    d = dict(entry)
    loss = d.get("loss", "ce")
    if not isinstance(loss, str):
        raise ValueError(f"training.loss must be a loss name, got {loss!r}")
    loss_kwargs = d.get("loss_kwargs") or {}
    if not isinstance(loss_kwargs, dict):
        raise ValueError(f"training.loss_kwargs must be a mapping, got {loss_kwargs!r}")
    subset = d.get("train_subset")
    optimizer = d.get("optimizer", "sgd")
    if optimizer not in _OPTIMIZERS:
        raise ValueError(
            f"training.optimizer must be one of {list(_OPTIMIZERS)}, got {optimizer!r}"
        )
    schedule = d.get("schedule", "constant")
    if schedule not in _SCHEDULES:
        raise ValueError(f"training.schedule must be one of {list(_SCHEDULES)}, got {schedule!r}")
    return TrainingConfig(
        loss=loss,
        loss_kwargs=dict(loss_kwargs),
        epochs=_int(d.get("epochs", 10), "epochs", 1),
        batch_size=_int(d.get("batch_size", 128), "batch_size", 1),
        lr=_float(d.get("lr", 0.05), "lr", positive=True),
        seed=_int(d.get("seed", 0), "seed", 0),
        train_subset=None if subset is None else _int(subset, "train_subset", 1),
        optimizer=optimizer,
        momentum=_float(d.get("momentum", 0.9), "momentum", positive=False),
        weight_decay=_float(d.get("weight_decay", 0.0), "weight_decay", positive=False),
        schedule=schedule,
    )


class _Deterministic:
    """Context: deterministic algorithms on (restored on exit), cuDNN autotuning off."""

    def __enter__(self):
        import torch

        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        self._prev = torch.are_deterministic_algorithms_enabled()
        self._prev_bench = torch.backends.cudnn.benchmark
        self._prev_fill = torch.utils.deterministic.fill_uninitialized_memory
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
        # filling every new tensor with NaN (a debugging aid of deterministic mode) costs ~2x on CPU
        torch.utils.deterministic.fill_uninitialized_memory = False
        return self

    def __exit__(self, *exc):
        import torch

        torch.use_deterministic_algorithms(self._prev)
        torch.backends.cudnn.benchmark = self._prev_bench
        torch.utils.deterministic.fill_uninitialized_memory = self._prev_fill
        return False


def train(
    model,
    images,
    labels,
    *,
    loss_fn,
    preprocess,
    config: TrainingConfig,
    device: str = "cpu",
    progress: bool = False,
) -> list[dict]:
    """Train ``model`` in place on ``images`` (uint8 tensor (N, ...)) and ``labels`` (int64 (N,)).

    Each epoch visits every sample once in a seeded random order, in batches of
    ``config.batch_size`` (the last one smaller); ``preprocess`` maps a uint8 batch to the
    network's float input on the device. Returns one dict per epoch with the mean training
    ``loss`` and ``accuracy`` over that epoch's batches (as seen during the epoch), the ``lr``
    at its end and its wall time in ``seconds``.
    """
    import torch

    n = int(labels.shape[0])
    if images.shape[0] != n or n == 0:
        raise ValueError(
            f"images ({images.shape[0]}) and labels ({n}) must have the same non-zero length"
        )
    with _Deterministic():
        torch.manual_seed(config.seed)
        gen = torch.Generator().manual_seed(config.seed)
        model.to(device).train()
        x_all = images.to(device)
        y_all = labels.to(device=device, dtype=torch.int64)
        params = [p for p in model.parameters() if p.requires_grad]
        if config.optimizer == "sgd":
            opt = torch.optim.SGD(
                params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
            )
        else:
            opt = torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)
        steps_per_epoch = math.ceil(n / config.batch_size)
        total_steps = steps_per_epoch * config.epochs
        step = 0
        history: list[dict] = []
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=total_steps, desc="train", unit="batch", disable=None)
        for epoch in range(1, config.epochs + 1):
            t0 = time.perf_counter()
            order = torch.randperm(n, generator=gen).to(device)
            loss_sum = torch.zeros((), dtype=torch.float64, device=device)
            correct = torch.zeros((), dtype=torch.int64, device=device)
            for start in range(0, n, config.batch_size):
                idx = order[start : start + config.batch_size]
                if config.schedule == "cosine":
                    lr = 0.5 * config.lr * (1.0 + math.cos(math.pi * step / total_steps))
                    for group in opt.param_groups:
                        group["lr"] = lr
                xb = preprocess(x_all[idx])
                yb = y_all[idx]
                logits = model(xb)
                loss = loss_fn(logits, yb)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                step += 1
                loss_sum += loss.detach().to(torch.float64) * idx.shape[0]
                correct += (logits.detach().argmax(1) == yb).sum()
                if bar is not None:
                    bar.update(1)
            mean_loss = float(loss_sum.item() / n)
            if not math.isfinite(mean_loss):
                raise ValueError(
                    f"training diverged in epoch {epoch} (loss {mean_loss}); lower training.lr"
                )
            history.append(
                {
                    "epoch": epoch,
                    "loss": mean_loss,
                    "accuracy": float(correct.item() / n),
                    "lr": float(opt.param_groups[0]["lr"]),
                    "seconds": round(time.perf_counter() - t0, 4),
                }
            )
        if bar is not None:
            bar.close()
    model.eval()
    return history


def train_from_spec(spec: dict, data_root, *, device: str = "auto", progress: bool = False):
    """Build, train and return ``(model, history, config)`` for a ``source: train`` spec.

    Data: the dataset's training split (``calbench.data``), first ``train_subset`` images.
    Loss: ``calbench.losses.get_loss(loss, **loss_kwargs)``.
    """
    import torch

    from calbench.data import get_dataset
    from calbench.losses import get_loss
    from calbench.models import build_from_spec, resolve_device

    if not isinstance(spec, dict) or "training" not in spec:
        raise ValueError("model spec has no 'training' entry; add training: {loss: ce, ...}")
    config = parse_training(spec["training"])
    dataset_name = spec.get("dataset")
    if not isinstance(dataset_name, str):
        raise ValueError("model spec has no 'dataset' entry; add dataset: fashion_mnist")
    dataset = get_dataset(dataset_name)
    device = resolve_device(device)
    loss_fn = get_loss(config.loss, **config.loss_kwargs)
    images, labels = dataset.load_split(data_root, "train")
    if config.train_subset is not None:
        if config.train_subset > labels.shape[0]:
            raise ValueError(
                f"training.train_subset {config.train_subset} exceeds the {labels.shape[0]} "
                f"training images of {dataset_name}; lower it"
            )
        images, labels = images[: config.train_subset], labels[: config.train_subset]
    torch.manual_seed(config.seed)  # weight initialisation
    model = build_from_spec(spec)
    if hasattr(loss_fn, "to"):
        loss_fn = loss_fn.to(device)
    history = train(
        model,
        images,
        labels,
        loss_fn=loss_fn,
        preprocess=dataset.preprocessor(spec),
        config=config,
        device=device,
        progress=progress,
    )
    return model, history, config


def write_history(path, history: list[dict]) -> None:
    """Write the per-epoch history as CSV (columns :data:`HISTORY_COLUMNS`) atomically."""
    from calbench.io import atomic_write_text

    lines = [",".join(HISTORY_COLUMNS)]
    for row in history:
        lines.append(
            ",".join(
                repr(row[c]) if isinstance(row[c], float) else str(row[c]) for c in HISTORY_COLUMNS
            )
        )
    atomic_write_text(path, "\n".join(lines) + "\n")
