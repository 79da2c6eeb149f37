"""Thread-count invariance and speed of the multi-threaded scaling fits
(:mod:`calbench.calibrators.fit_threads`); prints figures, asserts nothing on time.

For each shape (N x K, above the 2^21-entry threshold) and calibrator, one process per thread
count fits the calibrator with ``max_iter`` LBFGS iterations on synthetic logits (seeded:
class-dependent Gaussian logits) and prints the sha256 of the fitted parameters, the fit's wall
and CPU seconds and its objective evaluations. Parameters equal across thread counts are the
claim; the 1-thread row is the reference. With two ``--max-iter`` values (``5,25``) it also
prints the cost of one objective evaluation (forward + backward + LBFGS step) as the
difference of the two fits' times over the difference of their evaluations, which leaves out
the fit's fixed costs (tensor copies, the divergence guard's float64 objective).

Run (niced; one ImageNet-shaped run at a time on a shared machine):
``nice python perf/bench_fit_threads.py --shapes 25000x1000 --threads 1,2,4,8 --max-iter 5``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import hashlib, json, sys, time, resource
import numpy as np
n, k, method, max_iter, threads = sys.argv[1:6]
n, k, max_iter, threads = int(n), int(k), int(max_iter), int(threads)
from calbench._device import set_threads
set_threads(threads)
import torch
from calbench.calibrators import REGISTRY
rng = np.random.default_rng(0)
y = rng.integers(0, k, n)
z = rng.normal(0.0, 2.0, (n, k)).astype(np.float32)
z[np.arange(n), y] += rng.normal(6.0, 2.0, n).astype(np.float32)
cal = REGISTRY[method](max_iter=max_iter, device="cpu")
evals = [0]
orig = torch.nn.functional.cross_entropy
def counted(*a, **kw):
    evals[0] += 1
    return orig(*a, **kw)
torch.nn.functional.cross_entropy = counted
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
cal.fit(z, y)
r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
h = hashlib.sha256()
for name in sorted(cal.params_):
    h.update(np.ascontiguousarray(cal.params_[name]).tobytes())
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(json.dumps({"sha": h.hexdigest()[:16], "wall": t1 - t0, "cpu": cpu, "evals": evals[0]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="25000x1000")
    ap.add_argument("--methods", default="ms_b")
    ap.add_argument("--threads", default="1,2,4,8")
    ap.add_argument("--max-iter", default="5", help="LBFGS iterations; two values: marginal cost")
    ap.add_argument(
        "--src", help="calbench source folder to import instead (e.g. another checkout's src/)"
    )
    a = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=a.src) if a.src else None
    for shape in a.shapes.split(","):
        n, k = shape.split("x")
        for method in a.methods.split(","):
            refs: dict = {}
            for t in a.threads.split(","):
                runs = []
                for it in a.max_iter.split(","):
                    proc = subprocess.run(
                        [sys.executable, "-c", CHILD, n, k, method, it, t],
                        capture_output=True, text=True, env=env,
                    )  # fmt: skip
                    if proc.returncode:
                        sys.exit(proc.stderr.strip().splitlines()[-1])
                    r = json.loads(proc.stdout.strip().splitlines()[-1])
                    ref = refs.setdefault(it, r["sha"])
                    print(
                        f"{shape:>11} {method:>9} threads {t:>2} max_iter {it:>3}: params "
                        f"{r['sha']} {'same' if r['sha'] == ref else 'DIFFERENT'}; "
                        f"{r['evals']} evaluations, wall {r['wall']:.2f} s, CPU {r['cpu']:.2f} s",
                        flush=True,
                    )
                    runs.append(r)
                if len(runs) == 2 and runs[1]["evals"] > runs[0]["evals"]:
                    d = runs[1]["evals"] - runs[0]["evals"]
                    print(
                        f"{'':>11} {'':>9} threads {t:>2}: one evaluation "
                        f"{(runs[1]['wall'] - runs[0]['wall']) / d:.3f} s wall, "
                        f"{(runs[1]['cpu'] - runs[0]['cpu']) / d:.3f} CPU-s",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
