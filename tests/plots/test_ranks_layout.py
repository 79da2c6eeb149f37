"""Layout of the critical-difference diagram for 2 to 20 methods, checked on the drawn figure:
the texts' bounding boxes (as matplotlib's Agg renderer draws them) lie inside the figure and
do not overlap, no line passes through a text, and every text is at least 10 CSS px when the
SVG is shown at its natural size (1 pt = 4/3 px), as the report shows it."""

from __future__ import annotations

import re

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

from calbench import plots  # noqa: E402
from calbench.plots import ranks as R  # noqa: E402

NAMES = [
    "Uncalibrated",
    "Temperature scaling",
    "Vector scaling",
    "Matrix scaling (bias only)",
    "Dirichlet calibration with ODIR, 5-fold CV",
    "Histogram binning",
    "Isotonic regression",
    "BBQ",
    "TS",
    "Platt",
]


def _layout(fig):
    """Text boxes (display px) with their texts, and line segments (display px)."""
    canvas = FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    fig.draw(renderer)
    (ax,) = fig.axes
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts]
    segments = []
    for line in ax.lines:
        pts = ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]))
        half_width = line.get_linewidth() * fig.dpi / 72 / 2
        segments += [(pts[i], pts[i + 1], half_width) for i in range(len(pts) - 1)]
    return boxes, segments, fig.bbox


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _hits(p, q, half_width, box) -> bool:
    """Whether the stroked segment p-q (half its line width around it) enters ``box``."""
    t = np.linspace(0.0, 1.0, 400)[:, None]
    pts = p + t * (q - p)
    inside = (
        (pts[:, 0] > box.x0 - half_width)
        & (pts[:, 0] < box.x1 + half_width)
        & (pts[:, 1] > box.y0 - half_width)
        & (pts[:, 1] < box.y1 + half_width)
    )
    return bool(inside.any())


def _ranks(k: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    values = rng.uniform(1, k, k)
    if k >= 4:
        values[1] = values[2] = values[3]  # ties
    names = [NAMES[i % len(NAMES)] + (f" #{i}" if i >= len(NAMES) else "") for i in range(k)]
    return dict(zip(names, values.tolist(), strict=True))


def test_checks_detect_a_broken_layout():
    # the checks themselves: a label on a tick label, and one on a leader line, are caught
    fig = plots.critical_difference_diagram({"A": 1.0, "B": 2.0, "C": 3.0}, 1.5)
    (ax,) = fig.axes
    pos = {t.get_text(): t.get_position() for t in ax.texts}
    ax.text(*pos["1"], "on a tick", fontsize=10, va="top")
    ax.text(pos["1"][0], pos["A"][1], "on a line", fontsize=10, va="center")
    boxes, segments, _ = _layout(fig)
    tick = next(b for s, b in boxes if s == "on a tick")
    line = next(b for s, b in boxes if s == "on a line")
    assert any(_overlap(tick, b) for s, b in boxes if s == "1")
    assert any(_hits(p, q, w, line) for p, q, w in segments)
    assert not any(_hits(p, q, w, b) for p, q, w in segments for s, b in boxes if s == "A")


@pytest.mark.parametrize("k", range(2, 21))
def test_layout_for_2_to_20_methods(k):
    ranks = _ranks(k, seed=k)
    cd = 0.3 + 0.25 * k  # groups of several sizes
    fig = plots.critical_difference_diagram(ranks, cd, "Classwise ECE", n_models=12)
    boxes, segments, frame = _layout(fig)
    names = [s for s, _ in boxes]
    assert set(ranks) <= set(names) and f"CD = {cd:.2f}" in names
    for s, b in boxes:  # inside the figure
        assert frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1, s
    for i, (s, a) in enumerate(boxes):  # no two texts overlap
        for t, b in boxes[i + 1 :]:
            assert not _overlap(a, b), (s, t)
    for s, b in boxes:  # no line through a text
        assert not any(_hits(p, q, w, b) for p, q, w in segments), s
    # every text >= 10 px at the SVG's natural size
    (ax,) = fig.axes
    assert min(t.get_fontsize() for t in ax.texts) * 4 / 3 >= R.MIN_TEXT_PX
    svg = plots.figure_svg(fig).decode()
    width_pt = float(re.search(r'<svg[^>]*width="([\d.]+)pt"', svg).group(1))
    assert width_pt == pytest.approx(fig.get_figwidth() * 72, abs=0.01)
