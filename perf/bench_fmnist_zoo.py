"""Training time, test accuracy and test ECE of the Fashion-MNIST zoo (prints a table).

Usage: python perf/bench_fmnist_zoo.py --data-root resources/datasets/fashion_mnist
       [--threads 2] [--archs mlp,lenet5] [--device cpu] [--spec-file config.yaml]

Each model is trained with the proposed ``training`` entry below (or the ``models:`` entries of
a config file whose dataset is fashion_mnist), then its test-set logits are computed. The figures
show whether the zoo fits the workflow's budget (~30-40 s of training per model on 2 CPU
threads) and ends over-confident (uncalibrated ECE of several percent, 15 bins).
"""

from __future__ import annotations

import argparse
import time

#: proposed training entries per architecture (constant-LR SGD, momentum 0.9, no weight decay)
PROPOSED = {
    "mlp": {"epochs": 30, "batch_size": 128, "lr": 0.05},
    "lenet5": {"epochs": 30, "batch_size": 128, "lr": 0.05},
    "vgg_small": {"epochs": 12, "batch_size": 128, "lr": 0.05},
    "resnet_small": {"epochs": 12, "batch_size": 128, "lr": 0.05},
    "mobilenet_small": {"epochs": 12, "batch_size": 128, "lr": 0.05},
    "densenet_small": {"epochs": 12, "batch_size": 128, "lr": 0.05},
}
COMMON = {"loss": "ce", "loss_kwargs": {}, "seed": 0, "train_subset": 10_000}


def _specs(args) -> dict:
    if args.spec_file:
        import yaml

        with open(args.spec_file) as fh:
            models = yaml.safe_load(fh)["models"]
        return {
            name: m
            for name, m in models.items()
            if m.get("dataset") == "fashion_mnist" and m.get("source") == "train"
        }
    archs = args.archs.split(",") if args.archs else list(PROPOSED)
    return {
        f"fmnist_{a}": {
            "dataset": "fashion_mnist",
            "source": "train",
            "arch": a,
            "training": {**COMMON, **PROPOSED[a]},
        }
        for a in archs
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-root", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--archs", default=None, help="comma-separated subset of the zoo")
    p.add_argument("--spec-file", default=None, help="config YAML with a models: mapping")
    p.add_argument("--device", default="cpu")
    args = p.parse_args()

    import numpy as np
    import torch

    from calbench.data import get_dataset
    from calbench.functional import softmax
    from calbench.logits import compute_logits
    from calbench.metrics import ece
    from calbench.training import train_from_spec

    torch.set_num_threads(args.threads)
    ds = get_dataset("fashion_mnist")
    images, labels = ds.load_split(args.data_root, "test")
    y = labels.numpy()
    print(f"threads {torch.get_num_threads()}, device {args.device}")
    print(f"{'model':24s} {'train s':>8s} {'cpu s':>7s} {'infer s':>8s} {'train acc':>9s} "
          f"{'test acc':>8s} {'ECE %':>6s} {'conf':>6s}")  # fmt: skip
    total = 0.0
    for name, spec in _specs(args).items():
        t0, c0 = time.perf_counter(), time.process_time()
        model, history, _ = train_from_spec(spec, args.data_root, device=args.device)
        train_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
        total += train_s
        t0 = time.perf_counter()
        z = compute_logits(model, images, ds.preprocessor(spec), device=args.device, progress=False)
        infer_s = time.perf_counter() - t0
        probs = softmax(z)
        print(
            f"{name:24s} {train_s:8.1f} {cpu_s:7.1f} {infer_s:8.1f} {history[-1]['accuracy']:9.4f} "
            f"{np.mean(probs.argmax(1) == y):8.4f} {100 * ece(probs, y):6.2f} "
            f"{probs.max(1).mean():6.3f}",
            flush=True,
        )
    print(f"total training time {total:.1f} s")


if __name__ == "__main__":
    main()
