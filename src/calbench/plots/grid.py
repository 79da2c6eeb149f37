"""One reliability diagram per calibrator in one figure (the workflow's per-model grid)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from calbench._checks import check_n_bins, check_probs_labels
from calbench.metrics.binning import DIAGRAM_BINS
from calbench.plots._base import (
    FEW_SAMPLES,
    check_binning,
    check_mapping,
    check_style,
    check_title,
    diagram_bins,
    diagram_ece,
    format_ece,
    paused_gc,
)
from calbench.plots._layout import (
    TITLE_OVERHANG,
    fit_text,
    margins,
    new_figure,
    place,
    title_space,
    title_tokens,
)
from calbench.plots.reliability import check_layers, diagram_layers, draw_coursework, draw_guo

#: Title suffix and frame of the highlighted panel (e.g. the calibrator best on validation).
HIGHLIGHT_MARK = "[best on val.]"
_HIGHLIGHT_COLOR = "#1a9641"


def reliability_grid(
    probs_by_method: Mapping[str, Any],
    labels,
    n_bins: int = DIAGRAM_BINS,
    style: str = "guo",
    ncols: int | None = None,
    title=None,
    binning: str = "width",
    *,
    bands: bool = True,
    smooth: bool = True,
    min_count: int = FEW_SAMPLES,
    highlight: str | None = None,
):
    """One reliability diagram per calibrator in one figure (the workflow's per-model grid).

    Each panel is :func:`reliability_diagram` of ``probs_by_method[name]`` in ``style``, titled
    ``"name: ECE = x.xx%"``; for ``"guo"`` each panel has its confidence histogram beneath, so the
    figure holds ``2 * len(probs_by_method)`` axes (``len`` for ``"coursework"``). Panels fill
    ``ncols`` columns row by row (default: ``n`` up to 3 panels, else ``min(4, ceil(sqrt(n)))``,
    so 12 calibrators make a 4 x 3 grid). The layout is fixed from the grid's shape
    (:mod:`calbench.plots._layout`): every panel has the same size, a title wider than its panel
    is broken at spaces (the ECE part kept whole) and its row grows to hold it. The ticks are
    those matplotlib picks for the first panel, pinned on every panel (a fixed list: resizing
    the returned figure does not pick them anew).

    Panels keep the order of ``probs_by_method`` (the config's calibrator order), never sorted
    by a score, so the same calibrator sits in the same place in every model's grid and a
    reader can scan a column. ``highlight`` names one panel to mark (e.g. the calibrator best on
    the validation half): its title gains ``[best on val.]`` and its frame is drawn thick and
    green; no panel moves. ``bands``, ``smooth`` and ``min_count`` as in
    :func:`reliability_diagram` (each panel ``_PANEL_W`` = 3.9 in, 390 px at 100 dpi).
    """
    check_mapping(probs_by_method, "probs_by_method")
    n_bins = check_n_bins(n_bins)
    style = check_style(style)
    binning = check_binning(binning)
    title = check_title(title)
    bands, smooth, min_count = check_layers(bands, smooth, min_count)
    if highlight is not None and highlight not in probs_by_method:
        raise ValueError(
            f"highlight must name a panel, one of {list(probs_by_method)}, got {highlight!r}"
        )
    n = len(probs_by_method)
    if ncols is None:
        ncols = n if n <= 3 else min(4, math.ceil(math.sqrt(n)))
    if isinstance(ncols, bool) or not isinstance(ncols, int | np.integer) or ncols < 1:
        raise ValueError(f"ncols must be an integer >= 1 or None, got {ncols!r}")
    ncols = min(int(ncols), n)
    checked = {}
    for name, probs in probs_by_method.items():
        try:
            checked[name] = check_probs_labels(probs, labels)
        except ValueError as exc:
            raise ValueError(f"method {name!r}: {exc}") from None
    with paused_gc():
        return _grid_figure(
            checked,
            n_bins,
            style,
            ncols,
            title,
            binning,
            (bands, smooth, min_count),
            highlight,
        )


def _grid_figure(checked, n_bins, style, ncols, title, binning, options, highlight):
    """:func:`reliability_grid` of validated ``{name: (probs, labels)}``; ``options`` =
    ``(bands, smooth, min_count)``."""
    bands, smooth, min_count = options
    n = len(checked)
    nrows = math.ceil(n / ncols)
    fig = new_figure((4.6 * ncols, 5.0 * nrows))  # resized below once the titles are measured
    renderer = fig.canvas.get_renderer()
    panels, title_heights, first = [], [], None
    for i, (name, (p, y)) in enumerate(checked.items()):
        c = i % ncols
        b = diagram_bins(p, y, n_bins, binning=binning)
        ece_value = diagram_ece(p, y, n_bins, binning=binning)
        layers = diagram_layers(p, y, b, None, bands, smooth, min_count)
        ax = fig.add_axes((0.0, 0.0, 1.0, 1.0), sharey=first)
        hist_ax = None
        if style == "guo":
            hist_ax = fig.add_axes((0.0, 0.0, 1.0, 1.0), sharex=ax)
            draw_guo(
                ax,
                hist_ax,
                b,
                ece_value,
                ylabel="Accuracy",
                ece_in_corner=False,
                hist_lines=True,
                legend=i == 0,
                layers=layers,
            )
        else:
            draw_coursework(
                ax,
                b,
                ece_value,
                ylabel="Confidence, accuracy, bin weight",
                ece_in_corner=False,
                acc_label="Accuracy",
                legend=i == 0,
                layers=layers,
            )
        first = first or ax
        if c > 0:
            ax.set_ylabel("")
            if hist_ax is not None:
                hist_ax.set_ylabel("")
        text = ax.set_title("", fontsize=10, y=1.0)  # a fixed y: no search for tick labels above
        label = f"{name} {HIGHLIGHT_MARK}:" if name == highlight else f"{name}:"
        tokens = title_tokens(label, f"{format_ece(ece_value)} ({n_bins} bins)")
        if name == highlight:
            text.set_color(_HIGHLIGHT_COLOR)
            for spine in ax.spines.values():
                spine.set_linewidth(2.5)
                spine.set_edgecolor(_HIGHLIGHT_COLOR)
        title_heights.append(fit_text(text, tokens, _PANEL_W + TITLE_OVERHANG, renderer))
        panels.append((ax, hist_ax))
    row_titles = [
        title_space(max(title_heights[r * ncols : (r + 1) * ncols])) for r in range(nrows)
    ]
    _place_grid(fig, panels, ncols, style, row_titles, title, renderer)
    _fix_ticks(panels)
    return fig


#: Axes sizes of one panel in inches: width (390 px at 100 dpi, legible at 100% zoom); diagram
#: and histogram heights (3:1, "guo"); the diagram's height ("coursework").
_PANEL_W = 3.9
_GUO_H = (3.3, 1.1)
_COURSEWORK_H = 3.6
#: Space above a figure title (``suptitle``) in inches.
_SUPTITLE_PAD = 0.1


def _place_grid(fig, panels, ncols, style, row_titles, title, renderer) -> None:
    """Fixed layout of the grid (:mod:`calbench.plots._layout`): rows of panels, each row the
    height of its tallest title (``row_titles``, inches), the axes and the x labels beneath; the
    figure title, if any, on top."""
    m = margins()
    width = m["left"] + ncols * _PANEL_W + (ncols - 1) * m["wspace"] + m["right"]
    axes_h = _GUO_H[0] + m["inner"] + _GUO_H[1] if style == "guo" else _COURSEWORK_H
    top = 0.0
    sup = None
    if title is not None:
        sup = fig.suptitle("", va="top")
        tokens = title_tokens(title)
        top = _SUPTITLE_PAD + fit_text(sup, tokens, width - 0.2, renderer) + 0.05
    row_tops = [
        top + sum(row_titles[:r]) + r * (axes_h + m["bottom"]) for r in range(len(row_titles))
    ]
    height = row_tops[-1] + row_titles[-1] + axes_h + m["bottom"]
    rects = []
    for i, (ax, hist_ax) in enumerate(panels):
        r, c = divmod(i, ncols)
        x0 = m["left"] + c * (_PANEL_W + m["wspace"])
        axes_top = height - row_tops[r] - row_titles[r]
        if hist_ax is None:
            rects.append((ax, x0, axes_top - _COURSEWORK_H, _PANEL_W, _COURSEWORK_H))
        else:
            y0 = axes_top - _GUO_H[0]
            rects.append((ax, x0, y0, _PANEL_W, _GUO_H[0]))
            rects.append((hist_ax, x0, y0 - m["inner"] - _GUO_H[1], _PANEL_W, _GUO_H[1]))
    place(fig, rects, (width, height))
    if sup is not None:
        sup.set_y(1.0 - _SUPTITLE_PAD / height)


def _fix_ticks(panels) -> None:
    """Pin the ticks of every panel to those matplotlib's own locator and formatter give the
    first panel's axes at their final size (every panel has the same size and limits, hence the
    same ticks): drawn, an axis updates its ticks up to three times (its ticks, its label's
    place, its spine's extent), each time running the locator and the formatter; pinned, it
    reads them from a list. An axis without a label (the diagram's x axis over its histogram,
    the y axes right of the first column) skips the search for its label's place below or
    beside its tick labels, where it would draw nothing. The pixels are unchanged
    (tests/plots/test_plots_grid.py draws both ways)."""
    from matplotlib.ticker import FixedFormatter, FixedLocator

    ticks = {}
    for axes in panels:
        for role, axis in _panel_axes(axes):
            if role not in ticks:
                locs = list(axis.get_majorticklocs())
                ticks[role] = (locs, list(axis.major.formatter.format_ticks(locs)))
            locs, labels = ticks[role]
            axis.set_major_locator(FixedLocator(locs))
            axis.set_major_formatter(FixedFormatter(labels))
            if not axis.label.get_text():
                axis.set_label_coords(0.5, 0.0)  # nothing to place: no search for its place


def _panel_axes(axes):
    """``(role, axis)`` of every axis of a panel ``(diagram_ax, histogram_ax or None)``."""
    ax, hist_ax = axes
    yield "x", ax.xaxis
    yield "y", ax.yaxis
    if hist_ax is not None:
        yield "hist x", hist_ax.xaxis
        yield "hist y", hist_ax.yaxis
