"""CPU seconds of the workflow's reliability-diagram figures, each drawn in a fresh process.

Run: ``python perf/bench_plots.py [--n 5000] [--k 10] [--panels 1,4,7,12] [--repeats 3]
[--src DIR]``. Every workflow job is its own process, so each figure is timed in a new Python
process as ``calbench plot-reliability --grid`` and ``calbench evaluate --plot`` draw it: from
the first plotting import to the written PNG, lazy matplotlib imports included. ``--src`` times another checkout's
``src`` (e.g. the code before a change) with the same script. Printed: the
floor (``import matplotlib.figure`` alone), one single diagram (``reliability_diagram`` +
``save_figure``, dpi 100 as the CLI) per style, and one grid per style and panel count
(``reliability_grid``). Probabilities: ``softmax(z / T)`` of synthetic ``n x k`` logits (a
CIFAR-10-shaped test half by default), one temperature per panel. CPU (process) time, best of
``--repeats`` processes; figures only, nothing is asserted. ``--layers`` adds, for code with the
uncertainty layers of the reliability diagrams, each figure drawn without the smoothed curve
(``smooth=False``) and without any layer (``bands=False, smooth=False``), to show their cost.

``--warm R`` times the figures as a batch job draws its models' figures after the first: in one
process, after two unmeasured draws (imports, fonts, the cached smoothed curves), the median CPU
seconds of ``R`` draws (figure and PNG); ``--torch`` imports torch first, as a ``calibrate``
job has, so that Python's garbage collector walks a heap of that size. E.g. ``--n 1000 --k 2
--panels 16 --styles guo --warm 5 --torch``, once with ``--src`` naming the other checkout.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")

CHILD = textwrap.dedent(
    """
    import json, statistics, sys, tempfile, time
    sys.path.insert(0, {src!r})
    if {torch!r}:
        import torch  # noqa: F401
    import numpy as np
    import calbench
    from calbench.functional import softmax
    assert calbench.__file__.startswith({src!r}), calbench.__file__
    what, style, panels, n, k, extra = {what!r}, {style!r}, {panels}, {n}, {k}, {extra!r}
    rng = np.random.default_rng(0)
    z = (rng.normal(size=(n, k)) * 4.0).astype(np.float32)
    y = rng.integers(0, k, n)
    y[: n // 2] = z[: n // 2].argmax(1)
    probs = {{f"Method {{i}} (variant)": softmax(z / (0.5 + 0.4 * i)) for i in range(panels)}}
    out = tempfile.mktemp(suffix=".png")

    def draw():
        from calbench import plots
        if what == "grid":
            fig = plots.reliability_grid(probs, y, n_bins=10, style=style, **extra)
        else:
            fig = plots.reliability_diagram(probs["Method 0 (variant)"], y, style=style,
                                            title="Method 0 (variant)", **extra)
        plots.save_figure(fig, out, dpi=100)

    if {warm} and what != "import":
        draw(), draw()
        times = []
        for _ in range({warm}):
            c = time.process_time()
            draw()
            times.append(time.process_time() - c)
        print(json.dumps(statistics.median(times)))
        sys.exit()
    c = time.process_time()
    if what == "import":
        import matplotlib.figure  # noqa: F401
    else:
        draw()
    print(json.dumps(time.process_time() - c))
    """
)


def cpu_seconds(
    what: str,
    style: str,
    panels: int,
    n: int,
    k: int,
    repeats: int,
    src: str,
    extra=None,
    warm: int = 0,
    torch: bool = False,
) -> float:
    """Best CPU seconds of ``repeats`` fresh processes drawing one figure (``extra``: keyword
    arguments of the plotting call); with ``warm``, each process's median of ``warm`` draws
    after two."""
    code = CHILD.format(
        src=src,
        what=what,
        style=style,
        panels=panels,
        n=n,
        k=k,
        extra=dict(extra or {}),
        warm=int(warm),
        torch=bool(torch),
    )
    best = float("inf")
    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        best = min(best, json.loads(done.stdout.strip().splitlines()[-1]))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=5_000, help="samples (default 5000, a test half)")
    ap.add_argument("--k", type=int, default=10, help="classes (default 10)")
    ap.add_argument("--panels", default="1,4,7,12", help="grid panel counts (default 1,4,7,12)")
    ap.add_argument("--styles", default="guo,coursework")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--layers",
        action="store_true",
        help="also time each figure with smooth=False and with bands=False, smooth=False",
    )
    ap.add_argument(
        "--src", default=SRC, help="the calbench src folder to time (default: this one)"
    )
    ap.add_argument(
        "--warm",
        type=int,
        default=0,
        help="R: in one process, median of R draws after two unmeasured (default 0: one cold)",
    )
    ap.add_argument("--torch", action="store_true", help="import torch first (a job's heap)")
    args = ap.parse_args()
    panels = [int(p) for p in args.panels.split(",")]
    styles = args.styles.split(",")
    r, n, k, src = args.repeats, args.n, args.k, args.src
    how = {"warm": args.warm, "torch": args.torch}
    if args.warm:
        print(
            f"CPU seconds per figure, median of {args.warm} warm draws in a process, best of "
            f"{r} processes; {n} x {k} probabilities" + (", torch imported" if args.torch else "")
        )
    else:
        print(f"CPU seconds per figure, fresh process each, best of {r}; {n} x {k} probabilities")
    print(f"code: {src}")
    if not args.warm:
        floor = cpu_seconds("import", "", 0, n, k, r, src, torch=args.torch)
        print(f"{'import matplotlib.figure (floor)':40s} {floor:6.3f}")
    variants = [("", {})]
    if args.layers:
        variants += [
            (", no smooth", {"smooth": False}),
            (", no layers", {"bands": False, "smooth": False}),
        ]
    for style in styles:
        for tag, extra in variants:
            t = cpu_seconds("single", style, 1, n, k, r, src, extra, **how)
            print(f"{'single diagram, ' + style + tag:40s} {t:6.3f}")
        for p in panels:
            for tag, extra in variants:
                t = cpu_seconds("grid", style, p, n, k, r, src, extra, **how)
                print(f"{f'grid of {p} panels, ' + style + tag:40s} {t:6.3f}")


if __name__ == "__main__":
    main()
