"""Curves on one axis: reliability curves of several calibrators, ECE against temperature
(Guo et al. 2017, section 4.2) and calibration maps of a binary problem (the main study's
fig. 2)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from calbench._checks import (
    check_labels,
    check_logits_labels,
    check_n_bins,
    check_probs,
    check_probs_labels,
)
from calbench.metrics.binning import DIAGRAM_BINS, ECE_BINS
from calbench.metrics.ece import calibration_error_1d
from calbench.plots._base import (
    ACC_COLOR,
    DIAG_COLOR,
    GAP_COLOR,
    MAP_EPS,
    bare_figure,
    bin_arrays,
    check_ax,
    check_binning,
    check_mapping,
    check_title,
    diagram_bins,
    diagram_ece,
    format_ece,
    root_figure,
    setup_unit_axes,
)


def reliability_curve(
    probs_by_name: Mapping[str, Any],
    labels,
    n_bins: int = DIAGRAM_BINS,
    title=None,
    ax=None,
    binning: str = "width",
):
    """Reliability curves ``(conf(B_m), acc(B_m))`` of several calibrators on one axis.

    The study's fig. 1 (a) ("reliability plot", eq. 4-5) for each entry of ``probs_by_name``
    (``{name: probs (N, K)}``, all against the same ``labels``): a line through the non-empty
    bins with a marker at each, the diagonal, and each method's ECE (same bins) in the legend.
    """
    check_mapping(probs_by_name, "probs_by_name")
    n_bins = check_n_bins(n_bins)
    binning = check_binning(binning)
    title = check_title(title)
    ax = check_ax(ax)
    checked = {}
    for name, probs in probs_by_name.items():
        try:
            checked[name] = check_probs_labels(probs, labels)
        except ValueError as exc:
            raise ValueError(f"method {name!r}: {exc}") from None
    if ax is None:
        fig = bare_figure((5.0, 4.8))
        ax = fig.add_subplot()
    else:
        fig = root_figure(ax)
    setup_unit_axes(ax, "Confidence", "Accuracy")
    markers = "osD^vP*Xh<>p"
    for i, (name, (p, y)) in enumerate(checked.items()):
        b = diagram_bins(p, y, n_bins, binning=binning)
        _, _, conf, acc, count = bin_arrays(b)
        keep = count > 0
        ax.plot(
            conf[keep],
            acc[keep],
            marker=markers[i % len(markers)],
            ms=5,
            lw=1.5,
            label=f"{name} ({format_ece(diagram_ece(p, y, n_bins, binning=binning))})",
        )
    ax.set_aspect("equal")
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    if title is not None:
        ax.set_title(title)
    return fig


def ece_vs_temperature(logits, labels, temperatures, n_bins: int = ECE_BINS, title=None, ax=None):
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
    title = check_title(title)
    ax = check_ax(ax)
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
        fig = bare_figure((5.0, 3.8))
        ax = fig.add_subplot()
    else:
        fig = root_figure(ax)
    ax.plot(t, 100.0 * values, marker="o", ms=3.5, lw=1.5, color=ACC_COLOR, label="ECE")
    ax.plot(
        [t[best]],
        [100.0 * values[best]],
        marker="*",
        ms=14,
        ls="none",
        color=GAP_COLOR,
        label=f"min: T = {t[best]:.3g}, {format_ece(values[best])}",
    )
    if t.min() <= 1.0 <= t.max():
        ax.axvline(1.0, color=DIAG_COLOR, ls=":", lw=1.0, label="T = 1 (uncalibrated)")
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
    n_bins: int = DIAGRAM_BINS,
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
    y = check_labels(labels, p.shape[0], 2)
    check_mapping(calibrators, "calibrators")
    n_bins = check_n_bins(n_bins)
    if isinstance(n_points, bool) or not isinstance(n_points, int | np.integer) or n_points < 2:
        raise ValueError(f"n_points must be an integer >= 2, got {n_points!r}")
    title = check_title(title)
    ax = check_ax(ax)

    x = np.linspace(MAP_EPS, 1.0 - MAP_EPS, int(n_points))
    logits = np.stack([np.zeros_like(x), np.log(x) - np.log1p(-x)], axis=1)
    curves = {name: _map_values(name, cal, logits) for name, cal in calibrators.items()}

    if ax is None:
        fig = bare_figure((5.0, 4.8))
        ax = fig.add_subplot()
    else:
        fig = root_figure(ax)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(-0.02, 1.02)
    ax.plot([0, 1], [0, 1], ls="--", color=DIAG_COLOR, lw=1.2, label="Identity (uncalibrated)")
    for name, values in curves.items():
        ax.plot(x, values, lw=1.8, label=name)
    b = diagram_bins(p, y, n_bins, class_index=1)
    _, _, conf, acc, count = bin_arrays(b)
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
