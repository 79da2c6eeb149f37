"""Tests of the fixed layout of the reliability figures (calbench.plots._layout): every title,
axis label, tick label and legend lies inside the figure, no two overlap, and no text covers
another panel's axes, for grids of 1 to 12 panels with long names, in both styles."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")

from calbench import plots  # noqa: E402
from calbench.functional import softmax  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from plot_checks import HAND_LABELS, HAND_PROBS, _random_problem  # noqa: E402

#: Display names of the workflow's calibrators, the longest ones included.
NAMES = [
    "Uncalibrated",
    "T-scaling",
    "V-scaling",
    "M-scaling-b",
    "Dirichlet (ODIR)",
    "Isotonic",
    "Hist-binning",
    "BBQ",
    "V-scaling-b",
    "TS-SB-ECE",
    "Dirichlet (L2, cross-validated)",
    "M-scaling (ODIR, cross-validated)",
]


def _texts(fig):
    """(owner, Text) of every visible, non-empty title, axis label and tick label."""
    out = []
    if fig._suptitle is not None and fig._suptitle.get_text():
        out.append(("suptitle", fig._suptitle))
    for i, ax in enumerate(fig.axes):
        for t in (ax.title, ax.xaxis.label, ax.yaxis.label):
            out.append((i, t))
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks():
                if tick.get_visible():
                    out.append((i, tick.label1))
    return [(o, t) for o, t in out if t.get_visible() and t.get_text()]


def _overlap(a, b, tol=0.5) -> bool:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w > tol and h > tol


def _check_layout(fig, corners=True):
    """``corners=False``: skip pairs of one axes' texts (at large fonts matplotlib's own x and y
    tick labels meet in the corner, whatever the layout)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox
    boxes = [(o, t.get_text(), t.get_window_extent(renderer)) for o, t in _texts(fig)]
    axes = [ax.get_window_extent(renderer) for ax in fig.axes]
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    for legend in legends:
        boxes.append(("legend", "legend", legend.get_window_extent(renderer)))
    # a legend below the axes (single diagrams): inside the figure, clear of every axes, text
    for legend in fig.legends:
        box = legend.get_window_extent(renderer)
        for j, ax_box in enumerate(axes):
            assert not _overlap(box, ax_box), f"the figure legend covers axes {j}"
        boxes.append(("figlegend", "figure legend", box))
    # texts inside the axes (sample counts over sparse bins, an ECE box): apart from each other
    # and from every other text
    for i, ax in enumerate(fig.axes):
        for t in ax.texts:
            if t.get_visible() and t.get_text():
                boxes.append((f"in-{i}", t.get_text(), t.get_window_extent(renderer)))
    for owner, text, box in boxes:
        assert (
            box.x0 >= frame.x0 - 0.5
            and box.y0 >= frame.y0 - 0.5
            and box.x1 <= frame.x1 + 0.5
            and box.y1 <= frame.y1 + 0.5
        ), f"{text!r} of axes {owner} is clipped: {box} outside {frame}"
        if owner in ("legend", "figlegend") or str(owner).startswith("in-"):
            continue
        for j, ax_box in enumerate(axes):
            assert not _overlap(box, ax_box), f"{text!r} of axes {owner} covers axes {j}"
    for i, (o1, t1, b1) in enumerate(boxes):
        for o2, t2, b2 in boxes[i + 1 :]:
            if "legend" in (o1, o2) or (not corners and o1 == o2):
                continue
            assert not _overlap(b1, b2), f"{t1!r} (axes {o1}) overlaps {t2!r} (axes {o2})"


@pytest.mark.parametrize("style", plots.STYLES)
@pytest.mark.parametrize("n", [1, 2, 4, 7, 12])
def test_grid_text_inside_figure_and_apart(style, n):
    logits, _, labels = _random_problem(n=600, k=4, seed=1)
    by_method = {name: softmax(logits / (0.5 + 0.3 * i)) for i, name in enumerate(NAMES[:n])}
    fig = plots.reliability_grid(by_method, labels, style=style)
    _check_layout(fig)


@pytest.mark.parametrize("style", plots.STYLES)
def test_grid_figure_title_and_very_long_names(style):
    names = ["A calibrator with a very long display name indeed", "b", "c"]
    title = (
        "CIFAR-10, ResNet-110 (stochastic depth): every calibrator fitted on the validation half"
    )
    fig = plots.reliability_grid(
        {name: HAND_PROBS for name in names}, HAND_LABELS, style=style, title=title, ncols=1
    )
    _check_layout(fig)
    first = fig.axes[0].get_title()
    assert "\n" in first  # broken at spaces, the ECE part kept whole
    assert first.replace("\n", " ").startswith(names[0] + ": ")
    assert first.splitlines()[-1].endswith(f"{plots.format_ece(0.2566666666666667)} (10 bins)")
    assert "\n" in fig._suptitle.get_text()
    assert fig._suptitle.get_text().replace("\n", " ") == title


def test_grid_short_titles_stay_on_one_line():
    fig = plots.reliability_grid({"Dirichlet (ODIR)": HAND_PROBS}, HAND_LABELS)
    assert "\n" not in fig.axes[0].get_title()


def test_grid_rows_grow_with_their_titles():
    """A row whose titles need two lines is taller; the axes keep their size."""
    short = plots.reliability_grid({"a": HAND_PROBS}, HAND_LABELS, style="coursework")
    long = plots.reliability_grid(
        {"A calibrator with a very long display name indeed": HAND_PROBS},
        HAND_LABELS,
        style="coursework",
    )
    (w1, h1), (w2, h2) = short.get_size_inches(), long.get_size_inches()
    assert w1 == w2 and h2 > h1
    a1 = short.axes[0].get_position().height * h1
    a2 = long.axes[0].get_position().height * h2
    assert a1 == pytest.approx(a2)


@pytest.mark.parametrize("style", plots.STYLES)
@pytest.mark.parametrize("title", [None, "Dirichlet (ODIR)", "M-scaling-b " * 8])
def test_single_diagram_text_inside_figure_and_apart(style, title):
    _, probs, labels = _random_problem(n=600, k=4, seed=3)
    fig = plots.reliability_diagram(probs, labels, style=style, title=title)
    _check_layout(fig)
    fig = plots.classwise_reliability_diagram(probs, labels, class_index=2, style=style)
    _check_layout(fig)


@pytest.mark.parametrize("style", plots.STYLES)
def test_png_bytes_deterministic(style, tmp_path):
    """Two identical figures give identical PNG bytes, with no matplotlib version stamped."""
    by_method = {name: HAND_PROBS for name in NAMES[:3]}
    out = []
    for i in range(2):
        path = tmp_path / f"g{i}.png"
        plots.save_figure(plots.reliability_grid(by_method, HAND_LABELS, style=style), path)
        out.append(path.read_bytes())
    assert out[0] == out[1]
    assert b"Software" not in out[0] and b"atplotlib" not in out[0]
    from PIL import Image

    fig = plots.reliability_grid(by_method, HAND_LABELS, style=style)
    size = Image.open(io.BytesIO(out[0])).size
    want = (fig.get_figwidth() * 150, fig.get_figheight() * 150)
    # matplotlib rounds the inch size times dpi to whole pixels (a size ending near .5 may go
    # either way after its float arithmetic)
    assert all(abs(got - w) <= 0.51 for got, w in zip(size, want, strict=True)), (size, want)


@pytest.mark.parametrize("style", plots.STYLES)
def test_larger_font_widens_the_margins(style):
    """A style with larger text (font.size 13) still fits: the margins grow with it."""
    logits, _, labels = _random_problem(n=600, k=4, seed=1)
    by_method = {name: softmax(logits / (0.5 + 0.3 * i)) for i, name in enumerate(NAMES[:5])}
    with matplotlib.rc_context({"font.size": 13}):
        fig = plots.reliability_grid(by_method, labels, style=style)
        _check_layout(fig, corners=False)
        fig = plots.reliability_diagram(HAND_PROBS, HAND_LABELS, style=style, title="T")
        _check_layout(fig, corners=False)


@pytest.mark.parametrize("style", plots.STYLES)
@pytest.mark.parametrize("n_bins", [10, 15, 20])
def test_sparse_counts_and_legend_never_collide(style, n_bins):
    """Many sparse bins side by side (a few low-confidence samples spread over narrow bins):
    their counts, the title's ECE, the tick labels and the legend below never overlap."""
    import numpy as np

    rng = np.random.default_rng(4)
    n, k = 800, 5
    top = np.concatenate([rng.uniform(0.2, 0.6, 40), rng.uniform(0.85, 1.0, n - 40)])
    probs = np.empty((n, k))
    probs[:, 0] = top
    probs[:, 1:] = ((1 - top) / (k - 1))[:, None]
    labels = np.where(rng.random(n) < top, 0, 1)
    fig = plots.reliability_diagram(probs, labels, n_bins=n_bins, style=style, title="T-scaling")
    assert sum(t.get_text().startswith("n=") for t in fig.axes[0].texts) >= 4
    _check_layout(fig)
    renderer = fig.canvas.get_renderer()
    texts = [t for ax in fig.axes for t in ax.texts] + list(fig.legends[0].get_texts())
    small = [t.get_text() for t in texts if t.get_fontsize() * fig.dpi / 72 < 10.0]
    assert not small, small
    assert renderer is not None
