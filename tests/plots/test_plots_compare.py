"""Tests of the comparison heatmaps (calbench.plots.compare): direction by colour, size by the
printed number, significance by star and strength; every text at least 10 CSS px at the
figure's natural size, inside the figure and apart from every other text; deterministic SVG."""

from __future__ import annotations

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")

from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from calbench import plots  # noqa: E402
from calbench.plots import compare as C  # noqa: E402

ROWS = ["Temperature scaling", "Dirichlet (L2, cross-validated)", "Hist-binning"]
COLS = ["MLP", "LeNet-5", "A model with a long display name"]


def _cells(fig):
    """{text: facecolor} of the cells (patches with a text at their centre)."""
    ax = fig.axes[0]
    rects = [p for p in ax.patches if isinstance(p, Rectangle)]
    out = {}
    for t in ax.texts:
        x, y = t.get_position()
        for r in rects:
            if (
                r.get_x() < x < r.get_x() + r.get_width()
                and r.get_y() < y < r.get_y() + r.get_height()
            ):
                out[t.get_text()] = r.get_facecolor()[:3]
    return out


def _check_texts(fig):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
    assert texts
    frame = fig.bbox
    boxes = []
    for t in texts:
        # SVG shown at its natural size: 1 pt = 4/3 CSS px
        assert t.get_fontsize() * 4 / 3 >= 10.0, (t.get_text(), t.get_fontsize())
        b = t.get_window_extent(renderer)
        assert b.x0 >= frame.x0 - 0.5 and b.x1 <= frame.x1 + 0.5, t.get_text()
        assert b.y0 >= frame.y0 - 0.5 and b.y1 <= frame.y1 + 0.5, t.get_text()
        boxes.append((t.get_text(), b))
    rotated = [t for t in texts if t.get_rotation() == 45]
    # labels at 45 degrees: parallel lines, as far apart (across them) as a line is high
    for i, t1 in enumerate(rotated):
        for t2 in rotated[i + 1 :]:
            (x1, y1), (x2, y2) = (t.get_transform().transform(t.get_position()) for t in (t1, t2))
            apart = abs((x2 - x1) - (y2 - y1)) / np.sqrt(2)
            assert apart >= t1.get_fontsize() * fig.dpi / 72, (t1.get_text(), t2.get_text())
    boxes = [(t, b) for t, b in boxes if t not in {r.get_text() for r in rotated}]
    for i, (t1, b1) in enumerate(boxes):
        for t2, b2 in boxes[i + 1 :]:
            w = min(b1.x1, b2.x1) - max(b1.x0, b2.x0)
            h = min(b1.y1, b2.y1) - max(b1.y0, b2.y0)
            assert not (w > 0.5 and h > 0.5), f"{t1!r} overlaps {t2!r}"


def test_difference_heatmap_direction_size_and_significance():
    d = [[-1.5, 0.4, np.nan], [-0.2, 2.0, -3.0], [0.0, -0.5, 1.0]]
    sig = [[True, False, False], [False, True, True], [False, False, False]]
    fig = C.difference_heatmap(d, sig, ROWS, COLS, decimals=2, title="ECE", note="note")
    cells = _cells(fig)
    # printed with sign and decimals; significant ones starred; NaN empty
    assert {"-1.50*", "+0.40", "-0.20", "+2.00*", "-3.00*", "+0.00", "-0.50", "+1.00"} <= set(cells)
    blue, red = cells["-3.00*"], cells["+2.00*"]
    assert blue[2] > blue[0] and red[0] > red[2]  # lower error: better (blue); higher: red
    # a pale (not significant) cell is lighter than a significant one of similar size
    assert sum(cells["-1.50*"]) < sum(cells["-0.50"])
    _check_texts(fig)


def test_difference_heatmap_higher_is_better_flips_the_colours():
    fig = C.difference_heatmap(
        [[1.0, -1.0]], [[True, True]], ["a"], ["m1", "m2"], higher_is_better=True
    )
    cells = _cells(fig)
    assert cells["+1.00*"][2] > cells["+1.00*"][0]  # accuracy up: blue
    assert cells["-1.00*"][0] > cells["-1.00*"][2]


def test_rank_heatmap_blue_best_red_worst_and_legible():
    r = [[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]]
    fig = C.rank_heatmap(r, ROWS, ["ECE", "Calibration error of NLL"], title="ranks")
    cells = _cells(fig)
    assert set(cells) >= {"1.0", "2.0", "3.0"}
    _check_texts(fig)


@pytest.mark.parametrize("n_rows,n_cols", [(1, 1), (16, 6), (16, 11)])
def test_heatmaps_of_the_default_study_shape_fit(n_rows, n_cols):
    rng = np.random.default_rng(0)
    rows = [f"Calibrator number {i}" for i in range(n_rows)]
    cols = [f"Model {j} with a long name" for j in range(n_cols)]
    d = rng.normal(size=(n_rows, n_cols))
    _check_texts(C.difference_heatmap(d, np.abs(d) > 1, rows, cols, title="t", note="n"))
    _check_texts(C.rank_heatmap(rng.uniform(1, n_rows, (n_rows, n_cols)), rows, cols))


def test_heatmap_svg_is_deterministic():
    a = plots.figure_svg(C.difference_heatmap([[1.0]], [[True]], ["a"], ["b"]))
    b = plots.figure_svg(C.difference_heatmap([[1.0]], [[True]], ["a"], ["b"]))
    assert a == b and b"<dc:date>" not in a


def test_heatmap_shape_errors():
    with pytest.raises(ValueError, match="2 x 1"):
        C.difference_heatmap([[1.0, 2.0]], [[True, True]], ["a", "b"], ["m"])
    with pytest.raises(ValueError, match="at least one"):
        C.rank_heatmap([], [], ["m"])
