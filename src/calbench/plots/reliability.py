"""Reliability diagrams: top-label (:func:`reliability_diagram`) and one-vs-rest
(:func:`classwise_reliability_diagram`), in the style of Guo et al. 2017, fig. 1 or of the
main study's fig. 1 (b), and the drawing primitives :mod:`calbench.plots.grid` shares."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calbench._checks import check_n_bins, check_probs, check_probs_labels
from calbench.io import array_digest
from calbench.metrics.binning import DIAGRAM_BINS
from calbench.metrics.smooth import smooth_reliability
from calbench.plots._base import (
    ACC_COLOR,
    BAND_COLOR,
    CONF_COLOR,
    FEW_SAMPLES,
    GAP_COLOR,
    OUTPUT_COLOR,
    SMOOTH_COLOR,
    WEIGHT_COLOR,
    bin_arrays,
    check_ax,
    check_binning,
    check_class_index,
    check_flag,
    check_min_count,
    check_style,
    check_title,
    consistency_band,
    corner_text,
    diagram_bins,
    diagram_ece,
    diagram_pairs,
    draw_bars,
    draw_legend,
    format_ece,
    paused_gc,
    root_figure,
    setup_unit_axes,
)
from calbench.plots._layout import (
    COUNT_GID,
    SINGLE_SIZE,
    figure_legend,
    new_figure,
    place_single,
    unstack_counts,
)

# --------------------------------------------------------------------------------------------
# drawing primitives (operate on validated arrays)
# --------------------------------------------------------------------------------------------
#: Labels of the uncertainty layers (the tests find the artists by them).
#: Confidence level of the smoothed curve's pointwise bootstrap band: at 95% with 200 resamples
#: it covered the kernel-smoothed population curve at 92-95% of the drawn points in every
#: simulated scenario, the former 90% band of 100 resamples at 85-90% (perf/bench_coverage.py,
#: docs/statistics.md).
SMOOTH_LEVEL = 0.95
BAND_LABEL = "Calibrated 5-95%"
SMOOTH_LABEL = f"Smoothed, {SMOOTH_LEVEL:.0%} band"
SMOOTH_BAND_GID = "smooth-band"
#: Bootstrap resamples and evaluation points of the smoothed curve.
SMOOTH_BOOTSTRAP = 200
SMOOTH_POINTS = 201
#: Opacity of the gap bar and the band over a sparse bin.
SPARSE_ALPHA = 0.12
#: Font size (points) of the sample counts over sparse bins: 11 px at 100 dpi.
_COUNT_FONT = 8


@dataclass(frozen=True)
class Layers:
    """What a diagram draws besides its bars: the per-bin consistency band ``(lo, hi)``, the
    smoothed curve, and the sample count under which a bin is marked sparse."""

    band: tuple | None
    curve: object | None
    min_count: int


def diagram_layers(p, y, b, class_index, bands, smooth, min_count) -> Layers:
    """Consistency bands of the bins ``b`` and the smoothed curve of the diagram's pairs."""
    band = None
    if bands:
        band = consistency_band(b.confidence, b.count)
    curve = None
    if smooth:
        f, outcome = diagram_pairs(p, y, class_index)
        curve = _smooth_curve(f, outcome)
    return Layers(band, curve, min_count)


#: smoothed curves already computed in this process, by content digest of their pairs: a
#: calibrator's diagram and its panel of the grid draw the same curve (its bootstrap band is
#: most of a diagram's cost); each entry is a few arrays of SMOOTH_POINTS values
_CURVES: dict = {}
_KEEP_CURVES = 64


def _smooth_curve(f, outcome):
    key = (array_digest(f, outcome), SMOOTH_POINTS, SMOOTH_BOOTSTRAP, SMOOTH_LEVEL)
    if key not in _CURVES:
        if len(_CURVES) >= _KEEP_CURVES:
            _CURVES.pop(next(iter(_CURVES)))
        _CURVES[key] = smooth_reliability(
            f,
            outcome,
            n_points=SMOOTH_POINTS,
            n_bootstrap=SMOOTH_BOOTSTRAP,
            level=SMOOTH_LEVEL,
            seed=0,
        )
    return _CURVES[key]


def check_layers(bands, smooth, min_count) -> tuple[bool, bool, int]:
    return check_flag(bands, "bands"), check_flag(smooth, "smooth"), check_min_count(min_count)


def _draw_band(ax, x, width, band, keep):
    """The consistency band of every non-empty bin: a grey box from its 5% to its 95% frequency
    over the bar it belongs to (:func:`_mark_sparse_bins` fades those of sparse bins)."""
    from matplotlib.colors import to_rgba

    lo, hi = (np.asarray(a)[keep] for a in band)
    boxes = draw_bars(
        ax,
        x,
        hi - lo,
        bottom=lo,
        width=width,
        align="edge",
        facecolor=to_rgba(BAND_COLOR, 0.3),
        edgecolor=BAND_COLOR,
        linewidth=0.8,
        label=BAND_LABEL,
        zorder=4,
    )
    return boxes


def _draw_smooth(ax, curve, min_count: int) -> None:
    """The smoothed reliability curve and its bootstrap band, drawn only where about
    ``min_count`` samples lie within a bandwidth (``n_local``): elsewhere it is an extrapolation."""
    ok = curve.n_local >= min_count
    mean = np.where(ok, curve.mean, np.nan)
    if curve.lower is not None:
        ok_band = ok & np.isfinite(curve.lower) & np.isfinite(curve.upper)
        ax.fill_between(
            curve.t,
            np.where(ok_band, curve.lower, np.nan),
            np.where(ok_band, curve.upper, np.nan),
            where=ok_band,
            color=SMOOTH_COLOR,
            alpha=0.3,
            linewidth=0,
            zorder=5,
            gid=SMOOTH_BAND_GID,
        )
    ax.plot(curve.t, mean, color=SMOOTH_COLOR, lw=1.8, label=SMOOTH_LABEL, zorder=6)


def _mark_sparse_bins(ax, bars, left, width, acc, count, min_count, faded=()) -> None:
    """Bins holding fewer than ``min_count`` samples: their bars faded and hatched, with their
    count printed above them (a 1-sample bin is either 0 or 1 and says nothing about
    calibration); ``faded`` are further bar containers of the same bins to fade."""
    for i, (bar, x, w, a, c) in enumerate(zip(bars, left, width, acc, count, strict=True)):
        if c < min_count:
            bar.set_alpha(0.3)
            bar.set_hatch("..")
            for other in faded:
                other[i].set_alpha(SPARSE_ALPHA)
            ax.text(
                x + w / 2,
                min(a + 0.02, 0.92),
                f"n={int(c)}",
                ha="center",
                fontsize=_COUNT_FONT,
                zorder=7,
                gid=COUNT_GID,
            )
    legend = ax.get_legend()
    if legend is not None:  # the legend key stays in full colour
        handles = getattr(legend, "legend_handles", None) or legend.legendHandles
        for handle, text in zip(handles, legend.get_texts(), strict=False):
            if text.get_text() == "Outputs":
                handle.set_alpha(None)
                handle.set_hatch(None)


def draw_guo(
    ax, hist_ax, b, ece_value, *, ylabel, ece_in_corner, hist_lines, legend=True, layers=None
):
    layers = layers or Layers(None, None, FEW_SAMPLES)
    left, width, conf, acc, count = bin_arrays(b)
    keep = count > 0
    setup_unit_axes(ax, "" if hist_ax is not None else "Confidence", ylabel)
    outputs = draw_bars(
        ax,
        left[keep],
        acc[keep],
        width=width[keep],
        align="edge",
        color=OUTPUT_COLOR,
        edgecolor="black",
        linewidth=0.6,
        label="Outputs",
        zorder=2,
    )
    gap = draw_bars(
        ax,
        left[keep],
        conf[keep] - acc[keep],
        bottom=acc[keep],
        width=width[keep],
        align="edge",
        color=GAP_COLOR,
        alpha=0.3,
        edgecolor=GAP_COLOR,
        hatch="//",
        linewidth=0.6,
        label="Gap",
        zorder=3,
    )
    faded = [gap]
    if layers.band is not None:
        faded.append(_draw_band(ax, left[keep], width[keep], layers.band, keep))
    if layers.curve is not None:
        _draw_smooth(ax, layers.curve, layers.min_count)
    if legend == "figure" and hist_ax is not None and hist_lines:
        n_all = count.sum()
        mean_acc = float(np.sum(acc * count) / n_all)
        mean_conf = float(np.sum(conf * count) / n_all)
        figure_legend(ax, mean_acc, mean_conf)
    elif legend == "figure":
        figure_legend(ax, None, None)
    if legend == "figure":  # below the axes; the histogram's lines join it below
        pass
    elif legend:
        draw_legend(ax, ece_in_corner)  # before fading: the legend keys keep the full colour
    _mark_sparse_bins(
        ax, outputs, left[keep], width[keep], acc[keep], count[keep], layers.min_count, faded
    )
    if ece_in_corner:
        corner_text(ax, format_ece(ece_value))
    if hist_ax is None:
        return
    n = count.sum()
    draw_bars(
        hist_ax,
        left[keep],
        100.0 * count[keep] / n,
        width=width[keep],
        align="edge",
        color=OUTPUT_COLOR,
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
        hist_ax.axvline(mean_conf, color=GAP_COLOR, ls=":", lw=2.0, label="Avg. confidence")
        if legend and legend != "figure":
            hist_ax.legend(
                handles=hist_ax.lines[-2:], loc="best", fontsize=8, framealpha=0.9, borderpad=0.3
            )
    ax.tick_params(labelbottom=False)


def draw_coursework(
    ax, b, ece_value, *, ylabel, ece_in_corner, acc_label, legend=True, layers=None
):
    layers = layers or Layers(None, None, FEW_SAMPLES)
    left, width, conf, acc, count = bin_arrays(b)
    keep = count > 0
    setup_unit_axes(ax, "Confidence", ylabel)
    w = width[keep] / 3.0
    x = left[keep]
    weight = count[keep] / count.sum()
    drawn = []
    for offset, values, color, label in (
        (0, conf[keep], CONF_COLOR, "Confidence"),
        (1, acc[keep], ACC_COLOR, acc_label),
        (2, weight, WEIGHT_COLOR, "Bin weight"),
    ):
        drawn.append(
            draw_bars(
                ax,
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
        )
    # the band belongs to the accuracy (middle) bar
    faded = [drawn[0]]
    if layers.band is not None:
        faded.append(_draw_band(ax, x + w, w, layers.band, keep))
    if layers.curve is not None:
        _draw_smooth(ax, layers.curve, layers.min_count)
    # The coursework bars fill both upper corners (tall first-bin weights in one-vs-rest
    # diagrams, tall top-bin confidences), so the ECE heads a legend placed where bars leave room.
    if legend == "figure":
        figure_legend(ax, None, None)
    elif legend:
        ax.legend(
            loc="best",
            fontsize=9,
            framealpha=0.9,
            title=format_ece(ece_value) if ece_in_corner else None,
            title_fontsize=10,
        )
    _mark_sparse_bins(ax, drawn[1], x + w, w, acc[keep], count[keep], layers.min_count, faded)


def _diagram(probs, labels, n_bins, style, title, ax, class_index, binning, options):
    """Shared body of :func:`reliability_diagram` and :func:`classwise_reliability_diagram`;
    ``options`` = ``(bands, smooth, min_count)``."""
    p, y = check_probs_labels(probs, labels)
    n_bins = check_n_bins(n_bins)
    bands, smooth, min_count = check_layers(*options)
    style = check_style(style)
    binning = check_binning(binning)
    title = check_title(title)
    if class_index is not None:
        class_index = check_class_index(class_index, p.shape[1])
    hist_ax = None
    if isinstance(ax, tuple | list):
        if style != "guo" or len(ax) != 2:
            raise ValueError(
                "ax may be a pair (diagram_ax, histogram_ax) only for style='guo'; "
                "pass a single Axes otherwise"
            )
        ax, hist_ax = check_ax(ax[0]), check_ax(ax[1], "histogram axes")
    else:
        ax = check_ax(ax)
    b = diagram_bins(p, y, n_bins, class_index, binning)
    ece_value = diagram_ece(p, y, n_bins, class_index, binning)
    layers = diagram_layers(p, y, b, class_index, bands, smooth, min_count)

    own_figure = ax is None
    if own_figure:
        fig = new_figure(SINGLE_SIZE[style])
        ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
        if style == "guo":
            hist_ax = fig.add_axes((0.0, 0.0, 1.0, 1.0), sharex=ax)
    else:
        fig = root_figure(ax)
        if style == "guo" and hist_ax is None:
            from mpl_toolkits.axes_grid1 import make_axes_locatable

            hist_ax = make_axes_locatable(ax).append_axes("bottom", size="33%", pad=0.45, sharex=ax)

    # in its own figure: the ECE in the title and the legend below the axes (nothing inside
    # the axes but the data and the counts of sparse bins); drawn into a given axes: as before
    legend = "figure" if own_figure else True
    if style == "guo":
        ylabel = "Accuracy" if class_index is None else f"Frequency of class {class_index}"
        draw_guo(
            ax,
            hist_ax,
            b,
            ece_value,
            ylabel=ylabel,
            ece_in_corner=not own_figure,
            hist_lines=class_index is None,
            legend=legend,
            layers=layers,
        )
    else:
        what, acc_label = (
            ("accuracy", "Accuracy") if class_index is None else ("frequency", "Positive frequency")
        )
        ylabel = f"Confidence, {what}, bin weight"
        draw_coursework(
            ax,
            b,
            ece_value,
            ylabel=ylabel,
            ece_in_corner=not own_figure,
            acc_label=acc_label,
            legend=legend,
            layers=layers,
        )
    if class_index is not None:
        xlabel = f"Predicted probability of class {class_index}"
        (hist_ax if hist_ax is not None else ax).set_xlabel(xlabel)
    if own_figure:
        # at a fixed y (nothing drawn above the axes: no search for tick labels); the ECE part
        # names its bin count (the tables may use another)
        ax.set_title(title or "", y=1.0)
        tail = f"{format_ece(ece_value)} ({n_bins} bins)"
        place_single(fig, ax, hist_ax, title, tail)
        unstack_counts(ax, fig.canvas.get_renderer())
    elif title is not None:
        ax.set_title(title)
    return fig


# --------------------------------------------------------------------------------------------
# public figures
# --------------------------------------------------------------------------------------------
def reliability_diagram(
    probs,
    labels,
    n_bins: int = DIAGRAM_BINS,
    style: str = "guo",
    title=None,
    ax=None,
    binning: str = "width",
    *,
    bands: bool = True,
    smooth: bool = True,
    min_count: int = FEW_SAMPLES,
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

    Uncertainty (both on by default):

    * ``bands``: each bin's consistency band (Broecker & Smith 2007), a grey box from the 5% to
      the 95% quantile of the frequency a perfectly calibrated model with that bin's count and
      mean confidence would show (exact binomial quantiles,
      :func:`calbench.plots._base.consistency_band`), over the bar it bounds (the accuracy bar;
      the middle bar in ``"coursework"``). A bar outside its box is evidence of miscalibration
      in that bin at about the 10% level.
    * ``smooth``: the kernel-smoothed reliability curve of Blasiok & Nakkiran 2023 (reflected
      Gaussian kernel at the smooth ECE's bandwidth) with its pointwise 95% bootstrap band
      (:func:`calbench.metrics.smooth.smooth_reliability`, 200 resamples, seed 0), drawn where
      at least ``min_count`` samples lie within about one bandwidth. The band is an interval
      for the *smoothed* population curve at that bandwidth, not for the unsmoothed
      reliability curve, from which the smoothing departs where the curve bends.
    * ``min_count``: bins with fewer samples are drawn faded and dotted with their count above.
    """
    options = (bands, smooth, min_count)
    with paused_gc():  # matplotlib's many small objects: no collector passes while drawing
        return _diagram(probs, labels, n_bins, style, title, ax, None, binning, options)


def classwise_reliability_diagram(
    probs,
    labels,
    class_index: int,
    n_bins: int = DIAGRAM_BINS,
    style: str = "guo",
    title=None,
    ax=None,
    binning: str = "width",
    *,
    bands: bool = True,
    smooth: bool = True,
    min_count: int = FEW_SAMPLES,
):
    """One-vs-rest reliability diagram of class ``class_index``.

    Class ``j = class_index`` is declared positive and all others negative (the study's classwise
    diagrams, section 3.1, after Kull et al. 2019): column ``j`` of ``probs`` over all N samples
    is binned, ``C_m^j`` is its mean in bin ``m`` and ``A_m^j`` the frequency of ``labels == j``
    there. The corner shows that class's ECE ``sum_m |B_m^j| / n |A_m^j - C_m^j|``, the class-j
    term of the study's classwise ECE (eq. 8). Styles and ``ax`` as in :func:`reliability_diagram`
    (the "guo" histogram has no accuracy/confidence lines here); ``bands``, ``smooth`` and
    ``min_count`` as there, on the pairs ``(probs[:, j], labels == j)``.
    """
    p = check_probs(probs)
    class_index = check_class_index(class_index, p.shape[1])
    if title is None:
        title = f"Class {class_index} vs rest"
    options = (bands, smooth, min_count)
    with paused_gc():
        return _diagram(p, labels, n_bins, style, title, ax, class_index, binning, options)
