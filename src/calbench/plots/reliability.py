"""Reliability diagrams: top-label (:func:`reliability_diagram`) and one-vs-rest
(:func:`classwise_reliability_diagram`), in the style of Guo et al. 2017, fig. 1 or of the
main study's fig. 1 (b), and the drawing primitives :mod:`calbench.plots.grid` shares."""

from __future__ import annotations

import numpy as np

from calbench._checks import check_n_bins, check_probs, check_probs_labels
from calbench.plots._base import (
    _ACC_COLOR,
    _CONF_COLOR,
    _GAP_COLOR,
    _OUTPUT_COLOR,
    _WEIGHT_COLOR,
    FEW_SAMPLES,
    _bin_arrays,
    _bins,
    _check_ax,
    _check_binning,
    _check_class_index,
    _check_style,
    _check_title,
    _corner_text,
    _ece,
    _legend,
    _root_figure,
    _setup_unit_axes,
    format_ece,
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


def _draw_guo(ax, hist_ax, b, ece_value, *, ylabel, ece_in_corner, hist_lines, legend=True):
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
    if legend:
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
        if legend:
            hist_ax.legend(
                handles=hist_ax.lines[-2:], loc="best", fontsize=7, framealpha=0.9, borderpad=0.3
            )
    ax.tick_params(labelbottom=False)


def _draw_coursework(ax, b, ece_value, *, ylabel, ece_in_corner, acc_label, legend=True):
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
    if not legend:
        return
    ax.legend(
        loc="best",
        fontsize=9,
        framealpha=0.9,
        title=format_ece(ece_value) if ece_in_corner else None,
        title_fontsize=10,
    )


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

    own_figure = ax is None
    if own_figure:
        fig = new_figure(_SINGLE_SIZE[style])
        ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
        if style == "guo":
            hist_ax = fig.add_axes((0.0, 0.0, 1.0, 1.0), sharex=ax)
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
        # in its own figure at a fixed y (nothing drawn above the axes: no search for tick labels)
        ax.set_title(title, **({"y": 1.0} if own_figure else {}))
    if own_figure:
        _place_single(fig, ax, hist_ax, title is not None)
    return fig


#: Figure sizes (inches) of a single diagram per style.
_SINGLE_SIZE = {"guo": (4.6, 5.6), "coursework": (5.2, 4.4)}


def _place_single(fig, ax, hist_ax, titled: bool) -> None:
    """Fixed layout of a single diagram (:mod:`calbench.plots._layout`): the title, if any,
    broken into lines as wide as the axes; the histogram a third of the diagram's height."""
    m = margins()
    width, height = _SINGLE_SIZE["guo" if hist_ax is not None else "coursework"]
    axes_w = width - m["left"] - m["right"]
    title_h = None
    if titled:
        text, renderer = ax.title, fig.canvas.get_renderer()
        title_h = fit_text(text, title_tokens(text.get_text()), axes_w + TITLE_OVERHANG, renderer)
    axes_h = height - title_space(title_h) - m["bottom"]
    if hist_ax is None:
        place(fig, [(ax, m["left"], m["bottom"], axes_w, axes_h)], (width, height))
        return
    hist_h = (axes_h - m["inner"]) / 4.0
    rects = [
        (hist_ax, m["left"], m["bottom"], axes_w, hist_h),
        (ax, m["left"], m["bottom"] + hist_h + m["inner"], axes_w, 3.0 * hist_h),
    ]
    place(fig, rects, (width, height))


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
