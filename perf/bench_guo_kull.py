"""Speed of the Guo / Kull study's own steps at the real logit shapes (prints figures; no
assertions on time).

* ``temperature_sweep`` (4 reliability diagrams + a 76-point ECE-vs-temperature curve, PNGs
  rendered) on the test part of a CIFAR-100 pickle (10,000 x 100) and of an ImageNet pickle
  (25,000 x 1,000), synthetic logits of those shapes;
* ``write_tables`` (every published cell beside ours, the publications' tables, the summary
  table from a 5,000 + 10,000 x 100 model with four calibrators, the HTML with 28 figures).

Run: ``python perf/bench_guo_kull.py [--repeats 2]``. Wall-clock and CPU (process) time,
best of ``--repeats``; on a shared machine the CPU time is the steadier figure.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def _logits(n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, size=n)
    z = rng.normal(size=(n, k)).astype(np.float32) * 2
    z[np.arange(n), y] += np.where(rng.random(n) < 0.75, 7.0, 0.0).astype(np.float32)
    return z, y


def _best(fn, repeats: int) -> tuple[float, float]:
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return min(wall), min(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from calbench.calibrators import get_calibrator, save_calibrator
    from calbench.logits import save_logits
    from calbench.reference import guo_kull as G
    from calbench.split import save_split

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, (n_val, n_test, k) in {
            "cifar100": (5000, 10000, 100),
            "imagenet": (25000, 25000, 1000),
        }.items():
            z, y = _logits(n_val + n_test, k)
            logits = tmp / f"{name}.npz"
            save_logits(logits, z, y, order_hash="x", model=name, dataset=name)
            split = tmp / f"{name}_split.npz"
            save_split(split, np.arange(n_val), np.arange(n_val, n_val + n_test))
            ts = get_calibrator("ts").fit(z[:n_val], y[:n_val])
            save_calibrator(ts, tmp / f"{name}_ts.json")
            out = tmp / "sweep" / name / name

            def run(logits=logits, split=split, name=name, out=out):
                G.write_sweep(
                    logits,
                    split,
                    model=name,
                    out_grid=out / "reliability.png",
                    out_curve=out / "ece_vs_temperature.png",
                    out_csv=out / "sweep.csv",
                    ts_calibrator=tmp / f"{name}_ts.json",
                )

            wall, cpu = _best(run, args.repeats)
            print(
                f"temperature_sweep {name:9s} {n_test} x {k}: {wall:6.2f} s wall, {cpu:6.2f} s CPU"
            )

        z, y = _logits(15000, 100, 1)
        cals = {}
        for m in ("uncalibrated", "ts", "iso", "ms_b"):
            cal = get_calibrator(m).fit(z[:5000], y[:5000])
            cals[m] = tmp / f"{m}.json"
            save_calibrator(cal, cals[m])
        metrics = tmp / "metrics.csv"
        metrics.write_text("dataset,model,method,half,metric,value,ci_low,ci_high\n")
        sweeps = sorted((tmp / "sweep").rglob("sweep.csv"))
        figures = {p.parent.name: sorted(p.parent.glob("*.png")) for p in sweeps}
        figures = {f"{m}_{i}": v for i in range(7) for m, v in figures.items()}  # 14 models
        save_logits(tmp / "s.npz", z, y, order_hash="x", model="s", dataset="s")
        save_split(tmp / "s_split.npz", np.arange(5000), np.arange(5000, 15000))

        def tables():
            G.write_tables(
                metrics,
                {"summary_model": "s"},
                out_html=tmp / "o" / "guo_kull.html",
                out_md=tmp / "o" / "tables.md",
                out_csv=tmp / "o" / "cells.csv",
                out_summary=tmp / "o" / "summary.csv",
                summary_logits=tmp / "s.npz",
                summary_split=tmp / "s_split.npz",
                summary_calibrators=cals,
                sweep_csvs=sweeps,
                sweep_figures=figures,
            )

        wall, cpu = _best(tables, args.repeats)
        size = (tmp / "o" / "guo_kull.html").stat().st_size / 1e6
        print(
            f"guo_kull_tables (973 cells, 14 models' figures): {wall:6.2f} s wall, {cpu:6.2f} s CPU, HTML {size:.1f} MB"
        )


if __name__ == "__main__":
    main()
