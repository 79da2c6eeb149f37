"""One reliability diagram per calibrator in one figure (the workflow's per-model grid)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from calbench._checks import check_n_bins, check_probs_labels
from calbench.plots._base import (
    _bins,
    _check_binning,
    _check_mapping,
    _check_style,
    _check_title,
    _ece,
    _new_figure,
    format_ece,
)
from calbench.plots.reliability import _draw_coursework, _draw_guo


def reliability_grid(
    probs_by_method: Mapping[str, Any],
    labels,
    n_bins: int = 10,
    style: str = "guo",
    ncols: int | None = None,
    title=None,
    binning: str = "width",
):
    """One reliability diagram per calibrator in one figure (the workflow's per-model grid).

    Each panel is :func:`reliability_diagram` of ``probs_by_method[name]`` in ``style``, titled
    ``"name: ECE = x.xx%"``; for ``"guo"`` each panel has its confidence histogram beneath, so the
    figure holds ``2 * len(probs_by_method)`` axes (``len`` for ``"coursework"``). Panels fill
    ``ncols`` columns row by row (default: ``n`` up to 3 panels, else ``min(4, ceil(sqrt(n)))``,
    so 12 calibrators make a 4 x 3 grid).
    """
    _check_mapping(probs_by_method, "probs_by_method")
    n_bins = check_n_bins(n_bins)
    style = _check_style(style)
    binning = _check_binning(binning)
    title = _check_title(title)
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
    nrows = math.ceil(n / ncols)
    panel_h = 4.2 if style == "guo" else 3.4
    fig = _new_figure((3.6 * ncols, panel_h * nrows + (0.4 if title else 0.0)))
    fig.get_layout_engine().set(w_pad=0.08, wspace=0.04)
    if style == "guo":
        gs = fig.add_gridspec(2 * nrows, ncols, height_ratios=[3, 1] * nrows)
    else:
        gs = fig.add_gridspec(nrows, ncols)
    first = None
    for i, (name, (p, y)) in enumerate(checked.items()):
        r, c = divmod(i, ncols)
        b = _bins(p, y, n_bins, binning=binning)
        ece_value = _ece(p, y, n_bins, binning=binning)
        if style == "guo":
            ax = fig.add_subplot(gs[2 * r, c], sharey=first)
            hist_ax = fig.add_subplot(gs[2 * r + 1, c], sharex=ax)
            _draw_guo(
                ax, hist_ax, b, ece_value, ylabel="Accuracy", ece_in_corner=False, hist_lines=True
            )
        else:
            ax = fig.add_subplot(gs[r, c], sharey=first)
            _draw_coursework(
                ax,
                b,
                ece_value,
                ylabel="Confidence, accuracy, bin weight",
                ece_in_corner=False,
                acc_label="Accuracy",
            )
        first = first or ax
        ax.set_title(f"{name}: {format_ece(ece_value)} ({n_bins} bins)", fontsize=10)
        if c > 0:
            ax.set_ylabel("")
            if style == "guo":
                hist_ax.set_ylabel("")
        if i > 0 and ax.get_legend() is not None:
            ax.get_legend().remove()
        if style == "guo" and i > 0 and hist_ax.get_legend() is not None:
            hist_ax.get_legend().remove()
    if title is not None:
        fig.suptitle(title)
    return fig
