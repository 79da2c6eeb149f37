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
(:data:`calbench.metrics.DIAGRAM_BINS`) and tabulates binned metrics with 15
(:data:`calbench.metrics.ECE_BINS`; replication notes, section 2.3).

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

The reliability diagrams and grids show their uncertainty (on by default): each bin's
consistency band (Broecker & Smith 2007: the 5-95% range of the frequency a calibrated model
would show, :func:`consistency_band`), the kernel-smoothed reliability curve of Blasiok &
Nakkiran 2023 with a pointwise 95% bootstrap band, and bins with fewer than ``min_count`` (20) samples
faded with their count. The grid keeps the calibrators in the given order and marks a
``highlight`` panel in place.

The binned figures also take ``binning="mass"`` (equal-mass bins, the ECE variant of
Karandikar et al. 2021 and Nixon et al. 2019); bars then span their unequal bins.

Modules: :mod:`calbench.plots.reliability` (diagrams), :mod:`calbench.plots.grid` (one panel
per calibrator), :mod:`calbench.plots.curves` (reliability curves, ECE vs temperature,
calibration maps), :mod:`calbench.plots.ranks` (critical-difference diagram) and
:mod:`calbench.plots.save` (writing); every public name is importable from ``calbench.plots``.
matplotlib is imported only when a figure is drawn. The reliability diagrams and grids drawn in
their own figure have a fixed layout computed from their shape (:mod:`calbench.plots._layout`;
constrained layout cost more than the drawing); the other figures use constrained layout.
"""

from __future__ import annotations

from calbench.plots._base import FEW_SAMPLES as FEW_SAMPLES
from calbench.plots._base import STYLES, format_ece
from calbench.plots._base import consistency_band as consistency_band
from calbench.plots.curves import binary_calibration_map, ece_vs_temperature, reliability_curve
from calbench.plots.grid import reliability_grid
from calbench.plots.ranks import critical_difference_diagram as critical_difference_diagram
from calbench.plots.reliability import classwise_reliability_diagram, reliability_diagram
from calbench.plots.save import figure_svg as figure_svg
from calbench.plots.save import save_figure, save_new_figure

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
    "save_new_figure",
]
