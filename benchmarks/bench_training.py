"""Speed of the training objectives and of a Meta-Calibration step (prints figures).

Usage: python benchmarks/bench_training.py [--device cpu|cuda] [--repeats 20]

For each loss in calbench.losses.LOSSES: forward + backward time on logits (B=128, K=10 and 100).
Then the time of one MetaCalibration step (variants m0, m1, m2, metacal) on a small CNN with
CIFAR-shaped inputs, so the overhead of the simulated classifier step can be read off.
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
    args = ap.parse_args()
    dev = args.device
    torch.manual_seed(0)
    print(f"device={dev} torch={torch.__version__} threads={torch.get_num_threads()}")
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


if __name__ == "__main__":
    main()
