"""Reliability diagrams, reliability curves, calibration maps and ECE-vs-temperature plots.

Every plotting function takes probabilities ``(N, K)`` (or logits / scores where stated) and
integer labels ``(N,)``, validates them with :mod:`calbench._checks`, and returns a
:class:`matplotlib.figure.Figure` built without :mod:`matplotlib.pyplot` (no global state, no
display; the Agg canvas renders it). The caller saves it, preferably with :func:`save_figure`,
which writes atomically. Functions that draw a single panel also accept ``ax=`` to draw into an
existing :class:`~matplotlib.axes.Axes`; they then return that axes' figure.

The binned statistics come from :func:`calbench.metrics.reliability_bins` and the ECE shown on
the plots from :func:`calbench.metrics.ece`, so a figure always shows the numbers the metric
tables report for the same binning. The main study draws diagrams with **10** equal-width bins
and tabulates binned metrics with 15 (replication notes, section 2.3).

Figures and their sources:

* :func:`reliability_diagram` ``style="guo"`` -- Guo, Pleiss, Sun & Weinberger, "On Calibration
  of Modern Neural Networks", ICML 2017, fig. 1: per-bin accuracy ``acc(B_m)`` bars (eq. for
  acc/conf in section 2), the gap to the bin's mean confidence ``conf(B_m)`` shaded, the diagonal
  of perfect calibration, the ECE (their eq. 3) in the corner, and the confidence histogram.
* :func:`reliability_diagram` ``style="coursework"`` -- the main study's fig. 1 (b): per bin the
  mean confidence ``C_m`` (red), the accuracy ``A_m`` (blue) and the bin weight ``|B_m| / n``
  (green), eqs. (4)-(5).
* :func:`reliability_curve` -- the main study's fig. 1 (a): the reliability plot ``(C_m, A_m)``.
* :func:`classwise_reliability_diagram` -- one-vs-rest diagram for class ``j`` (the main study's
  classwise diagrams; ``A_m^j, C_m^j`` of eq. 8).
* :func:`binary_calibration_map` -- the main study's fig. 2: calibration maps of post-hoc
  calibrators for a binary problem.
* :func:`ece_vs_temperature` -- the "ECE vs temperature" curve of the temperature-scaling
  practice study (Guo et al. 2017, section 4.2: ``softmax(z / T)``).
* :func:`reliability_grid` -- one panel per calibrator, ECE in each panel title.

The binned figures also take ``binning="mass"`` (equal-mass bins, the ECE variant of
Karandikar et al. 2021 and Nixon et al. 2019); bars then span their unequal bins.
"""

from __future__ import annotations

import io
import math
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from calbench._checks import (
    check_choice,
    check_logits_labels,
    check_n_bins,
    check_probs,
    check_probs_labels,
)
from calbench.io import atomic_path

__all__ = [
    "STYLES",
    "binary_calibration_map",
    "classwise_reliability_diagram",
    "ece_vs_temperature",
    "format_ece",
    "reliability_curve",
    "reliability_diagram",
    "reliability_grid",
    "save_figure",
]

#: Diagram styles accepted by :func:`reliability_diagram` and :func:`reliability_grid`.
STYLES = ("guo", "coursework")

# Colours: Guo et al. fig. 1 (blue outputs, red gap); the study's fig. 1b (red conf, blue acc,
# green weight).
_OUTPUT_COLOR = "#1f4e9c"
_GAP_COLOR = "#d62728"
_CONF_COLOR = "#d62728"
_ACC_COLOR = "#1f77b4"
_WEIGHT_COLOR = "#2ca02c"
_DIAG_COLOR = "0.45"

#: Interior points at which calibration maps are evaluated (x = 0 and 1 have infinite logits).
_MAP_EPS = 1e-6
#: Bins with fewer samples are drawn faded with their count (reliability diagrams).
FEW_SAMPLES = 10


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def format_ece(value: float) -> str:
    """The ECE label the figures show: a fraction as a percentage, ``0.0321 -> "ECE = 3.21%"``."""
    return f"ECE = {100.0 * float(value):.2f}%"


def _new_figure(figsize: tuple[float, float]):
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, layout="constrained")


def _root_figure(ax):
    try:
        return ax.get_figure(root=True)
    except TypeError:  # matplotlib < 3.10: a SubFigure's ``.figure`` is the root figure
        return ax.figure.figure


def _check_ax(ax, what: str = "ax"):
    from matplotlib.axes import Axes

    if ax is not None and not isinstance(ax, Axes):
        raise ValueError(
            f"{what} must be a matplotlib Axes or None, got {type(ax).__name__}; "
            "pass fig.add_subplot() or leave it out"
        )
    return ax


def _check_style(style) -> str:
    return check_choice(style, "style", STYLES)


def _check_title(title) -> str | None:
    if title is not None and not isinstance(title, str):
        raise ValueError(f"title must be a string or None, got {type(title).__name__}")
    return title


def _check_mapping(d, what: str) -> Mapping:
    if not isinstance(d, Mapping) or len(d) == 0:
        raise ValueError(
            f"{what} must be a non-empty dict {{name: array}}, got "
            f"{type(d).__name__ if not isinstance(d, Mapping) else 'an empty dict'}"
        )
    for name in d:
        if not isinstance(name, str):
            raise ValueError(f"{what} keys must be strings (method names), got {name!r}")
    return d


def _check_class_index(class_index, k: int) -> int:
    if (
        isinstance(class_index, bool)
        or not isinstance(class_index, int | np.integer)
        or not 0 <= class_index < k
    ):
        raise ValueError(f"class_index must be an integer in [0, {k - 1}], got {class_index!r}")
    return int(class_index)


def _bins(probs, labels, n_bins: int, class_index: int | None = None, binning: str = "width"):
    """Reliability bins; for equal-mass bins the first (reported from 0) starts at the data's minimum.

    The metrics report the lower edge of the first equal-mass bin as 0; drawn as is, that bar
    would span [0, u_1] even when every confidence lies above 0.9. The bar starts at the smallest
    binned value instead (the bin's actual support); the statistics are unchanged.
    """
    from dataclasses import replace

    from calbench.metrics import reliability_bins

    b = reliability_bins(probs, labels, n_bins=n_bins, binning=binning, class_index=class_index)
    if binning == "mass":
        p = np.asarray(probs)
        x = p.max(axis=1) if class_index is None else p[:, class_index]
        edges = np.array(b.edges, dtype=np.float64)
        edges[0] = min(max(edges[0], float(x.min())), edges[1])
        b = replace(b, edges=edges)
    return b


def _ece(
    probs, labels, n_bins: int, class_index: int | None = None, binning: str = "width"
) -> float:
    """ECE of the diagram's binning: top-label ECE, or the one-vs-rest ECE of one class.

    For ``class_index=j`` this is the class-``j`` term of the study's classwise ECE (eq. 8):
    ``sum_m |B_m^j| / n * |A_m^j - C_m^j|``.
    """
    if class_index is None:
        from calbench.metrics import ece

        return float(ece(probs, labels, n_bins=n_bins, binning=binning))
    b = _bins(probs, labels, n_bins, class_index, binning)
    count = np.asarray(b.count, dtype=np.float64)
    gap = np.abs(np.asarray(b.accuracy, dtype=np.float64) - np.asarray(b.confidence, np.float64))
    return float(np.sum(count / count.sum() * gap))


def _bin_arrays(b):
    edges = np.asarray(b.edges, dtype=np.float64)
    conf = np.asarray(b.confidence, dtype=np.float64)
    acc = np.asarray(b.accuracy, dtype=np.float64)
    count = np.asarray(b.count, dtype=np.float64)
    left = edges[:-1]
    width = np.minimum(edges[1:], 1.0) - left
    return left, width, conf, acc, count


def _setup_unit_axes(ax, xlabel: str, ylabel: str) -> None:
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_aspect("auto")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.plot([0, 1], [0, 1], ls="--", color=_DIAG_COLOR, lw=1.2, label="Perfect calibration")


def _corner_text(ax, text: str) -> None:
    """ECE in the upper-left corner (the legend goes beneath it)."""
    ax.text(
        0.03,
        0.97,
        text,
        transform=ax.transAxes,
        ha="left",
        va="top",
        fontsize=10,
        bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "0.6", "alpha": 0.9},
    )


def _legend(ax, below_text: bool, fontsize: int = 9) -> None:
    anchor = (0.0, 0.89) if below_text else (0.0, 1.0)
    ax.legend(loc="upper left", bbox_to_anchor=anchor, fontsize=fontsize, framealpha=0.9)


# --------------------------------------------------------------------------------------------
# drawing primitives (operate on validated arrays)
# --------------------------------------------------------------------------------------------
def _mark_sparse_bins(ax, bars, left, width, acc, count) -> None:
    """Fade the bars of bins holding fewer than :data:`FEW_SAMPLES` samples and print their
    count above them: a 1-sample bin is either 0 or 1 and says nothing about calibration."""
    for bar, x, w, a, c in zip(bars, left, width, acc, count, strict=True):
        if c < FEW_SAMPLES:
            bar.set_alpha(0.3)
            ax.text(x + w / 2, min(a + 0.02, 0.93), f"n={int(c)}", ha="center", fontsize=6)
    legend = ax.get_legend()
    if legend is not None:  # the legend key stays in full colour
        handles = getattr(legend, "legend_handles", None) or legend.legendHandles
        for handle, text in zip(handles, legend.get_texts(), strict=False):
            if text.get_text() == "Outputs":
                handle.set_alpha(None)


def _draw_guo(ax, hist_ax, b, ece_value, *, ylabel, ece_in_corner, hist_lines):
    left, width, conf, acc, count = _bin_arrays(b)
    keep = count > 0
    _setup_unit_axes(ax, "" if hist_ax is not None else "Confidence", ylabel)
    outputs = ax.bar(
        left[keep],
        acc[keep],
        width=width[keep],
        align="edge",
        color=_OUTPUT_COLOR,
        edgecolor="black",
        linewidth=0.6,
        label="Outputs",
        zorder=2,
    )
    ax.bar(
        left[keep],
        conf[keep] - acc[keep],
        bottom=acc[keep],
        width=width[keep],
        align="edge",
        color=_GAP_COLOR,
        alpha=0.3,
        edgecolor=_GAP_COLOR,
        hatch="//",
        linewidth=0.6,
        label="Gap",
        zorder=3,
    )
    _legend(ax, ece_in_corner)  # before fading: the legend keys keep the full colour
    _mark_sparse_bins(ax, outputs, left[keep], width[keep], acc[keep], count[keep])
    if ece_in_corner:
        _corner_text(ax, format_ece(ece_value))
    if hist_ax is None:
        return
    n = count.sum()
    hist_ax.bar(
        left[keep],
        100.0 * count[keep] / n,
        width=width[keep],
        align="edge",
        color=_OUTPUT_COLOR,
        edgecolor="black",
        linewidth=0.6,
        label="% of samples",
    )
    # one fixed scale (0-100% of the samples) so that panels and figures compare directly
    hist_ax.set_ylim(0.0, 100.0)
    hist_ax.set_xlim(0.0, 1.0)
    hist_ax.set_xlabel("Confidence")
    hist_ax.set_ylabel("% of samples")
    if hist_lines:
        mean_acc = float(np.sum(acc * count) / n)
        mean_conf = float(np.sum(conf * count) / n)
        hist_ax.axvline(mean_acc, color="black", ls="--", lw=1.5, label="Accuracy")
        hist_ax.axvline(mean_conf, color=_GAP_COLOR, ls=":", lw=2.0, label="Avg. confidence")
        hist_ax.legend(
            handles=hist_ax.lines[-2:], loc="best", fontsize=7, framealpha=0.9, borderpad=0.3
        )
    ax.tick_params(labelbottom=False)


def _draw_coursework(ax, b, ece_value, *, ylabel, ece_in_corner, acc_label):
    left, width, conf, acc, count = _bin_arrays(b)
    keep = count > 0
    _setup_unit_axes(ax, "Confidence", ylabel)
    w = width[keep] / 3.0
    x = left[keep]
    weight = count[keep] / count.sum()
    for offset, values, color, label in (
        (0, conf[keep], _CONF_COLOR, "Confidence"),
        (1, acc[keep], _ACC_COLOR, acc_label),
        (2, weight, _WEIGHT_COLOR, "Bin weight"),
    ):
        ax.bar(
            x + offset * w,
            values,
            width=w,
            align="edge",
            color=color,
            edgecolor="black",
            linewidth=0.4,
            label=label,
            zorder=2,
        )
    # The coursework bars fill both upper corners (tall first-bin weights in one-vs-rest
    # diagrams, tall top-bin confidences), so the ECE heads a legend placed where bars leave room.
    ax.legend(
        loc="best",
        fontsize=9,
        framealpha=0.9,
        title=format_ece(ece_value) if ece_in_corner else None,
        title_fontsize=10,
    )


def _check_binning(binning) -> str:
    return check_choice(binning, "binning", ("width", "mass"))


def _diagram(probs, labels, n_bins, style, title, ax, class_index, binning):
    """Shared body of :func:`reliability_diagram` and :func:`classwise_reliability_diagram`."""
    p, y = check_probs_labels(probs, labels)
    n_bins = check_n_bins(n_bins)
    style = _check_style(style)
    binning = _check_binning(binning)
    title = _check_title(title)
    if class_index is not None:
        class_index = _check_class_index(class_index, p.shape[1])
    hist_ax = None
    if isinstance(ax, tuple | list):
        if style != "guo" or len(ax) != 2:
            raise ValueError(
                "ax may be a pair (diagram_ax, histogram_ax) only for style='guo'; "
                "pass a single Axes otherwise"
            )
        ax, hist_ax = _check_ax(ax[0]), _check_ax(ax[1], "histogram axes")
    else:
        ax = _check_ax(ax)
    b = _bins(p, y, n_bins, class_index, binning)
    ece_value = _ece(p, y, n_bins, class_index, binning)

    if ax is None:
        if style == "guo":
            fig = _new_figure((4.6, 5.6))
            gs = fig.add_gridspec(2, 1, height_ratios=[3, 1])
            ax = fig.add_subplot(gs[0])
            hist_ax = fig.add_subplot(gs[1], sharex=ax)
        else:
            fig = _new_figure((5.2, 4.4))
            ax = fig.add_subplot()
    else:
        fig = _root_figure(ax)
        if style == "guo" and hist_ax is None:
            from mpl_toolkits.axes_grid1 import make_axes_locatable

            hist_ax = make_axes_locatable(ax).append_axes("bottom", size="33%", pad=0.45, sharex=ax)

    if style == "guo":
        ylabel = "Accuracy" if class_index is None else f"Frequency of class {class_index}"
        _draw_guo(
            ax,
            hist_ax,
            b,
            ece_value,
            ylabel=ylabel,
            ece_in_corner=True,
            hist_lines=class_index is None,
        )
    else:
        what, acc_label = (
            ("accuracy", "Accuracy") if class_index is None else ("frequency", "Positive frequency")
        )
        ylabel = f"Confidence, {what}, bin weight"
        _draw_coursework(ax, b, ece_value, ylabel=ylabel, ece_in_corner=True, acc_label=acc_label)
    if class_index is not None:
        xlabel = f"Predicted probability of class {class_index}"
        (hist_ax if hist_ax is not None else ax).set_xlabel(xlabel)
    if title is not None:
        ax.set_title(title)
    return fig


# --------------------------------------------------------------------------------------------
# public figures
# --------------------------------------------------------------------------------------------
def reliability_diagram(
    probs,
    labels,
    n_bins: int = 10,
    style: str = "guo",
    title=None,
    ax=None,
    binning: str = "width",
):
    """Top-label reliability diagram of probabilities ``(N, K)`` against labels ``(N,)``.

    Bins ``B_m`` are the study's equal-width bins (eq. 3) over the top-label confidence
    ``p_hat_i = max_k probs[i, k]``; ``acc(B_m)`` is the fraction of correct argmax predictions and
    ``conf(B_m)`` the mean confidence in the bin (Guo et al. 2017, section 2; the study's eq. 5).
    Empty bins draw nothing.

    ``style="guo"`` reproduces Guo et al. 2017 fig. 1: blue "Outputs" bars at ``acc(B_m)``, a
    red hatched "Gap" bar from ``acc(B_m)`` to ``conf(B_m)``, the diagonal, the ECE (Guo et al.
    eq. 3, :func:`calbench.metrics.ece` with the same bins) in the lower-right corner, and below
    a second axis (shared x) with the percentage of samples per bin and vertical lines at the
    overall accuracy and average confidence. ``style="coursework"`` reproduces the study's fig. 1b:
    three side-by-side bars per bin: mean confidence (red), accuracy (blue), bin weight
    ``|B_m| / n`` (green), with the ECE as the legend's title (the bars fill both upper corners).

    ``ax``: draw into this Axes (for ``"guo"`` the histogram axis is appended below it), or a pair
    ``(diagram_ax, histogram_ax)`` for ``"guo"``. ``binning="mass"`` draws equal-mass bins
    (bars as wide as their bins) and the matching equal-mass ECE. Returns the Figure (``ax``'s
    figure if given).
    """
    return _diagram(probs, labels, n_bins, style, title, ax, None, binning)


def classwise_reliability_diagram(
    probs,
    labels,
    class_index: int,
    n_bins: int = 10,
    style: str = "guo",
    title=None,
    ax=None,
    binning: str = "width",
):
    """One-vs-rest reliability diagram of class ``class_index``.

    Class ``j = class_index`` is declared positive and all others negative (the study's classwise
    diagrams, section 3.1, after Kull et al. 2019): column ``j`` of ``probs`` over all N samples
    is binned, ``C_m^j`` is its mean in bin ``m`` and ``A_m^j`` the frequency of ``labels == j``
    there. The corner shows that class's ECE ``sum_m |B_m^j| / n |A_m^j - C_m^j|``, the class-j
    term of the study's classwise ECE (eq. 8). Styles and ``ax`` as in :func:`reliability_diagram`
    (the "guo" histogram has no accuracy/confidence lines here).
    """
    p = check_probs(probs)
    class_index = _check_class_index(class_index, p.shape[1])
    if title is None:
        title = f"Class {class_index} vs rest"
    return _diagram(p, labels, n_bins, style, title, ax, class_index, binning)


def reliability_curve(
    probs_by_name: Mapping[str, Any],
    labels,
    n_bins: int = 10,
    title=None,
    ax=None,
    binning: str = "width",
):
    """Reliability curves ``(conf(B_m), acc(B_m))`` of several calibrators on one axis.

    The study's fig. 1 (a) ("reliability plot", eq. 4-5) for each entry of ``probs_by_name``
    (``{name: probs (N, K)}``, all against the same ``labels``): a line through the non-empty
    bins with a marker at each, the diagonal, and each method's ECE (same bins) in the legend.
    """
    _check_mapping(probs_by_name, "probs_by_name")
    n_bins = check_n_bins(n_bins)
    binning = _check_binning(binning)
    title = _check_title(title)
    ax = _check_ax(ax)
    checked = {}
    for name, probs in probs_by_name.items():
        try:
            checked[name] = check_probs_labels(probs, labels)
        except ValueError as exc:
            raise ValueError(f"method {name!r}: {exc}") from None
    if ax is None:
        fig = _new_figure((5.0, 4.8))
        ax = fig.add_subplot()
    else:
        fig = _root_figure(ax)
    _setup_unit_axes(ax, "Confidence", "Accuracy")
    markers = "osD^vP*Xh<>p"
    for i, (name, (p, y)) in enumerate(checked.items()):
        b = _bins(p, y, n_bins, binning=binning)
        _, _, conf, acc, count = _bin_arrays(b)
        keep = count > 0
        ax.plot(
            conf[keep],
            acc[keep],
            marker=markers[i % len(markers)],
            ms=5,
            lw=1.5,
            label=f"{name} ({format_ece(_ece(p, y, n_bins, binning=binning))})",
        )
    ax.set_aspect("equal")
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    if title is not None:
        ax.set_title(title)
    return fig


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


def ece_vs_temperature(logits, labels, temperatures, n_bins: int = 15, title=None, ax=None):
    """ECE of ``softmax(logits / T)`` for each temperature ``T``, with the minimum marked.

    Temperature scaling (Guo et al. 2017, section 4.2) divides the logits ``z`` by one scalar
    ``T > 0``; the curve shows the ECE (Guo et al. eq. 3, ``n_bins`` equal-width bins; the study
    tabulates 15) as a function of ``T`` and marks its minimum over the given grid. Each value
    equals ``calbench.metrics.ece(softmax(logits / T), labels, n_bins)``; since the argmax does
    not depend on ``T``, only the top-label confidence ``1 / sum_k exp((z_k - max z) / T)`` is
    recomputed per temperature.

    Returns the Figure; the computed values are attached as ``fig.calbench_data``, a dict with
    ``"temperatures"`` (float64, as given), ``"ece"`` (float64, fractions), ``"best_index"`` and
    ``"best_temperature"`` (first minimiser on the grid).
    """
    z, y = check_logits_labels(logits, labels)
    n_bins = check_n_bins(n_bins)
    title = _check_title(title)
    ax = _check_ax(ax)
    t = np.asarray(temperatures)
    if t.dtype == object or not (
        np.issubdtype(t.dtype, np.floating) or np.issubdtype(t.dtype, np.integer)
    ):
        raise ValueError(f"temperatures must be numbers, got dtype {t.dtype}")
    t = t.astype(np.float64)
    if t.ndim != 1 or t.size == 0:
        raise ValueError(
            f"temperatures must be a non-empty 1-D sequence, got shape {t.shape}; "
            "pass e.g. numpy.linspace(0.5, 3, 26)"
        )
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise ValueError(
            f"temperatures must be finite and > 0, got range [{t.min():.4g}, {t.max():.4g}]"
        )
    from calbench.metrics import calibration_error_1d

    # argmax is invariant under z / T (T > 0), so correctness is computed once; the top-label
    # confidence of softmax(z / T) is 1 / sum_k exp((z_k - max_k z_k) / T).
    d = z.astype(np.float64)
    correct = (np.argmax(d, axis=1) == y).astype(np.float64)
    d -= d.max(axis=1, keepdims=True)
    values = np.empty(t.shape[0], dtype=np.float64)
    for i, temp in enumerate(t):
        conf = 1.0 / np.exp(d / temp).sum(axis=1)
        values[i] = calibration_error_1d(conf, correct, n_bins, "l1", "width")
    best = int(np.argmin(values))

    if ax is None:
        fig = _new_figure((5.0, 3.8))
        ax = fig.add_subplot()
    else:
        fig = _root_figure(ax)
    ax.plot(t, 100.0 * values, marker="o", ms=3.5, lw=1.5, color=_ACC_COLOR, label="ECE")
    ax.plot(
        [t[best]],
        [100.0 * values[best]],
        marker="*",
        ms=14,
        ls="none",
        color=_GAP_COLOR,
        label=f"min: T = {t[best]:.3g}, {format_ece(values[best])}",
    )
    if t.min() <= 1.0 <= t.max():
        ax.axvline(1.0, color=_DIAG_COLOR, ls=":", lw=1.0, label="T = 1 (uncalibrated)")
    ax.set_xlabel("Temperature T")
    ax.set_ylabel(f"ECE, % ({n_bins} bins)")
    ax.set_ylim(bottom=0.0)
    ax.legend(fontsize=9, framealpha=0.9)
    if title is not None:
        ax.set_title(title)
    fig.calbench_data = {
        "temperatures": t,
        "ece": values,
        "best_index": best,
        "best_temperature": float(t[best]),
    }
    return fig


def _binary_probs(scores) -> np.ndarray:
    s = np.asarray(scores)
    if s.ndim == 1:
        if s.dtype == object or not (
            np.issubdtype(s.dtype, np.floating) or np.issubdtype(s.dtype, np.integer)
        ):
            raise ValueError(f"scores must be a numeric array, got dtype {s.dtype}")
        s = s.astype(np.float64)
        p = check_probs(np.stack([1.0 - s, s], axis=1), name="scores")
    else:
        p = check_probs(s, name="scores")
    if p.shape[1] != 2:
        raise ValueError(
            f"binary_calibration_map needs a binary problem, got {p.shape[1]} classes; "
            "pass probabilities of class 1 (N,) or a (N, 2) array"
        )
    return p


def _map_values(name: str, calibrator, logits: np.ndarray) -> np.ndarray:
    if hasattr(calibrator, "predict_proba"):
        out = calibrator.predict_proba(logits)
    elif callable(calibrator):
        out = calibrator(logits)
    else:
        raise ValueError(
            f"calibrator {name!r} has no predict_proba and is not callable; pass a fitted "
            "calbench calibrator or a function logits (M, 2) -> probabilities (M, 2)"
        )
    out = np.asarray(out)
    if out.ndim == 2:
        return check_probs(out, name=f"output of calibrator {name!r}")[:, 1]
    if out.ndim == 1 and out.shape[0] == logits.shape[0]:
        return check_probs(
            np.stack([1.0 - out, out], axis=1), name=f"output of calibrator {name!r}"
        )[:, 1]
    raise ValueError(
        f"calibrator {name!r} returned shape {out.shape}; expected ({logits.shape[0]}, 2) "
        f"or ({logits.shape[0]},) probabilities"
    )


def binary_calibration_map(
    scores,
    labels,
    calibrators: Mapping[str, Callable | Any],
    n_bins: int = 10,
    n_points: int = 501,
    title=None,
    ax=None,
):
    """Calibration maps of fitted calibrators for a binary problem (the study's fig. 2).

    ``scores``: uncalibrated probabilities of class 1, ``(N,)``, or a ``(N, 2)`` probability array;
    ``labels`` in ``{0, 1}``. Each calibrator (an object with ``predict_proba(logits)``, e.g. a
    fitted :mod:`calbench.calibrators` instance, or a callable ``logits (M, 2) -> probabilities
    (M, 2) or (M,)``) is evaluated on a grid ``x`` of ``n_points`` uncalibrated probabilities in
    ``[1e-6, 1 - 1e-6]`` fed as logits ``[0, logit(x)]`` (whose softmax is ``[1 - x, x]``); its
    calibrated probability of class 1 is drawn against ``x``. The diagonal is the identity map,
    and dots show the data's empirical frequencies ``(C_m^1, A_m^1)`` (the study's eq. 4) over
    ``n_bins`` equal-width bins, with area proportional to the bin weight.
    """
    p = _binary_probs(scores)
    from calbench._checks import check_labels

    y = check_labels(labels, p.shape[0], 2)
    _check_mapping(calibrators, "calibrators")
    n_bins = check_n_bins(n_bins)
    if isinstance(n_points, bool) or not isinstance(n_points, int | np.integer) or n_points < 2:
        raise ValueError(f"n_points must be an integer >= 2, got {n_points!r}")
    title = _check_title(title)
    ax = _check_ax(ax)

    x = np.linspace(_MAP_EPS, 1.0 - _MAP_EPS, int(n_points))
    logits = np.stack([np.zeros_like(x), np.log(x) - np.log1p(-x)], axis=1)
    curves = {name: _map_values(name, cal, logits) for name, cal in calibrators.items()}

    if ax is None:
        fig = _new_figure((5.0, 4.8))
        ax = fig.add_subplot()
    else:
        fig = _root_figure(ax)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(-0.02, 1.02)
    ax.plot([0, 1], [0, 1], ls="--", color=_DIAG_COLOR, lw=1.2, label="Identity (uncalibrated)")
    for name, values in curves.items():
        ax.plot(x, values, lw=1.8, label=name)
    b = _bins(p, y, n_bins, class_index=1)
    _, _, conf, acc, count = _bin_arrays(b)
    keep = count > 0
    weight = count[keep] / count.sum()
    ax.scatter(
        conf[keep],
        acc[keep],
        s=20.0 + 300.0 * weight,
        color="black",
        alpha=0.75,
        zorder=4,
        label=f"Empirical frequency ({n_bins} bins)",
    )
    ax.set_xlabel("Uncalibrated probability of class 1")
    ax.set_ylabel("Calibrated probability of class 1")
    ax.set_aspect("equal")
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    if title is not None:
        ax.set_title(title)
    return fig


# --------------------------------------------------------------------------------------------
# saving
# --------------------------------------------------------------------------------------------
def save_figure(fig, path: str | os.PathLike, dpi: int = 150, close: bool = True) -> Path:
    """Write ``fig`` to ``path`` atomically; the format follows the suffix (png, pdf, svg, ...).

    The figure is rendered to a temporary file beside ``path`` (same suffix) and moved onto
    ``path`` only when rendering succeeded, so an error or a killed job leaves no file. With
    ``close=True`` the figure is released from :mod:`matplotlib.pyplot`'s registry if it was
    created there (figures built by this module are not registered and need no closing).
    """
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):
        raise ValueError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    path = Path(path)
    fmt = path.suffix[1:].lower()
    supported = fig.canvas.get_supported_filetypes()
    if fmt not in supported:
        raise ValueError(
            f"cannot infer the image format of {str(path)!r}; use one of the suffixes "
            + ", ".join(f".{s}" for s in sorted(supported))
        )
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, dpi=dpi)
    if close and "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close(fig)
    return path


def critical_difference_diagram(
    average_ranks: Mapping[str, float], cd: float, title=None, n_models: int | None = None
):
    """Critical-difference diagram of average ranks (Demšar 2006, fig. 1; Kull et al. 2019).

    Methods are placed on a rank axis (1 = best, at the left); a bar of length ``cd`` (the
    Nemenyi critical difference, :func:`calbench.stats.nemenyi_cd`) is drawn above the axis, and
    thick lines join groups of methods whose average ranks differ by less than ``cd`` (not
    significantly different). Returns the Figure.
    """
    _check_mapping(average_ranks, "average_ranks")
    title = _check_title(title)
    items = sorted(((float(r), str(m)) for m, r in average_ranks.items()), key=lambda t: t[0])
    if not items or not all(math.isfinite(r) for r, _ in items):
        raise ValueError("average_ranks must map method names to finite ranks")
    if not (isinstance(cd, int | float) and math.isfinite(cd) and cd > 0):
        raise ValueError(f"cd must be a positive number, got {cd!r}")
    k = len(items)
    lo, hi = 1, max(k, math.ceil(items[-1][0]))
    half = math.ceil(k / 2)
    height = 1.3 + 0.28 * half
    fig = _new_figure((7.0, height))
    ax = fig.add_subplot()
    ax.set_xlim(lo - 0.5, hi + 0.5)
    ax.set_ylim(-0.35 * (half + 1.5), 1.0)
    ax.axis("off")
    ax.plot([lo, hi], [0, 0], color="black", lw=1)
    for t in range(lo, hi + 1):
        ax.plot([t, t], [0, 0.08], color="black", lw=1)
        ax.text(t, 0.14, str(t), ha="center", va="bottom", fontsize=9)
    ax.plot([lo, lo + cd], [0.62, 0.62], color="black", lw=1.5)
    for x in (lo, lo + cd):
        ax.plot([x, x], [0.57, 0.67], color="black", lw=1.5)
    ax.text(lo + cd / 2, 0.7, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=9)
    # labels: best half on the left, worst half on the right
    for i, (r, name) in enumerate(items):
        if i < half:
            y, x_text, ha = -0.35 * (i + 1), lo - 0.45, "left"
        else:
            y, x_text, ha = -0.35 * (k - i), hi + 0.45, "right"
        ax.plot([r, r, x_text + (0.9 if ha == "left" else -0.9)], [0, y, y], color="0.3", lw=0.8)
        ax.text(x_text, y, f"{name} ({r:.2f})", ha=ha, va="center", fontsize=9)
    # cliques: maximal runs of methods within cd of each other
    cliques = []
    for i in range(k):
        j = i
        while j + 1 < k and items[j + 1][0] - items[i][0] < cd:
            j += 1
        if j > i and (not cliques or j > cliques[-1][1]):
            cliques.append((i, j))
    for j, (a, b) in enumerate(cliques):
        y = -0.12 - 0.08 * j
        ax.plot([items[a][0] - 0.03, items[b][0] + 0.03], [y, y], color="black", lw=3)
    if title is not None or n_models is not None:
        text = title or ""
        if n_models is not None:
            text += f" (average ranks over {n_models} models)"
        ax.set_title(text.strip(), fontsize=10)
    return fig


def figure_svg(fig, close: bool = True) -> bytes:
    """The figure as SVG bytes (text as paths: no fonts needed to view it); deterministic."""
    import matplotlib
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "calbench", "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    if close:
        plt.close(fig)
    return buf.getvalue()
