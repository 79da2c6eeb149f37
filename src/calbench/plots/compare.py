"""Compact figures of many comparisons: a heatmap of paired differences against a baseline
(:func:`difference_heatmap`), a heatmap of average ranks across metrics (:func:`rank_heatmap`),
and, over a study's models, the win-rate matrix of the calibrators (:func:`win_rate_heatmap`)
and their improvements with intervals (:func:`interval_heatmap`).

Both are laid out in inches from the measured size of their texts (as
:mod:`calbench.plots.ranks`), so that long names never overlap a cell, and every text is at
least :data:`FONT_PT` points: 10.7 CSS px when shown at the figure's natural size (SVG, 1 pt =
4/3 px). Colour says the direction (blue = better than the baseline, red = worse, on the
metric's own sense: lower is better for an error, higher for accuracy); only cells whose
difference is significant after the correction are drawn in full colour and marked with a
star, the others are pale, so the figure shows direction, size (the printed number) and
significance at once. A ``note`` is printed under the grid, one line per ``\n``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from calbench.plots._base import fixed_limits
from calbench.plots._layout import new_figure
from calbench.plots.ranks import text_size

#: Size of every text of these figures, in points (10.7 CSS px at natural size).
FONT_PT = 8.0
#: Colours of "better" and "worse" at full strength, and of a missing cell.
BETTER = "#2166ac"
WORSE = "#b2182b"
MISSING = "#f0f0f0"
#: Opacity of a cell whose difference is not significant.
PALE = 0.25

_PAD = 0.06
_CELL_H = 0.24


def _colour_scale(values: np.ndarray) -> float:
    """The largest finite magnitude in ``values`` (1 when there is none, or it is 0): the value
    a heatmap cell is drawn at full strength."""
    finite = np.isfinite(values)
    scale = float(np.max(np.abs(values[finite]))) if finite.any() else 1.0
    return scale if scale > 0 else 1.0


def _blend(color: str, strength: float, alpha: float = 1.0) -> tuple:
    """``color`` mixed with white: ``strength`` in [0, 1] of the colour, times ``alpha``."""
    from matplotlib.colors import to_rgb

    s = max(0.0, min(1.0, strength)) * alpha
    return tuple(1.0 - s * (1.0 - c) for c in to_rgb(color))


def _check_matrix(values, n_rows: int, n_cols: int, what: str) -> np.ndarray:
    a = np.asarray(values, dtype=float)
    if a.shape != (n_rows, n_cols):
        raise ValueError(
            f"{what} must be a {n_rows} x {n_cols} array (rows x columns), got shape {a.shape}"
        )
    return a


def _heatmap(cells, row_labels, col_labels, title, note, colors):
    """A grid of labelled cells: ``cells[i][j]`` is the text of a cell, ``colors[i][j]`` its
    RGB; rows labelled on the left, columns above (rotated when wider than a cell)."""
    size = FONT_PT
    text_h = text_size("Ag(", size)[1]
    cell_w = max([0.5] + [text_size(c, size)[0] + 0.1 for row in cells for c in row if c])
    row_w = max(text_size(r, size)[0] for r in row_labels)
    col_w = max(text_size(c, size)[0] for c in col_labels)
    rotate = col_w > cell_w - 0.04
    head_h = (col_w * math.sin(math.radians(45)) + text_h if rotate else text_h) + 0.08
    title_w, title_h = text_size(title, size + 1) if title else (0.0, 0.0)
    notes = note.split("\n") if note else []
    note_w = max((text_size(n, size)[0] for n in notes), default=0.0)
    note_h = len(notes) * (text_h + 0.04)
    x0 = _PAD + row_w + 0.08
    grid_w = cell_w * len(col_labels)
    # a label rotated by 45 degrees reaches right of its column's centre by its width x cos 45
    reach = col_w * math.cos(math.radians(45)) + text_h if rotate else 0.0
    width = max(
        x0 + grid_w + _PAD,
        x0 + cell_w * (len(col_labels) - 0.5) + reach + _PAD,
        title_w + 2 * _PAD,
        note_w + 2 * _PAD,
    )
    y = _PAD
    y_title = y
    y += title_h + 0.08 if title else 0.0
    y_head = y + head_h
    y_grid = y_head + 0.04
    height = y_grid + _CELL_H * len(row_labels) + (note_h + 0.1 if note else 0.0) + _PAD
    fig = new_figure((width, height))  # the Agg canvas attached: texts can be measured
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.axis("off")
    from matplotlib.patches import Rectangle

    if title:
        ax.text(_PAD, y_title, title, ha="left", va="top", fontsize=size + 1, parse_math=False)
    for j, c in enumerate(col_labels):
        xc = x0 + cell_w * (j + 0.5)
        if rotate:
            ax.text(
                xc,
                y_head,
                c,
                ha="left",
                va="bottom",
                rotation=45,
                rotation_mode="anchor",
                fontsize=size,
                parse_math=False,
            )
        else:
            ax.text(xc, y_head, c, ha="center", va="bottom", fontsize=size, parse_math=False)
    with fixed_limits(ax):  # limits fixed above: the cells need not grow them
        for i, r in enumerate(row_labels):
            yc = y_grid + _CELL_H * (i + 0.5)
            ax.text(x0 - 0.08, yc, r, ha="right", va="center", fontsize=size, parse_math=False)
            for j in range(len(col_labels)):
                ax.add_patch(
                    Rectangle(
                        (x0 + cell_w * j, y_grid + _CELL_H * i),
                        cell_w,
                        _CELL_H,
                        facecolor=colors[i][j],
                        edgecolor="white",
                        linewidth=1.0,
                    )
                )
                if cells[i][j]:
                    lum = sum(colors[i][j][:3]) / 3
                    ax.text(
                        x0 + cell_w * (j + 0.5),
                        yc,
                        cells[i][j],
                        ha="center",
                        va="center",
                        fontsize=size,
                        color="white" if lum < 0.55 else "black",
                        parse_math=False,
                    )
    for i, line in enumerate(reversed(notes)):
        ax.text(
            _PAD,
            height - _PAD - i * (text_h + 0.04),
            line,
            ha="left",
            va="bottom",
            fontsize=size,
            color="0.3",
            parse_math=False,
        )
    return fig


def difference_heatmap(
    differences,
    significant,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    higher_is_better: bool = False,
    decimals: int = 2,
    title: str | None = None,
    note: str | None = None,
):
    """Heatmap of paired differences ``calibrator - baseline`` (rows: calibrators, columns:
    models), already in display units (e.g. percentage points).

    A cell is blue when the calibrator is better than the baseline (its difference negative for
    an error, positive when ``higher_is_better``), red when worse, its strength growing with
    ``|difference|`` relative to the largest one shown; cells whose difference is not
    ``significant`` (after the family's correction) are pale and unstarred; NaN cells are grey
    and empty. Each cell prints the signed difference with ``decimals`` decimals, and ``*``
    when significant. Returns the Figure.
    """
    rows, cols = list(map(str, row_labels)), list(map(str, col_labels))
    if not rows or not cols:
        raise ValueError("difference_heatmap needs at least one row and one column label")
    d = _check_matrix(differences, len(rows), len(cols), "differences")
    sig = _check_matrix(significant, len(rows), len(cols), "significant").astype(bool)
    scale = _colour_scale(d)
    cells, colors = [], []
    for i in range(len(rows)):
        cells.append([])
        colors.append([])
        for j in range(len(cols)):
            v = d[i, j]
            if not math.isfinite(v):
                cells[i].append("")
                colors[i].append(_blend(MISSING, 1.0))
                continue
            better = v > 0 if higher_is_better else v < 0
            strength = 0.25 + 0.75 * abs(v) / scale
            color = BETTER if better else WORSE
            colors[i].append(_blend(color, strength, 1.0 if sig[i, j] else PALE))
            text = f"{v:+.{decimals}f}"
            cells[i].append(text + ("*" if sig[i, j] else ""))
    return _heatmap(cells, rows, cols, title, note, colors)


def rank_heatmap(
    ranks,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    title: str | None = None,
    note: str | None = None,
):
    """Average ranks (rows: calibrators, columns: metrics; 1 = best) as a heatmap: blue for the
    best ranks, red for the worst (of the ``k`` calibrators), the rank printed in each cell with
    one decimal; NaN cells grey. Returns the Figure."""
    rows, cols = list(map(str, row_labels)), list(map(str, col_labels))
    if not rows or not cols:
        raise ValueError("rank_heatmap needs at least one row and one column label")
    r = _check_matrix(ranks, len(rows), len(cols), "ranks")
    k = max(len(rows), 2)
    mid = (k + 1) / 2
    cells, colors = [], []
    for i in range(len(rows)):
        cells.append([])
        colors.append([])
        for j in range(len(cols)):
            v = r[i, j]
            if not math.isfinite(v):
                cells[i].append("")
                colors[i].append(_blend(MISSING, 1.0))
                continue
            strength = abs(v - mid) / (mid - 1)
            colors[i].append(_blend(BETTER if v < mid else WORSE, 0.8 * strength))
            cells[i].append(f"{v:.1f}")
    return _heatmap(cells, rows, cols, title, note, colors)


def win_rate_heatmap(
    rate,
    low,
    high,
    names: Sequence[str],
    *,
    title: str | None = None,
    note: str | None = None,
):
    """Heatmap of win rates over models: ``rate[a, b]`` (rows: the calibrator, columns: its
    rival) the share of models on which row ``a`` beats column ``b``, ``low``/``high`` its
    interval. Blue above one half (the row wins more often), red below, stronger the farther
    from one half; a cell whose interval contains one half is pale and unstarred, one whose
    interval excludes it is in full colour with ``*``; the diagonal is grey and empty. Each
    cell prints the rate with two decimals. Returns the Figure."""
    labels = list(map(str, names))
    if not labels:
        raise ValueError("win_rate_heatmap needs at least one calibrator name")
    n = len(labels)
    r = _check_matrix(rate, n, n, "rate")
    lo = _check_matrix(low, n, n, "low")
    hi = _check_matrix(high, n, n, "high")
    cells, colors = [], []
    for i in range(n):
        cells.append([])
        colors.append([])
        for j in range(n):
            v = r[i, j]
            if i == j or not math.isfinite(v):
                cells[i].append("")
                colors[i].append(_blend(MISSING, 1.0))
                continue
            clear = math.isfinite(lo[i, j]) and (lo[i, j] > 0.5 or hi[i, j] < 0.5)
            color = BETTER if v >= 0.5 else WORSE
            strength = 0.25 + 0.75 * min(1.0, abs(v - 0.5) * 2)
            colors[i].append(_blend(color, strength, 1.0 if clear else PALE))
            cells[i].append(f"{v:.2f}" + ("*" if clear else ""))
    return _heatmap(cells, labels, labels, title, note, colors)


def interval_heatmap(
    mean,
    low,
    high,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    decimals: int = 3,
    title: str | None = None,
    note: str | None = None,
):
    """Heatmap of improvements with their intervals (rows: calibrators, columns: metrics): each
    cell prints ``mean [low, high]``, blue when the mean is positive (an improvement), red when
    negative, in full colour with ``*`` when the interval excludes 0, pale otherwise; NaN cells
    are grey and empty. Returns the Figure."""
    rows, cols = list(map(str, row_labels)), list(map(str, col_labels))
    if not rows or not cols:
        raise ValueError("interval_heatmap needs at least one row and one column label")
    m = _check_matrix(mean, len(rows), len(cols), "mean")
    lo = _check_matrix(low, len(rows), len(cols), "low")
    hi = _check_matrix(high, len(rows), len(cols), "high")
    scale = _colour_scale(m)
    cells, colors = [], []
    for i in range(len(rows)):
        cells.append([])
        colors.append([])
        for j in range(len(cols)):
            v = m[i, j]
            if not math.isfinite(v):
                cells[i].append("")
                colors[i].append(_blend(MISSING, 1.0))
                continue
            clear = math.isfinite(lo[i, j]) and (lo[i, j] > 0 or hi[i, j] < 0)
            color = BETTER if v > 0 else WORSE
            colors[i].append(_blend(color, 0.25 + 0.75 * abs(v) / scale, 1.0 if clear else PALE))
            band = (
                f" [{lo[i, j]:+.{decimals}f}, {hi[i, j]:+.{decimals}f}]"
                if math.isfinite(lo[i, j]) and math.isfinite(hi[i, j])
                else ""
            )
            cells[i].append(f"{v:+.{decimals}f}{band}" + ("*" if clear else ""))
    return _heatmap(cells, rows, cols, title, note, colors)
