"""Tests of calbench.plots.curves: reliability curves, ECE vs temperature and binary calibration
maps against hand-computed values and calbench.metrics."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.figure import Figure  # noqa: E402

from calbench import plots  # noqa: E402
from calbench.functional import softmax  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from plot_checks import (  # noqa: E402
    HAND_ACC,
    HAND_CONF,
    HAND_LABELS,
    HAND_PROBS,
    _line,
    _nonempty,
    _random_problem,
)

metrics = pytest.importorskip("calbench.metrics")


# --------------------------------------------------------------------------------------------
# reliability_curve
# --------------------------------------------------------------------------------------------
def test_reliability_curve_lines_match_bins():
    logits, probs, labels = _random_problem(seed=1)
    by_name = {"uncalibrated": probs, "T=2": softmax(logits / 2.0), "T=3": softmax(logits / 3.0)}
    fig = plots.reliability_curve(by_name, labels, n_bins=10)
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    (ax,) = fig.axes
    diag = _line(ax, "Perfect calibration")
    np.testing.assert_allclose(diag.get_xdata(), [0, 1])
    np.testing.assert_allclose(diag.get_ydata(), [0, 1])
    assert len(ax.lines) == 1 + len(by_name)
    for name, p in by_name.items():
        label = f"{name} ({plots.format_ece(metrics.ece(p, labels, n_bins=10))})"
        line = _line(ax, label)
        keep, conf, acc, _ = _nonempty(metrics.reliability_bins(p, labels, n_bins=10))
        np.testing.assert_allclose(line.get_xdata(), conf, atol=1e-12)
        np.testing.assert_allclose(line.get_ydata(), acc, atol=1e-12)
        assert line.get_marker() not in (None, "None", "")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("T=2 (ECE = ") for t in legend)


def test_reliability_curve_hand_example_and_ax():
    fig = Figure()
    ax = fig.add_subplot()
    assert plots.reliability_curve({"m": HAND_PROBS}, HAND_LABELS, ax=ax, title="t") is fig
    line = _line(ax, "m (ECE = 25.67%)")
    np.testing.assert_allclose(line.get_xdata(), HAND_CONF, atol=1e-12)
    np.testing.assert_allclose(line.get_ydata(), HAND_ACC, atol=1e-12)
    assert ax.get_title() == "t"


# --------------------------------------------------------------------------------------------
# ece_vs_temperature
# --------------------------------------------------------------------------------------------
def test_ece_vs_temperature_known_minimum():
    # binary logits [0, z] for every sample, 3 of 4 correct: softmax(z / T) gives top-label
    # confidence sigmoid(z / T) (> 0.5), all samples in one bin, so ECE(T) = |0.75 - sigmoid(z/T)|,
    # which vanishes at T* = z / log(3).
    z = 2.0
    logits = np.tile([0.0, z], (40, 1))
    labels = np.array([1, 1, 1, 0] * 10)
    t_star = z / np.log(3.0)
    temps = np.array([0.5, 1.0, t_star, 2.5, 4.0])
    fig = plots.ece_vs_temperature(logits, labels, temps, n_bins=15)
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    data = fig.calbench_data
    expected = np.abs(0.75 - 1.0 / (1.0 + np.exp(-z / temps)))
    np.testing.assert_allclose(data["ece"], expected, atol=1e-12)
    assert data["best_index"] == 2
    assert data["best_temperature"] == pytest.approx(t_star)
    np.testing.assert_array_equal(data["temperatures"], temps)
    (ax,) = fig.axes
    curve = _line(ax, "ECE")
    np.testing.assert_allclose(curve.get_xdata(), temps)
    np.testing.assert_allclose(curve.get_ydata(), 100 * expected, atol=1e-10)
    best = [ln for ln in ax.lines if ln.get_label().startswith("min: T = ")]
    assert len(best) == 1
    np.testing.assert_allclose(best[0].get_xdata(), [t_star])
    np.testing.assert_allclose(best[0].get_ydata(), [0.0], atol=1e-10)


def test_ece_vs_temperature_matches_metric():
    logits, _, labels = _random_problem(seed=4, n=300)
    temps = np.linspace(0.5, 4.0, 8)
    fig = plots.ece_vs_temperature(logits.astype(np.float32), labels, temps)
    expected = [
        metrics.ece(softmax(logits.astype(np.float32) / t), labels, n_bins=15) for t in temps
    ]
    np.testing.assert_allclose(fig.calbench_data["ece"], expected, rtol=1e-6, atol=1e-9)
    assert fig.calbench_data["best_index"] == int(np.argmin(expected))
    fig2 = Figure()
    ax = fig2.add_subplot()
    assert plots.ece_vs_temperature(logits, labels, [1.0, 2.0], ax=ax, title="x") is fig2
    assert ax.get_title() == "x"


# --------------------------------------------------------------------------------------------
# binary_calibration_map
# --------------------------------------------------------------------------------------------
def _binary_problem(n=600, seed=0):
    rng = np.random.default_rng(seed)
    scores = rng.beta(2, 2, size=n)
    # true P(y=1 | s) = s^3 / (s^3 + (1-s)^3): the scores are under-confident
    p_true = scores**3 / (scores**3 + (1 - scores) ** 3)
    labels = (rng.random(n) < p_true).astype(int)
    return scores, labels


def test_calibration_map_known_maps():
    scores, labels = _binary_problem()

    def identity(logits):  # softmax of [0, logit(x)] is [1 - x, x]
        return softmax(logits)

    def sharpen(logits):  # temperature 1/2 on the logit: x -> x^2 / (x^2 + (1 - x)^2)
        return softmax(2.0 * logits)[:, 1]  # (M,) output is accepted too

    fig = plots.binary_calibration_map(scores, labels, {"identity": identity, "sharpen": sharpen})
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    (ax,) = fig.axes
    ident = _line(ax, "identity")
    x = ident.get_xdata()
    assert x.min() == pytest.approx(0.0, abs=1e-5) and x.max() == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(ident.get_ydata(), x, atol=1e-12)
    sharp = _line(ax, "sharpen")
    np.testing.assert_allclose(sharp.get_ydata(), x**2 / (x**2 + (1 - x) ** 2), atol=1e-12)
    # empirical frequencies: dots at (C_m^1, A_m^1) of the non-empty bins
    dots = ax.collections[0].get_offsets()
    b = metrics.reliability_bins(
        np.stack([1 - scores, scores], 1), labels, n_bins=10, class_index=1
    )
    _, conf, acc, _ = _nonempty(b)
    np.testing.assert_allclose(dots[:, 0], conf, atol=1e-12)
    np.testing.assert_allclose(dots[:, 1], acc, atol=1e-12)


def test_calibration_map_isotonic_wrapper_and_2d_scores():
    from sklearn.isotonic import IsotonicRegression

    scores, labels = _binary_problem(seed=1)
    iso = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(scores, labels)

    def iso_map(logits):
        p1 = iso.predict(softmax(logits)[:, 1])
        return np.stack([1 - p1, p1], axis=1)

    probs2 = np.stack([1 - scores, scores], axis=1)
    fig = plots.binary_calibration_map(probs2, labels, {"isotonic": iso_map}, n_points=101)
    line = _line(fig.axes[0], "isotonic")
    x = line.get_xdata()
    assert len(x) == 101
    np.testing.assert_allclose(line.get_ydata(), iso.predict(x), atol=1e-12)
    assert np.all(np.diff(line.get_ydata()) >= 0)


def test_calibration_map_with_calbench_calibrators():
    calibrators = pytest.importorskip("calbench.calibrators")
    scores, labels = _binary_problem(seed=2)
    logits = np.stack([np.zeros_like(scores), np.log(scores) - np.log1p(-scores)], axis=1)
    fitted = {}
    for name in ("ts", "iso", "hist", "platt"):
        if name not in calibrators.REGISTRY:
            continue
        fitted[name] = calibrators.get_calibrator(name).fit(logits, labels)
    if not fitted:
        pytest.skip("no calbench calibrators registered yet")
    fig = plots.binary_calibration_map(scores, labels, fitted, n_points=201)
    ax = fig.axes[0]
    x = _line(ax, next(iter(fitted))).get_xdata()
    grid_logits = np.stack([np.zeros_like(x), np.log(x) - np.log1p(-x)], axis=1)
    for name, cal in fitted.items():
        np.testing.assert_allclose(
            _line(ax, name).get_ydata(), cal.predict_proba(grid_logits)[:, 1], atol=1e-12
        )
    if "ts" in fitted:
        # under-confident scores: the fitted temperature sharpens, the map is steeper than x
        y = _line(ax, "ts").get_ydata()
        assert y[x > 0.7].mean() > x[x > 0.7].mean()
