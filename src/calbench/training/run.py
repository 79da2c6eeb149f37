"""Train a ``source: train`` model spec: its dataset's training images, its network, its
``training`` options (:func:`train_from_spec`)."""

from __future__ import annotations

from calbench._device import resolve_device
from calbench.data import get_dataset
from calbench.models import build_from_spec
from calbench.training.loop import train
from calbench.training.options import parse_training
from calbench.training.steps import build_objective


def _training_images(dataset, dataset_name: str, images, labels, config):
    """``(images, labels, val)``: the last ``val_size`` images as the validation set, then the
    first ``train_subset`` of the rest."""
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
    return images, labels, val


def train_from_spec(spec: dict, data_root, *, device: str = "auto", progress: bool = False):
    """Build, train and return ``(model, history, config)`` for a ``source: train`` spec.

    Data: the dataset's training split (``calbench.data``); with ``val_size`` its last
    ``val_size`` images are the per-epoch validation set and never trained on; training uses the
    first ``train_subset`` of the remaining images. Objective: :func:`build_objective`.
    """
    import torch

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
    images, labels, val = _training_images(dataset, dataset_name, images, labels, config)
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
