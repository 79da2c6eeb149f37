"""Tests of calbench.plots.grid: one panel per calibrator, ECE in each title."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.figure import Figure  # noqa: E402

from calbench import plots  # noqa: E402
from calbench.functional import softmax  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from plot_checks import (  # noqa: E402
    HAND_LABELS,
    HAND_PROBS,
    _bottoms,
    _container,
    _heights,
    _nonempty,
    _random_problem,
    _texts,
)

metrics = pytest.importorskip("calbench.metrics")


# --------------------------------------------------------------------------------------------
# reliability_grid
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("style,per_panel", [("guo", 2), ("coursework", 1)])
def test_reliability_grid(style, per_panel):
    logits, probs, labels = _random_problem(seed=2)
    by_method = {f"T={t}": softmax(logits / t) for t in (0.5, 1.0, 1.5, 2.0, 3.0)}
    fig = plots.reliability_grid(by_method, labels, n_bins=10, style=style)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == per_panel * len(by_method)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == len(by_method)
    acc_label = "Outputs" if style == "guo" else "Accuracy"
    for ax, (name, p) in zip(panels, by_method.items(), strict=True):
        assert (
            ax.get_title()
            == f"{name}: {plots.format_ece(metrics.ece(p, labels, n_bins=10))} (10 bins)"
        )
        _, _, acc, _ = _nonempty(metrics.reliability_bins(p, labels, n_bins=10))
        np.testing.assert_allclose(_heights(_container(ax, acc_label)), acc, atol=1e-12)
        assert _texts(ax) == []  # ECE in the title, not repeated in the corner or legend
        legend = ax.get_legend()
        assert legend is None or legend.get_title().get_text() == ""
    # 5 panels in 4 columns -> two rows of panels
    fig.draw_without_rendering()
    rows = {round(ax.get_position().y0, 3) for ax in panels}
    assert len(rows) == 2


def test_reliability_grid_ncols():
    fig = plots.reliability_grid(
        {"a": HAND_PROBS, "b": HAND_PROBS, "c": HAND_PROBS},
        HAND_LABELS,
        ncols=1,
        style="coursework",
    )
    fig.draw_without_rendering()
    xs = {round(ax.get_position().x0, 3) for ax in fig.axes}
    assert len(xs) == 1 and len(fig.axes) == 3


def test_grid_keeps_the_given_order_and_highlight_moves_nothing():
    logits, _, labels = _random_problem(n=600, seed=2)
    # worst-calibrated first: the grid must not sort the panels by their ECE
    by_method = {f"T={t}": softmax(logits / t) for t in (0.3, 3.0, 1.0, 0.6, 2.0)}
    plain = plots.reliability_grid(by_method, labels)
    marked = plots.reliability_grid(by_method, labels, highlight="T=1.0")
    for fig in (plain, marked):
        fig.draw_without_rendering()
    titles = [ax.get_title().split(":")[0] for ax in marked.axes if ax.get_title()]
    assert [t.replace(" [best on val.]", "") for t in titles] == list(by_method)
    assert titles[2] == "T=1.0 [best on val.]"
    boxes = [tuple(np.round(ax.get_position().bounds, 6)) for ax in plain.axes]
    assert [tuple(np.round(ax.get_position().bounds, 6)) for ax in marked.axes] == boxes
    spine = marked.axes[4].spines["left"]  # the third panel's diagram (2 axes per panel)
    assert spine.get_linewidth() == 2.5
    assert plain.axes[4].spines["left"].get_linewidth() != 2.5
    with pytest.raises(ValueError, match="highlight"):
        plots.reliability_grid(by_method, labels, highlight="T=9")


def test_grid_panels_carry_bands():
    from calbench.plots._base import consistency_band
    from calbench.plots.reliability import BAND_LABEL

    logits, probs, labels = _random_problem(seed=2)
    fig = plots.reliability_grid({"a": probs, "b": softmax(logits / 2)}, labels)
    for ax, p in zip([fig.axes[0], fig.axes[2]], [probs, softmax(logits / 2)], strict=True):
        b = metrics.reliability_bins(p, labels, n_bins=10)
        keep = np.asarray(b.count) > 0
        lo, hi = consistency_band(b.confidence, b.count)
        band = _container(ax, BAND_LABEL)
        np.testing.assert_allclose(_bottoms(band), lo[keep], atol=1e-12)
        np.testing.assert_allclose(_bottoms(band) + _heights(band), hi[keep], atol=1e-12)


# --------------------------------------------------------------------------------------------
# drawing cost: ticks pinned, collector paused, same pixels
# --------------------------------------------------------------------------------------------
def _pixels(fig):
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba()).copy()


def _drawn_ticks(ax, axis_name):
    """``[(loc, label)]`` of the ticks the grid drew on ``ax``'s axis ``axis_name``: its marks'
    positions, each with the label drawn there ("" where none is)."""
    from matplotlib.lines import Line2D

    from calbench.plots.grid import TICK_GID

    i = 0 if axis_name == "x" else 1
    drawn = [a for a in ax.get_children() if a.get_gid() == f"{TICK_GID}-{axis_name}"]
    (marks,) = [a for a in drawn if isinstance(a, Line2D)]
    labels = {
        round(float(t.get_position()[i]), 9): t.get_text()
        for t in drawn
        if not isinstance(t, Line2D)
    }
    locs = [round(float(v), 9) for v in marks.get_xydata()[:, i]]
    return [(loc, labels.get(loc, "")) for loc in locs]


def _matplotlib_ticks(ax, axis_name):
    axis = getattr(ax, f"{axis_name}axis")
    return [
        (round(float(t.get_loc()), 9), t.label1.get_text() if t.label1.get_visible() else "")
        for t in axis._update_ticks()
    ]


@pytest.mark.parametrize("style", ["guo", "coursework"])
def test_grid_ticks_are_the_ones_matplotlib_would_draw(style):
    """The grid draws every panel's ticks itself, from the first panel's locator and formatter
    (no Tick objects); its ticks are the known ones (0.0-1.0 by 0.2, the histogram's 0-100 by
    50, no labels on a diagram's x axis over its histogram) and, undone (its artists removed,
    matplotlib's own locators, formatters and label search restored), the figure draws the same
    pixels with the same ticks."""
    from matplotlib.ticker import NullLocator
    from matplotlib.transforms import IdentityTransform, blended_transform_factory

    from calbench.plots.grid import TICK_GID

    logits, _, labels = _random_problem(n=300, seed=3)
    by_method = {f"T={t}": softmax(logits / t) for t in (0.5, 1.0, 2.0, 3.0, 4.0)}
    fig = plots.reliability_grid(by_method, labels, style=style, highlight="T=2.0")
    axes = fig.axes
    assert all(isinstance(ax.xaxis.get_major_locator(), NullLocator) for ax in axes)
    per_panel = 2 if style == "guo" else 1
    unit = [(x / 5, f"{x / 5:.1f}") for x in range(6)]
    hist = [(0.0, "0"), (50.0, "50"), (100.0, "100")]
    expected = []
    for i, ax in enumerate(axes):
        diagram = i % per_panel == 0
        over_hist = diagram and style == "guo"
        expected.append(
            (
                [(x, "") for x, _ in unit] if over_hist else unit,
                unit if diagram else hist,
            )
        )
        assert (_drawn_ticks(ax, "x"), _drawn_ticks(ax, "y")) == expected[-1]
    drawn = _pixels(fig)
    for ax in axes:
        for artist in [a for a in ax.get_children() if str(a.get_gid()).startswith(TICK_GID)]:
            artist.remove()
        ax.set_xscale("linear")  # matplotlib's default locator and formatter
        ax.set_yscale("linear")
        # the labels' own transforms and place search (set_label_coords replaced both)
        ax.xaxis.label.set_transform(blended_transform_factory(ax.transAxes, IdentityTransform()))
        ax.yaxis.label.set_transform(blended_transform_factory(IdentityTransform(), ax.transAxes))
        for axis in (ax.xaxis, ax.yaxis):
            axis._autolabelpos = True
    np.testing.assert_array_equal(_pixels(fig), drawn)
    for ax, ticks in zip(axes, expected, strict=True):
        assert (_matplotlib_ticks(ax, "x"), _matplotlib_ticks(ax, "y")) == ticks


def test_grid_and_its_png_drawn_without_garbage_collection(tmp_path):
    import gc

    logits, _, labels = _random_problem(n=300, seed=3)
    by_method = {f"T={t}": softmax(logits / t) for t in (0.5, 1.0, 2.0, 3.0)}
    runs = []

    def count(phase, info):
        if phase == "start":
            runs.append(info["generation"])

    assert gc.isenabled()
    gc.callbacks.append(count)
    try:
        plots.save_figure(plots.reliability_grid(by_method, labels), tmp_path / "grid.png")
        plots.save_figure(plots.reliability_diagram(by_method["T=1.0"], labels), tmp_path / "a.png")
    finally:
        gc.callbacks.remove(count)
    # no pass while building or saving; at most one after each of the four blocks collects what
    # they left (drawn with the collector on: dozens of passes)
    assert len(runs) <= 4, runs
    assert gc.isenabled()
    from calbench.plots._base import paused_gc

    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError
    assert gc.isenabled()
    gc.disable()  # left as it was found
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
