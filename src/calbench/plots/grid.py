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
    the returned figure does not pick them anew: :func:`_draw_ticks`).

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
    _draw_ticks(panels, renderer)
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


#: gid of the tick marks and tick labels :func:`_draw_ticks` draws in place of matplotlib's,
#: followed by the axis: ``calbench-tick-x``, ``calbench-tick-y``
TICK_GID = "calbench-tick"


def _draw_ticks(panels, renderer) -> None:
    """Draw every panel's ticks as matplotlib would, without its per-tick machinery.

    Every panel has the same size and limits, hence the same ticks: those matplotlib's own
    locator and formatter give the first panel's axes at their final size, with the first
    tick's marker, size, width, colour, pad and label font. An axis of matplotlib's makes a
    ``Tick`` of five artists per tick (~400 per 16-panel grid, about a quarter of the grid's
    CPU time) and updates them up to three times a draw; here each axis gets one ``Line2D`` of
    all its tick marks and one text per shown label, on matplotlib's own tick transforms
    (``get_xaxis_transform("tick1")``, ``get_xaxis_text1_transform(pad)``), and its own locator
    is emptied. The axis label keeps the place matplotlib gives it, measured once from the
    drawn labels: ``labelpad`` beyond the furthest tick label. The pixels are matplotlib's own
    (tests/plots/test_plots_grid.py draws both ways); the drawn artists' gid is :data:`TICK_GID`
    and the axis (``calbench-tick-x``)."""
    from matplotlib.ticker import NullLocator

    styles = {}  # read before any locator is emptied: shared axes share their locator
    for role, axis in _panel_axes(panels[0]):
        locs = [float(x) for x in axis.get_majorticklocs()]
        tick = axis.get_major_ticks(1)[0]
        mark, label = tick.tick1line, tick.label1
        styles[role] = {
            "locs": locs,
            "labels": list(axis.major.formatter.format_ticks(locs)) if label.get_visible() else [],
            "mark": {
                "marker": mark.get_marker(),
                "markersize": mark.get_markersize(),
                "markeredgewidth": mark.get_markeredgewidth(),
                "color": mark.get_color(),
            },
            "font": {"fontproperties": label.get_fontproperties(), "color": label.get_color()},
            "pad": tick.get_pad() + tick.get_tick_padding(),
            "zorder": axis.get_zorder(),
            "label_at": None,
        }
    for axes in panels:
        for role, axis in _panel_axes(axes):
            style = styles[role]
            _draw_axis_ticks(axis, style, renderer)
            axis.set_major_locator(NullLocator())


def _draw_axis_ticks(axis, style, renderer) -> None:
    """One axis's ticks and label place (:func:`_draw_ticks`)."""
    from matplotlib.lines import Line2D
    from matplotlib.text import Text

    ax = axis.axes
    locs = style["locs"]
    on_x = axis.axis_name == "x"
    if on_x:
        mark_at, (text_at, va, ha) = (
            ax.get_xaxis_transform("tick1"),
            ax.get_xaxis_text1_transform(style["pad"]),
        )
        xy = (locs, [0.0] * len(locs))
    else:
        mark_at, (text_at, va, ha) = (
            ax.get_yaxis_transform("tick1"),
            ax.get_yaxis_text1_transform(style["pad"]),
        )
        xy = ([0.0] * len(locs), locs)
    common = {"zorder": style["zorder"], "clip_on": False, "gid": f"{TICK_GID}-{axis.axis_name}"}
    ax.add_artist(Line2D(*xy, transform=mark_at, linestyle="none", **style["mark"], **common))
    texts = []
    for loc, text in zip(locs, style["labels"], strict=False):
        at = (loc, 0.0) if on_x else (0.0, loc)
        texts.append(
            ax.add_artist(
                Text(*at, text, transform=text_at, va=va, ha=ha, **style["font"], **common)
            )
        )
    if not axis.label.get_text():
        axis.set_label_coords(0.5, 0.0)  # nothing to place: no search for its place
        return
    if style["label_at"] is None:  # measured once: every panel has the same size
        box, pad = ax.bbox, axis.labelpad * ax.figure.dpi / 72.0
        ends = [t.get_window_extent(renderer) for t in texts]
        if on_x:
            bottom = min([b.y0 for b in ends] + [box.y0])
            style["label_at"] = (0.5, (bottom - pad - box.y0) / box.height)
        else:
            left = min([b.x0 for b in ends] + [box.x0])
            style["label_at"] = ((left - pad - box.x0) / box.width, 0.5)
    axis.set_label_coords(*style["label_at"])


def _panel_axes(axes):
    """``(role, axis)`` of every axis of a panel ``(diagram_ax, histogram_ax or None)``."""
    ax, hist_ax = axes
    yield "x", ax.xaxis
    yield "y", ax.yaxis
    if hist_ax is not None:
        yield "hist x", hist_ax.xaxis
        yield "hist y", hist_ax.yaxis
