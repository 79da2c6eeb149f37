"""Temperature sweep (Guo et al. 2017, section 4.2): reliability diagrams of ``softmax(z / T)``
for fixed temperatures and the ECE-vs-temperature curve, drawn with :mod:`calbench.plots`."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from calbench._checks import check_logits_labels
from calbench.functional import softmax
from calbench.metrics import ece
from calbench.metrics.binning import ECE_BINS


def temperature_sweep(
    logits: np.ndarray,
    labels: np.ndarray,
    *,
    model: str,
    temperatures: Sequence[float] = (0.5, 1.0, 1.5, 2.0),
    curve: Sequence[float] | None = None,
    fitted_temperature: float | None = None,
    n_bins: int = ECE_BINS,
    style: str = "guo",
):
    """Reliability diagrams of ``softmax(logits / T)`` for each of ``temperatures`` (one panel
    each, :func:`calbench.plots.reliability_grid`) and the ECE-vs-temperature curve over
    ``curve`` (default ``linspace(0.25, 4, 76)``, :func:`calbench.plots.ece_vs_temperature`), with
    the temperature fitted by temperature scaling marked when given.

    Returns ``(grid_figure, curve_figure, rows)``; ``rows``
    (:data:`calbench.results.SWEEP_COLUMNS`) hold the ECE (fraction, ``n_bins`` bins) at every
    diagram temperature (``kind="diagram"``), every curve point (``"curve"``) and the fitted one
    (``"fitted"``).
    """
    from calbench.plots import ece_vs_temperature, reliability_grid  # lazy: code inputs

    z, y = check_logits_labels(logits, labels)
    temps = [float(t) for t in temperatures]
    if not temps or any(not (math.isfinite(t) and t > 0) for t in temps):
        raise ValueError(f"temperatures must be finite numbers > 0, got {list(temperatures)!r}")
    grid_t = np.linspace(0.25, 4.0, 76) if curve is None else np.asarray(curve, dtype=np.float64)
    z64 = z.astype(np.float64)
    probs = {f"T = {t:g}": softmax(z64 / t) for t in temps}
    grid = reliability_grid(
        probs,
        y,
        n_bins=n_bins,
        style=style,
        ncols=len(probs),
        title=f"{model}: reliability of softmax(z / T), test part",
    )
    fig = ece_vs_temperature(z, y, grid_t, n_bins=n_bins, title=f"{model}: ECE vs temperature")
    rows = [
        {"model": model, "kind": "diagram", "temperature": t, "ece": ece(p, y, n_bins)}
        for t, p in zip(temps, probs.values(), strict=True)
    ]
    data = fig.calbench_data
    rows += [
        {"model": model, "kind": "curve", "temperature": float(t), "ece": float(e)}
        for t, e in zip(data["temperatures"], data["ece"], strict=True)
    ]
    if fitted_temperature is not None:
        t = float(fitted_temperature)
        e = ece(softmax(z64 / t), y, n_bins)
        ax = fig.axes[0]
        ax.axvline(t, color="#2ca02c", ls="--", lw=1.0, label=f"fitted T = {t:.3f}")
        ax.legend(fontsize=9, framealpha=0.9)
        rows.append({"model": model, "kind": "fitted", "temperature": t, "ece": e})
    return grid, fig, rows
