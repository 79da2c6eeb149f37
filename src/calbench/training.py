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
import sys
import time
from dataclasses import asdict, dataclass, field

#: columns of the history CSV, one row per epoch (no wall-clock times: two identical runs write
#: identical files; each epoch's time goes to the log, see :func:`train`)
HISTORY_COLUMNS = ("epoch", "loss", "accuracy", "lr")
#: per-epoch validation columns, written when the run has a validation set (``val_size`` or the
#: Meta-Calibration split): accuracy, NLL, ECE (15 equal-width bins, Guo et al. 2017 eq. 3) and
#: DECE (Bohdal et al. 2021 eq. 5-7, 15 bins, tau_a 100, tau_b 0.01) of the validation images
VAL_COLUMNS = ("val_accuracy", "val_nll", "val_ece", "val_dece")
#: extra per-epoch columns of Meta-Calibration runs: mean meta-loss and mean |omega|
META_COLUMNS = ("meta_loss", "omega_abs_mean")

_OPTIMIZERS = ("sgd", "adam")
_SCHEDULES = ("constant", "cosine", "multistep")
METHODS = ("standard", "interleaved", "metacal")
_METACAL_KEYS = (
    "variant",
    "meta_lr",
    "n_bins",
    "tau_a",
    "tau_b",
    "reduction",
    "clip_norm",
    "m1_beta",
    "meta_grad_to_model",
    "split_seed",
    "valid_size",
)


@dataclass(frozen=True)
class TrainingConfig:
    """A model spec's ``training`` entry.

    ``train_subset``: use the first ``train_subset`` training images (None: all).
    ``optimizer``: ``sgd`` (with ``momentum``) or ``adam``; ``schedule``: ``constant``,
    ``cosine`` (per-batch cosine decay from ``lr`` to 0) or ``multistep`` (``lr`` times
    ``lr_decay`` at each epoch of ``milestones``, as Meta-Calibration's x0.1 at 150 and 250).

    ``method``:

    * ``standard``: minimise ``loss`` (plus ``beta * secondary`` when ``secondary`` is set:
      ``{name, beta, kwargs}``, Karandikar et al. 2021 section 4);
    * ``interleaved``: Karandikar et al. 2021 appendix B: ``loss`` on a majority split, then
      ``beta * secondary`` on a held-out ``holdout_fraction`` of the training images, each epoch;
    * ``metacal``: Bohdal et al. 2021 Algorithm 1 (:class:`calbench.metacal.MetaCalibration`) on
      their 80 / 10 / 10 training / validation / meta-validation split of the training images;
      ``metacal`` holds the trainer's options (``variant``: metacal | m0 | m1 | m2, ``meta_lr``,
      ``n_bins``, ``tau_a``, ``tau_b``, ``reduction``, ``clip_norm``, ``m1_beta``,
      ``meta_grad_to_model``) and the split's ``split_seed`` (1) and ``valid_size`` (0.1).

    ``val_size``: hold out the last ``val_size`` training images (never trained on) and record
    validation accuracy, NLL, ECE and DECE after every epoch (Meta-Calibration runs use their
    validation split instead). ``amp``: bfloat16 autocast for the forward pass on a GPU
    (``standard`` / ``interleaved``; ignored on the CPU). ``grad_clip``: clip the gradient norm
    (``standard`` / ``interleaved``; Meta-Calibration uses ``metacal.clip_norm``).
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
    milestones: tuple = ()
    lr_decay: float = 0.1
    method: str = "standard"
    secondary: dict | None = None
    holdout_fraction: float = 0.1
    metacal: dict = field(default_factory=dict)
    val_size: int = 0
    amp: bool = False
    grad_clip: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def lr_at(self, step: int, total_steps: int, epoch: int) -> float:
        """Learning rate of optimiser step ``step`` (0-based) of ``total_steps``, in ``epoch``
        (1-based)."""
        if self.schedule == "cosine":
            return 0.5 * self.lr * (1.0 + math.cos(math.pi * step / total_steps))
        if self.schedule == "multistep":
            passed = sum(1 for m in self.milestones if epoch > m)
            return self.lr * self.lr_decay**passed
        return self.lr


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


def _secondary(value) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise ValueError(
            f"training.secondary must be a mapping {{name: sbece, beta: 1.0, kwargs: {{}}}}, "
            f"got {value!r}"
        )
    extra = sorted(set(value) - {"name", "beta", "kwargs"})
    if extra:
        raise ValueError(
            f"training.secondary has unknown keys {extra}; allowed: beta, kwargs, name"
        )
    kwargs = value.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ValueError(f"training.secondary.kwargs must be a mapping, got {kwargs!r}")
    beta = _float(value.get("beta", 1.0), "secondary.beta", positive=False)
    return {"name": value["name"], "beta": beta, "kwargs": dict(kwargs)}


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
    milestones = d.get("milestones") or []
    if not isinstance(milestones, list | tuple):
        raise ValueError(f"training.milestones must be a list of epochs, got {milestones!r}")
    milestones = tuple(_int(m, "milestones[]", 1) for m in milestones)
    if list(milestones) != sorted(set(milestones)):
        raise ValueError(f"training.milestones must increase strictly, got {list(milestones)}")
    if milestones and schedule != "multistep":
        raise ValueError("training.milestones needs schedule: multistep; add it or drop milestones")
    method = d.get("method", "standard")
    if method not in METHODS:
        raise ValueError(f"training.method must be one of {list(METHODS)}, got {method!r}")
    secondary = _secondary(d.get("secondary"))
    if secondary is not None and "secondary" in loss_kwargs:
        raise ValueError(
            "give the secondary loss once: training.secondary or training.loss_kwargs.secondary"
        )
    if method == "interleaved" and secondary is None:
        raise ValueError(
            "training.method interleaved needs training.secondary {name, beta, kwargs}; add it"
        )
    metacal = d.get("metacal") or {}
    if not isinstance(metacal, dict):
        raise ValueError(f"training.metacal must be a mapping, got {metacal!r}")
    bad = sorted(set(metacal) - set(_METACAL_KEYS))
    if bad:
        raise ValueError(f"unknown training.metacal keys {bad}; allowed: {sorted(_METACAL_KEYS)}")
    if metacal and method != "metacal":
        raise ValueError("training.metacal options need method: metacal; add it or drop them")
    if method == "metacal" and (secondary is not None or loss != "ce" or loss_kwargs):
        raise ValueError(
            "method: metacal trains cross-entropy (its variants are metacal.variant); "
            "use loss: ce without loss_kwargs or secondary"
        )
    holdout = _float(d.get("holdout_fraction", 0.1), "holdout_fraction", positive=True)
    if holdout >= 1:
        raise ValueError(f"training.holdout_fraction must be < 1, got {holdout!r}")
    amp = d.get("amp", False)
    if not isinstance(amp, bool):
        raise ValueError(f"training.amp must be true or false, got {amp!r}")
    clip = d.get("grad_clip")
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
        milestones=milestones,
        lr_decay=_float(d.get("lr_decay", 0.1), "lr_decay", positive=True),
        method=method,
        secondary=secondary,
        holdout_fraction=holdout,
        metacal=dict(metacal),
        val_size=_int(d.get("val_size", 0), "val_size", 0),
        amp=amp,
        grad_clip=None if clip is None else _float(clip, "grad_clip", positive=True),
    )


def build_objective(config: TrainingConfig):
    """The training objective of ``config`` (``standard`` and ``interleaved`` methods).

    ``standard``: ``get_loss(loss, **loss_kwargs)``, combined with ``beta * secondary`` when
    ``config.secondary`` is set; ``interleaved``: an
    :class:`calbench.losses.InterleavedObjective` of the primary and secondary losses.
    """
    from calbench.losses import InterleavedObjective, get_loss

    if config.method == "interleaved":
        sec = config.secondary
        return InterleavedObjective(
            {"name": config.loss, "kwargs": dict(config.loss_kwargs)},
            {"name": sec["name"], "kwargs": dict(sec["kwargs"])},
            beta=sec["beta"],
        )
    if config.secondary is not None:
        return get_loss(config.loss, secondary=dict(config.secondary), **config.loss_kwargs)
    return get_loss(config.loss, **config.loss_kwargs)


def final_linear(model) -> str:
    """Dotted name of the last ``nn.Linear`` of ``model`` (its classifier, for Meta-Calibration)."""
    from torch import nn

    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not names:
        raise ValueError(
            "method: metacal needs a network ending in nn.Linear (the meta-learned classifier)"
        )
    return names[-1]


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


def _batches(idx, batch_size: int, gen, device):
    """``idx`` (int64 CPU tensor) in a seeded random order, cut into batches, on ``device``."""
    import torch

    order = idx[torch.randperm(idx.shape[0], generator=gen)].to(device)
    return [order[s : s + batch_size] for s in range(0, order.shape[0], batch_size)]


def evaluate_logits(model, images, labels, preprocess, *, batch_size: int = 1000, device="cpu"):
    """Float32 logits of ``images`` (uint8 tensor) in eval mode, as a numpy array."""
    import torch

    was_training = model.training
    model.eval()
    out = []
    with torch.no_grad():
        for s in range(0, images.shape[0], batch_size):
            xb = preprocess(images[s : s + batch_size].to(device))
            out.append(model(xb).float().cpu())
    model.train(was_training)
    return torch.cat(out).numpy()


def validation_metrics(logits, labels) -> dict:
    """Validation accuracy, NLL (study rule), ECE (15 equal-width bins, Guo et al. 2017 eq. 3)
    and DECE (Bohdal et al. 2021 eq. 5-7: 15 bins, tau_a 100, tau_b 0.01) of ``logits``."""
    import numpy as np

    from calbench.functional import softmax
    from calbench.metrics import accuracy, dece, ece, nll

    p = softmax(np.asarray(logits, dtype=np.float64), axis=1)
    y = np.asarray(labels, dtype=np.int64)
    return {
        "val_accuracy": accuracy(p, y),
        "val_nll": nll(p, y),
        "val_ece": ece(p, y),
        "val_dece": dece(p, y),
    }


def _metacal_trainer(model, opt, config: TrainingConfig):
    from calbench.metacal import MetaCalibration

    kwargs = {k: v for k, v in config.metacal.items() if k not in ("split_seed", "valid_size")}
    return MetaCalibration(model, opt, classifier=final_linear(model), **kwargs)


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
    meta-validation batch (a fresh seeded shuffle whenever they run out).

    ``val``: optional ``(images, labels)`` evaluated after every epoch (default for metacal: its
    validation part). Returns one dict per epoch with the mean training ``loss`` (per sample)
    and ``accuracy`` over that epoch's batches (as seen during the epoch), the ``lr`` at its end
    and, with a validation set, :data:`VAL_COLUMNS`. Each epoch's wall time is printed to stderr
    (the job's log), never stored, so outputs are byte-identical between identical runs.
    """
    import numpy as np
    import torch

    n = int(labels.shape[0])
    if images.shape[0] != n or n == 0:
        raise ValueError(
            f"images ({images.shape[0]}) and labels ({n}) must have the same non-zero length"
        )
    meta_idx = held_idx = None
    if config.method == "metacal":
        from calbench.metacal import meta_calibration_split

        tr, va, me = meta_calibration_split(
            n,
            seed=config.metacal.get("split_seed", 1),
            valid_size=config.metacal.get("valid_size", 0.1),
        )
        train_idx, meta_idx = torch.from_numpy(tr), torch.from_numpy(me)
        if val is None:
            val = (images[torch.from_numpy(va)], labels[torch.from_numpy(va)])
    elif config.method == "interleaved":
        from calbench.losses import interleaved_split

        major, held = interleaved_split(n, config.holdout_fraction, config.seed)
        train_idx, held_idx = torch.from_numpy(major), torch.from_numpy(held)
    else:
        train_idx = torch.arange(n)
    if loss_fn is None and config.method != "metacal":
        loss_fn = build_objective(config)
    if loss_fn is not None and hasattr(loss_fn, "to"):
        loss_fn = loss_fn.to(device)
    use_amp = bool(config.amp) and str(device).startswith("cuda")
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
        trainer = _metacal_trainer(model, opt, config) if config.method == "metacal" else None
        bs = config.batch_size
        steps_per_epoch = math.ceil(train_idx.shape[0] / bs)
        if held_idx is not None:
            steps_per_epoch += math.ceil(held_idx.shape[0] / bs)
        total_steps = steps_per_epoch * config.epochs
        step = 0
        history: list[dict] = []
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=total_steps, desc="train", unit="batch", disable=None)
        meta_queue: list = []
        for epoch in range(1, config.epochs + 1):
            t0 = time.perf_counter()
            plan = [("primary", b) for b in _batches(train_idx, bs, gen, device)]
            if held_idx is not None:
                plan += [("secondary", b) for b in _batches(held_idx, bs, gen, device)]
            loss_sum = torch.zeros((), dtype=torch.float64, device=device)
            correct = torch.zeros((), dtype=torch.int64, device=device)
            seen = 0
            meta_sum, meta_n = 0.0, 0
            for phase, idx in plan:
                lr = config.lr_at(step, total_steps, epoch)
                for group in opt.param_groups:
                    group["lr"] = lr
                xb = preprocess(x_all[idx])
                yb = y_all[idx]
                if trainer is not None:
                    if not meta_queue:
                        meta_queue = _batches(meta_idx, bs, gen, device)
                    midx = meta_queue.pop(0)
                    stats = trainer.step((xb, yb), (preprocess(x_all[midx]), y_all[midx]))
                    logits = trainer.last_logits
                    per_sample = stats["loss"] / (idx.shape[0] if trainer.reduction == "sum" else 1)
                    loss = torch.tensor(per_sample, dtype=torch.float64)
                    if math.isfinite(stats["meta_loss"]):
                        meta_sum += stats["meta_loss"]
                        meta_n += 1
                else:
                    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp):
                        logits = model(xb)
                        if config.method == "interleaved":
                            loss = loss_fn(logits.float(), yb, phase=phase)
                        else:
                            loss = loss_fn(logits.float(), yb)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    if config.grad_clip is not None:
                        torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
                    opt.step()
                step += 1
                seen += int(idx.shape[0])
                loss_sum += loss.detach().to(device=device, dtype=torch.float64) * idx.shape[0]
                correct += (logits.detach().argmax(1) == yb).sum()
                if bar is not None:
                    bar.update(1)
            mean_loss = float(loss_sum.item() / seen)
            if not math.isfinite(mean_loss):
                raise ValueError(
                    f"training diverged in epoch {epoch} (loss {mean_loss}); lower training.lr"
                )
            row = {
                "epoch": epoch,
                "loss": mean_loss,
                "accuracy": float(correct.item() / seen),
                "lr": float(opt.param_groups[0]["lr"]),
            }
            if trainer is not None:
                row["meta_loss"] = meta_sum / meta_n if meta_n else float("nan")
                row["omega_abs_mean"] = float(
                    sum(w.detach().abs().sum() for w in trainer.omega)
                    / sum(w.numel() for w in trainer.omega)
                )
            print(
                f"epoch {epoch}/{config.epochs}: loss {mean_loss:.4f}, "
                f"{time.perf_counter() - t0:.2f} s",
                file=sys.stderr,
            )
            if val is not None:
                z = evaluate_logits(
                    model, val[0], val[1], preprocess, batch_size=max(bs, 500), device=device
                )
                row.update(validation_metrics(z, np.asarray(val[1])))
            history.append(row)
        if bar is not None:
            bar.close()
    model.eval()
    return history


def train_from_spec(spec: dict, data_root, *, device: str = "auto", progress: bool = False):
    """Build, train and return ``(model, history, config)`` for a ``source: train`` spec.

    Data: the dataset's training split (``calbench.data``); with ``val_size`` its last
    ``val_size`` images are the per-epoch validation set and never trained on; training uses the
    first ``train_subset`` of the remaining images. Objective: :func:`build_objective`.
    """
    import torch

    from calbench.data import get_dataset
    from calbench.models import build_from_spec, resolve_device

    if not isinstance(spec, dict) or "training" not in spec:
        raise ValueError("model spec has no 'training' entry; add training: {loss: ce, ...}")
    config = parse_training(spec["training"])
    dataset_name = spec.get("dataset")
    if not isinstance(dataset_name, str):
        raise ValueError("model spec has no 'dataset' entry; add dataset: fashion_mnist")
    dataset = get_dataset(dataset_name)
    device = resolve_device(device)
    loss_fn = build_objective(config) if config.method != "metacal" else None
    images, labels = dataset.load_split(data_root, "train")
    val = None
    n_total = int(labels.shape[0])
    if config.val_size:
        if config.val_size >= n_total:
            raise ValueError(
                f"training.val_size {config.val_size} leaves no training images of the "
                f"{n_total} of {dataset_name}; lower it"
            )
        val = (images[n_total - config.val_size :], labels[n_total - config.val_size :])
        images, labels = images[: n_total - config.val_size], labels[: n_total - config.val_size]
    if config.train_subset is not None:
        if config.train_subset > labels.shape[0]:
            raise ValueError(
                f"training.train_subset {config.train_subset} exceeds the {labels.shape[0]} "
                f"training images of {dataset_name}"
                + (f" left after val_size {config.val_size}" if config.val_size else "")
                + "; lower it"
            )
        images, labels = images[: config.train_subset], labels[: config.train_subset]
    torch.manual_seed(config.seed)  # weight initialisation
    model = build_from_spec(spec)
    history = train(
        model,
        images,
        labels,
        loss_fn=loss_fn,
        preprocess=dataset.preprocessor(spec),
        config=config,
        device=device,
        progress=progress,
        val=val,
    )
    return model, history, config


def write_history(path, history: list[dict]) -> None:
    """Write the per-epoch history as CSV atomically: :data:`HISTORY_COLUMNS`, then those of
    :data:`META_COLUMNS` and :data:`VAL_COLUMNS` that any row has (missing cells: ``nan``)."""
    from calbench.io import atomic_write_text

    extra = [c for c in META_COLUMNS + VAL_COLUMNS if any(c in row for row in history)]
    columns = list(HISTORY_COLUMNS) + extra
    lines = [",".join(columns)]
    for row in history:
        cells = []
        for c in columns:
            v = row.get(c, float("nan"))
            cells.append(repr(float(v)) if isinstance(v, float) else str(v))
        lines.append(",".join(cells))
    atomic_write_text(path, "\n".join(lines) + "\n")
