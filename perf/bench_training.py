"""Speed of the training objectives and of a Meta-Calibration step (prints figures).

Usage: python perf/bench_training.py [--device cpu|cuda] [--repeats 20] [--throughput-only]

For each loss in calbench.losses.LOSSES: forward + backward time on logits (B=128, K=10 and 100).
Then the time of one MetaCalibration step (variants m0, m1, m2, metacal) on a small CNN with
CIFAR-shaped inputs, so the overhead of the simulated classifier step can be read off.
Finally the throughput of whole training epochs (``calbench.training.train``: images/second for
each method, data held on the device as uint8) and of logit caching
(``calbench.logits.compute_logits``, images/second) for the Fashion-MNIST MLP and LeNet-5 and
the CIFAR ResNet-18 (bfloat16 autocast rows on a GPU only).
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from calbench.losses import LOSSES, get_loss
from calbench.metacal import MetaCalibration


def _time(fn, repeats, device):
    fn()  # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / repeats


class SmallCNN(nn.Module):
    def __init__(self, k=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )  # fmt: skip
        self.fc = nn.Linear(64, k)

    def forward(self, x):
        return self.fc(self.features(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--throughput-only", action="store_true")
    args = ap.parse_args()
    dev = args.device
    torch.manual_seed(0)
    print(f"device={dev} torch={torch.__version__} threads={torch.get_num_threads()}")
    if args.throughput_only:
        throughput(dev)
        return
    print(f"{'loss':<16}{'K=10 ms':>10}{'K=100 ms':>10}")
    for name in sorted(LOSSES):
        row = []
        for k in (10, 100):
            z = torch.randn(128, k, device=dev, requires_grad=True)
            y = torch.randint(0, k, (128,), device=dev)
            loss = get_loss(name)

            def fb(z=z, y=y, loss=loss):
                z.grad = None
                loss(z, y).backward()

            row.append(_time(fb, args.repeats, dev) * 1e3)
        print(f"{name:<16}{row[0]:>10.3f}{row[1]:>10.3f}")

    print(
        f"\n{'metacal variant':<16}{'step ms':>10}  (SmallCNN, batch 128 + meta batch 128, 32x32)"
    )
    x = torch.randn(128, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (128,), device=dev)
    xv = torch.randn(128, 3, 32, 32, device=dev)
    yv = torch.randint(0, 10, (128,), device=dev)
    for variant in ("m0", "m1", "m2", "metacal"):
        torch.manual_seed(0)
        model = SmallCNN().to(dev)
        trainer = MetaCalibration(model, variant=variant)
        t = _time(
            lambda trainer=trainer: trainer.step((x, y), (xv, yv)), max(3, args.repeats // 4), dev
        )
        print(f"{variant:<16}{t * 1e3:>10.1f}")
    throughput(dev)


def throughput(dev):
    """Images/second of training epochs and of logit caching."""
    from calbench.logits import compute_logits
    from calbench.models.cifar_train import ARCHITECTURES as CIFAR
    from calbench.models.fmnist import ARCHITECTURES as FMNIST
    from calbench.training import parse_training, train

    cases = [
        ("fmnist mlp", FMNIST["mlp"], (1, 28, 28), 4096),
        ("fmnist lenet5", FMNIST["lenet5"], (1, 28, 28), 2048),
        ("cifar resnet18", CIFAR["resnet18"], (3, 32, 32), 2048 if dev == "cuda" else 256),
    ]
    methods = {
        "standard": {},
        "ce+sbece": {"secondary": {"name": "sbece", "beta": 1.0}},
        "interleaved": {"method": "interleaved", "secondary": {"name": "sbece", "beta": 1.0}},
        "metacal": {"method": "metacal"},
    }
    if dev == "cuda":
        methods["standard amp"] = {"amp": True}
    print(f"\n{'model':<16}{'method':<14}{'train img/s':>12}{'cache img/s':>12}")
    for name, ctor, shape, n in cases:
        g = torch.Generator().manual_seed(0)
        images = torch.randint(0, 256, (n, *shape), generator=g, dtype=torch.uint8)
        labels = torch.randint(0, 10, (n,), generator=g)

        def pre(b):
            return b.float() / 255 - 0.5

        for mname, extra in methods.items():
            cfg = parse_training({"epochs": 1, "batch_size": 128, "lr": 0.01, **extra})
            model = ctor(num_classes=10)
            train(model, images[:256], labels[:256], preprocess=pre, config=cfg, device=dev)
            if dev == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            train(model, images, labels, preprocess=pre, config=cfg, device=dev)
            if dev == "cuda":
                torch.cuda.synchronize()
            rate = n / (time.perf_counter() - t0)
            cache = ""
            if mname == "standard":
                t0 = time.perf_counter()
                compute_logits(model, images, pre, batch_size=500, device=dev, progress=False)
                cache = f"{n / (time.perf_counter() - t0):>12.0f}"
            print(f"{name:<16}{mname:<14}{rate:>12.0f}{cache}")


if __name__ == "__main__":
    main()
