"""Shared pieces of the figures: styles, colours, argument checks, binned statistics and axes
set-up (:func:`calbench.metrics.reliability_bins` and :func:`calbench.metrics.ece`, so a
figure shows the numbers the metric tables report for the same binning)."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace

import numpy as np

from calbench._checks import check_choice
from calbench.metrics import ece, reliability_bins, top_label

#: Diagram styles accepted by :func:`reliability_diagram` and :func:`reliability_grid`.
STYLES = ("guo", "coursework")

# Colours: Guo et al. fig. 1 (blue outputs, red gap); the study's fig. 1b (red conf, blue acc,
# green weight).
OUTPUT_COLOR = "#1f4e9c"
GAP_COLOR = "#d62728"
CONF_COLOR = "#d62728"
ACC_COLOR = "#1f77b4"
WEIGHT_COLOR = "#2ca02c"
DIAG_COLOR = "0.45"

#: Interior points at which calibration maps are evaluated (x = 0 and 1 have infinite logits).
MAP_EPS = 1e-6
#: Bins with fewer samples are drawn faded and hatched with their count (reliability diagrams;
#: ``min_count`` overrides it): a bin of a few samples says little about calibration.
FEW_SAMPLES = 20
#: Probability range of the consistency bands (Broecker & Smith 2007): 5% to 95%.
BAND_QUANTILES = (0.05, 0.95)
#: Colours of the consistency band and of the smoothed reliability curve.
BAND_COLOR = "0.35"
SMOOTH_COLOR = "#e08214"
#: Smallest font size (points) of any text in the diagrams: 10 px at the default 100 dpi.
MIN_FONT_PT = 7.5


def format_ece(value: float) -> str:
    """The ECE label the figures show: a fraction as a percentage, ``0.0321 -> "ECE = 3.21%"``."""
    return f"ECE = {100.0 * float(value):.2f}%"


@contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block, then left as it was (even on an
    error). Building and saving a grid of 16 reliability diagrams keeps about 110,000 new
    matplotlib objects alive; every 700 of them start a collection, every tenth of those an
    older generation's and now and then one of the whole heap (in a workflow job, torch's and
    the fitted calibrators' objects too): a fifth to a quarter of the grid's CPU time with torch
    loaded (perf/bench_plots.py ``--warm 5 --torch``). What the figure leaves is collected as
    usual after the block."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def bare_figure(figsize: tuple[float, float]):
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, layout="constrained")


def root_figure(ax):
    try:
        return ax.get_figure(root=True)
    except TypeError:  # matplotlib < 3.10: a SubFigure's ``.figure`` is the root figure
        return ax.figure.figure


def check_ax(ax, what: str = "ax"):
    if ax is None:  # nothing to check: matplotlib is imported where the figure is made
        return None
    from matplotlib.axes import Axes

    if not isinstance(ax, Axes):
        raise ValueError(
            f"{what} must be a matplotlib Axes or None, got {type(ax).__name__}; "
            "pass fig.add_subplot() or leave it out"
        )
    return ax


def check_style(style) -> str:
    return check_choice(style, "style", STYLES)


def check_title(title) -> str | None:
    if title is not None and not isinstance(title, str):
        raise ValueError(f"title must be a string or None, got {type(title).__name__}")
    return title


def check_mapping(d, what: str) -> Mapping:
    if not isinstance(d, Mapping) or len(d) == 0:
        raise ValueError(
            f"{what} must be a non-empty dict {{name: array}}, got "
            f"{type(d).__name__ if not isinstance(d, Mapping) else 'an empty dict'}"
        )
    for name in d:
        if not isinstance(name, str):
            raise ValueError(f"{what} keys must be strings (method names), got {name!r}")
    return d


def check_class_index(class_index, k: int) -> int:
    if (
        isinstance(class_index, bool)
        or not isinstance(class_index, int | np.integer)
        or not 0 <= class_index < k
    ):
        raise ValueError(f"class_index must be an integer in [0, {k - 1}], got {class_index!r}")
    return int(class_index)


def diagram_bins(
    probs, labels, n_bins: int, class_index: int | None = None, binning: str = "width"
):
    """Reliability bins; for equal-mass bins the first (reported from 0) starts at the data's minimum.

    The metrics report the lower edge of the first equal-mass bin as 0; drawn as is, that bar
    would span [0, u_1] even when every confidence lies above 0.9. The bar starts at the smallest
    binned value instead (the bin's actual support); the statistics are unchanged.
    """
    b = reliability_bins(probs, labels, n_bins=n_bins, binning=binning, class_index=class_index)
    if binning == "mass":
        p = np.asarray(probs)
        x = p.max(axis=1) if class_index is None else p[:, class_index]
        edges = np.array(b.edges, dtype=np.float64)
        edges[0] = min(max(edges[0], float(x.min())), edges[1])
        b = replace(b, edges=edges)
    return b


def diagram_ece(
    probs, labels, n_bins: int, class_index: int | None = None, binning: str = "width"
) -> float:
    """ECE of the diagram's binning: top-label ECE, or the one-vs-rest ECE of one class.

    For ``class_index=j`` this is the class-``j`` term of the study's classwise ECE (eq. 8):
    ``sum_m |B_m^j| / n * |A_m^j - C_m^j|``.
    """
    if class_index is None:
        return float(ece(probs, labels, n_bins=n_bins, binning=binning))
    b = diagram_bins(probs, labels, n_bins, class_index, binning)
    count = np.asarray(b.count, dtype=np.float64)
    gap = np.abs(np.asarray(b.accuracy, dtype=np.float64) - np.asarray(b.confidence, np.float64))
    return float(np.sum(count / count.sum() * gap))


def bin_arrays(b):
    edges = np.asarray(b.edges, dtype=np.float64)
    conf = np.asarray(b.confidence, dtype=np.float64)
    acc = np.asarray(b.accuracy, dtype=np.float64)
    count = np.asarray(b.count, dtype=np.float64)
    left = edges[:-1]
    width = np.minimum(edges[1:], 1.0) - left
    return left, width, conf, acc, count


def setup_unit_axes(ax, xlabel: str, ylabel: str) -> None:
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_aspect("auto")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.plot([0, 1], [0, 1], ls="--", color=DIAG_COLOR, lw=1.2, label="Perfect calibration")


def draw_bars(ax, *args, **kwargs):
    """``ax.bar(*args, **kwargs)`` on an axes whose limits are fixed (:func:`fixed_limits`)."""
    with fixed_limits(ax):
        return ax.bar(*args, **kwargs)


@contextmanager
def fixed_limits(ax) -> Iterator[None]:
    """Patches added to ``ax`` inside the block leave its data limits as they are, for an axes
    whose limits are fixed (set by the caller before or after): matplotlib grows the data
    limits by every rectangle's extent, which nothing reads while the limits are fixed, at about
    a quarter of the cost of drawing a bar and most of the cost of adding a heatmap's cell
    (``relim()`` recomputes the data limits from the artists should anyone need them). The
    pixels are unchanged."""
    ax._update_patch_limits = _no_limits  # shadows the method on this axes, for the block
    try:
        yield
    finally:
        del ax._update_patch_limits


def _no_limits(patch) -> None:
    return None


def corner_text(ax, text: str) -> None:
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


def draw_legend(ax, below_text: bool, fontsize: int = 9) -> None:
    anchor = (0.0, 0.89) if below_text else (0.0, 1.0)
    ax.legend(loc="upper left", bbox_to_anchor=anchor, fontsize=fontsize, framealpha=0.9)


def check_binning(binning) -> str:
    return check_choice(binning, "binning", ("width", "mass"))


def consistency_band(conf, count, quantiles=BAND_QUANTILES) -> tuple[np.ndarray, np.ndarray]:
    """Consistency band of each bin (Broecker & Smith 2007, "Increasing the reliability of
    reliability diagrams", sec. 4): the ``quantiles`` of the observed frequency that a perfectly
    calibrated model would show in a bin of ``count`` samples with mean confidence ``conf``.

    The frequency is taken as ``Binomial(count, conf) / count`` and its quantiles are exact
    binomial quantiles (the smallest ``k`` with ``P(X <= k) >= q``), not resampled as in
    Broecker & Smith. The samples of a bin have different confidences, so the frequency is
    Poisson-binomial with a variance ``sum_i c_i (1 - c_i) / count^2`` no larger than the
    binomial's ``conf (1 - conf) / count``: the band is slightly conservative (wide). Empty
    bins give NaN.
    """
    conf = np.asarray(conf, dtype=np.float64)
    count = np.asarray(count, dtype=np.int64)
    lo = np.full(conf.shape, np.nan)
    hi = np.full(conf.shape, np.nan)
    for i, (c, n) in enumerate(zip(conf, count, strict=True)):
        if n <= 0:
            continue
        cdf = _binomial_cdf(int(n), min(max(float(c), 0.0), 1.0))
        k = np.searchsorted(cdf, np.asarray(quantiles) - 1e-12, side="left")
        lo[i], hi[i] = k[0] / n, k[1] / n
    return lo, hi


def _binomial_cdf(n: int, p: float) -> np.ndarray:
    """``P(X <= k)`` for ``k = 0..n``, ``X ~ Binomial(n, p)``, from the log-pmf
    ``log C(n, k) + k log p + (n - k) log(1 - p)`` (numpy only: no scipy import for a figure)."""
    if p <= 0.0 or p >= 1.0:
        cdf = np.zeros(n + 1) if p >= 1.0 else np.ones(n + 1)
        cdf[-1] = 1.0
        return cdf
    k = np.arange(n + 1, dtype=np.float64)
    j = k[1:]
    log_choose = np.concatenate([[0.0], np.cumsum(np.log(n - j + 1.0) - np.log(j))])
    log_pmf = log_choose + k * np.log(p) + (n - k) * np.log1p(-p)
    pmf = np.exp(log_pmf - log_pmf.max())
    cdf = np.cumsum(pmf) / pmf.sum()
    cdf[-1] = 1.0
    return cdf


def check_min_count(min_count) -> int:
    if isinstance(min_count, bool) or not isinstance(min_count, int | np.integer) or min_count < 1:
        raise ValueError(f"min_count must be an integer >= 1, got {min_count!r}")
    return int(min_count)


def check_flag(value, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def diagram_pairs(probs, labels, class_index: int | None):
    """The diagram's (prediction, outcome) pairs: top-label confidence and correctness, or
    column ``class_index`` and ``labels == class_index``."""
    if class_index is None:
        return top_label(probs, labels)
    return (
        np.asarray(probs[:, class_index], dtype=np.float64),
        (labels == class_index).astype(np.float64),
    )
