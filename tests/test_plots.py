"""Tests of calbench.plots: each figure shows the binned numbers it claims to show.

The numbers are read back from the matplotlib artists (bar rectangles, line data, text), and
compared with hand-computed values and with calbench.metrics.reliability_bins / ece.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.figure import Figure  # noqa: E402

from calbench import plots  # noqa: E402
from calbench.functional import softmax  # noqa: E402

metrics = pytest.importorskip("calbench.metrics")

# --------------------------------------------------------------------------------------------
# A hand-computed example (3 classes, 6 samples, 10 equal-width bins).
#   top-label confidences 0.95 (correct), 0.95 (wrong), 0.92 (correct) -> bin [0.9, 1]
#                         0.65 (correct), 0.62 (wrong)                 -> bin [0.6, 0.7)
#                         0.45 (wrong)                                 -> bin [0.4, 0.5)
#   bin [0.4,0.5): conf 0.45,  acc 0,   weight 1/6
#   bin [0.6,0.7): conf 0.635, acc 1/2, weight 2/6
#   bin [0.9,1.0]: conf 0.94,  acc 2/3, weight 3/6
#   ECE = 1/6*0.45 + 2/6*0.135 + 3/6*(0.94 - 2/3) = 0.075 + 0.045 + 0.1366667 = 0.2566667
#   overall accuracy 3/6, average confidence 4.54/6
# --------------------------------------------------------------------------------------------
HAND_PROBS = np.array(
    [
        [0.95, 0.03, 0.02],
        [0.95, 0.03, 0.02],
        [0.04, 0.92, 0.04],
        [0.10, 0.25, 0.65],
        [0.62, 0.31, 0.07],
        [0.45, 0.35, 0.20],
    ]
)
HAND_LABELS = np.array([0, 1, 1, 2, 1, 2])
HAND_LEFT = [0.4, 0.6, 0.9]
HAND_CONF = [0.45, 0.635, 0.94]
HAND_ACC = [0.0, 0.5, 2.0 / 3.0]
HAND_WEIGHT = [1 / 6, 2 / 6, 3 / 6]
HAND_ECE = 1 / 6 * 0.45 + 2 / 6 * 0.135 + 3 / 6 * (0.94 - 2 / 3)


def _random_problem(n=400, k=5, seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * scale
    probs = softmax(logits)
    # labels drawn from a sharpened version so the model is miscalibrated
    p_true = softmax(logits * 0.5)
    labels = np.array([rng.choice(k, p=row) for row in p_true])
    return logits, probs, labels


def _container(ax, label):
    found = [c for c in ax.containers if c.get_label() == label]
    assert len(found) == 1, [c.get_label() for c in ax.containers]
    return found[0]


def _heights(container):
    return np.array([r.get_height() for r in container.patches])


def _lefts(container):
    return np.array([r.get_x() for r in container.patches])


def _bottoms(container):
    return np.array([r.get_y() for r in container.patches])


def _texts(ax):
    """Texts on the axes other than the sample counts printed over sparse bins."""
    return [t.get_text() for t in ax.texts if not t.get_text().startswith("n=")]


def test_sparse_bins_are_faded_with_their_count():
    # the hand example's bins hold 1, 2 and 3 samples (< FEW_SAMPLES): faded, count printed;
    # the histogram panel always spans 0-100% of the samples (one scale for every panel)
    fig = plots.reliability_diagram(HAND_PROBS, HAND_LABELS, n_bins=10)
    ax, hax = fig.axes
    outputs = _container(ax, "Outputs")
    assert [r.get_alpha() for r in outputs.patches] == [0.3, 0.3, 0.3]
    assert sorted(t.get_text() for t in ax.texts if t.get_text().startswith("n=")) == [
        "n=1",
        "n=2",
        "n=3",
    ]
    assert hax.get_ylim() == (0.0, 100.0)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    p = np.column_stack([np.full(400, 0.95), np.full(400, 0.05)])
    fig = plots.reliability_diagram(p, y, n_bins=10)
    (bar,) = _container(fig.axes[0], "Outputs").patches
    assert bar.get_alpha() is None and not [t for t in fig.axes[0].texts if "n=" in t.get_text()]


def _line(ax, label):
    found = [ln for ln in ax.lines if ln.get_label() == label]
    assert len(found) == 1, [ln.get_label() for ln in ax.lines]
    return found[0]


def _nonempty(b):
    count = np.asarray(b.count)
    keep = count > 0
    return keep, np.asarray(b.confidence)[keep], np.asarray(b.accuracy)[keep], count[keep]


# --------------------------------------------------------------------------------------------
# reliability_diagram, style="guo"
# --------------------------------------------------------------------------------------------
def test_guo_diagram_hand_example():
    fig = plots.reliability_diagram(HAND_PROBS, HAND_LABELS, n_bins=10, style="guo")
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2
    ax, hax = fig.axes
    outputs = _container(ax, "Outputs")
    gap = _container(ax, "Gap")
    # empty bins draw nothing: 3 non-empty bins -> 3 bars each
    np.testing.assert_allclose(_lefts(outputs), HAND_LEFT, atol=1e-12)
    np.testing.assert_allclose(_heights(outputs), HAND_ACC, atol=1e-12)
    np.testing.assert_allclose([r.get_width() for r in outputs.patches], 0.1, atol=1e-12)
    np.testing.assert_allclose(_bottoms(gap), HAND_ACC, atol=1e-12)
    np.testing.assert_allclose(_bottoms(gap) + _heights(gap), HAND_CONF, atol=1e-12)
    assert _texts(ax) == [f"ECE = {100 * HAND_ECE:.2f}%"] == ["ECE = 25.67%"]
    # histogram: % of samples per bin, vertical lines at accuracy and average confidence
    hist = _container(hax, "% of samples")
    np.testing.assert_allclose(_heights(hist), 100 * np.array(HAND_WEIGHT), atol=1e-12)
    np.testing.assert_allclose(_line(hax, "Accuracy").get_xdata(), 0.5, atol=1e-12)
    np.testing.assert_allclose(_line(hax, "Avg. confidence").get_xdata(), 4.54 / 6, atol=1e-12)
    assert hax.get_shared_x_axes().joined(ax, hax)


def test_guo_diagram_matches_reliability_bins_and_ece():
    _, probs, labels = _random_problem()
    for n_bins in (10, 15):
        fig = plots.reliability_diagram(probs, labels, n_bins=n_bins)
        ax, hax = fig.axes
        b = metrics.reliability_bins(probs, labels, n_bins=n_bins)
        keep, conf, acc, count = _nonempty(b)
        assert keep.sum() < n_bins  # the random problem has empty low-confidence bins
        np.testing.assert_allclose(_heights(_container(ax, "Outputs")), acc, atol=1e-12)
        np.testing.assert_allclose(
            _lefts(_container(ax, "Outputs")), np.asarray(b.edges)[:-1][keep], atol=1e-12
        )
        gap = _container(ax, "Gap")
        np.testing.assert_allclose(_bottoms(gap) + _heights(gap), conf, atol=1e-12)
        np.testing.assert_allclose(
            _heights(_container(hax, "% of samples")), 100 * count / count.sum(), atol=1e-12
        )
        assert _texts(ax) == [f"ECE = {100 * metrics.ece(probs, labels, n_bins=n_bins):.2f}%"]
        top = probs.max(axis=1)
        correct = probs.argmax(axis=1) == labels
        np.testing.assert_allclose(_line(hax, "Accuracy").get_xdata(), correct.mean())
        np.testing.assert_allclose(_line(hax, "Avg. confidence").get_xdata(), top.mean())


def test_guo_diagram_title_and_given_axes():
    fig = Figure()
    ax = fig.add_subplot()
    out = plots.reliability_diagram(HAND_PROBS, HAND_LABELS, ax=ax, title="model x")
    assert out is fig
    assert len(fig.axes) == 2  # histogram appended below the given axes
    assert ax.get_title() == "model x"
    np.testing.assert_allclose(_heights(_container(ax, "Outputs")), HAND_ACC, atol=1e-12)

    fig2 = Figure()
    a1, a2 = fig2.subplots(2, 1)
    assert plots.reliability_diagram(HAND_PROBS, HAND_LABELS, ax=(a1, a2)) is fig2
    assert len(fig2.axes) == 2
    np.testing.assert_allclose(
        _heights(_container(a2, "% of samples")), 100 * np.array(HAND_WEIGHT), atol=1e-12
    )


# --------------------------------------------------------------------------------------------
# reliability_diagram, style="coursework"
# --------------------------------------------------------------------------------------------
def test_coursework_diagram_hand_example():
    fig = plots.reliability_diagram(HAND_PROBS, HAND_LABELS, style="coursework")
    assert len(fig.axes) == 1
    (ax,) = fig.axes
    conf = _container(ax, "Confidence")
    acc = _container(ax, "Accuracy")
    weight = _container(ax, "Bin weight")
    np.testing.assert_allclose(_heights(conf), HAND_CONF, atol=1e-12)
    np.testing.assert_allclose(_heights(acc), HAND_ACC, atol=1e-12)
    np.testing.assert_allclose(_heights(weight), HAND_WEIGHT, atol=1e-12)
    # three side-by-side bars per bin, each a third of the bin wide
    np.testing.assert_allclose(_lefts(conf), HAND_LEFT, atol=1e-12)
    np.testing.assert_allclose(_lefts(acc), np.add(HAND_LEFT, 0.1 / 3), atol=1e-12)
    np.testing.assert_allclose(_lefts(weight), np.add(HAND_LEFT, 0.2 / 3), atol=1e-12)
    assert _texts(ax) == []
    assert ax.get_legend().get_title().get_text() == "ECE = 25.67%"
    # colours of the study's fig. 1b: red confidence, blue accuracy, green weight
    r, g, bl, _ = conf.patches[0].get_facecolor()
    assert r > g and r > bl
    r, g, bl, _ = acc.patches[0].get_facecolor()
    assert bl > r and bl > g
    r, g, bl, _ = weight.patches[0].get_facecolor()
    assert g > r and g > bl


def test_coursework_diagram_matches_reliability_bins():
    _, probs, labels = _random_problem(seed=3)
    fig = plots.reliability_diagram(probs, labels, n_bins=10, style="coursework")
    (ax,) = fig.axes
    keep, conf, acc, count = _nonempty(metrics.reliability_bins(probs, labels, n_bins=10))
    np.testing.assert_allclose(_heights(_container(ax, "Accuracy")), acc, atol=1e-12)
    np.testing.assert_allclose(_heights(_container(ax, "Confidence")), conf, atol=1e-12)
    np.testing.assert_allclose(_heights(_container(ax, "Bin weight")), count / 400, atol=1e-12)
    expected = plots.format_ece(metrics.ece(probs, labels, n_bins=10))
    assert ax.get_legend().get_title().get_text() == expected


def test_mass_binning_bars_span_their_bins():
    _, probs, labels = _random_problem(seed=6)
    fig = plots.reliability_diagram(probs, labels, n_bins=8, binning="mass")
    ax = fig.axes[0]
    b = metrics.reliability_bins(probs, labels, n_bins=8, binning="mass")
    edges = np.array(b.edges)
    assert edges[0] == 0.0
    edges[0] = probs.max(axis=1).min()  # the first bar starts at the smallest confidence
    outputs = _container(ax, "Outputs")
    np.testing.assert_allclose(_lefts(outputs), edges[:-1], atol=1e-12)
    widths = [r.get_width() for r in outputs.patches]
    np.testing.assert_allclose(widths, np.diff(np.minimum(edges, 1.0)), atol=1e-12)
    assert len(set(np.round(widths, 6))) > 1  # unequal bins
    np.testing.assert_allclose(_heights(outputs), b.accuracy, atol=1e-12)
    assert _texts(ax) == [plots.format_ece(metrics.ece(probs, labels, n_bins=8, binning="mass"))]
    # equal-mass bins hold equal counts: 400 samples / 8 bins
    np.testing.assert_allclose(_heights(_container(fig.axes[1], "% of samples")), 12.5)
    # the curve and the grid use the same bins
    fig = plots.reliability_curve({"m": probs}, labels, n_bins=8, binning="mass")
    line = [ln for ln in fig.axes[0].lines if ln.get_label().startswith("m (")][0]
    np.testing.assert_allclose(line.get_xdata(), b.confidence, atol=1e-12)
    fig = plots.reliability_grid({"m": probs}, labels, n_bins=8, binning="mass")
    np.testing.assert_allclose(_heights(_container(fig.axes[0], "Outputs")), b.accuracy)


def test_format_ece():
    assert plots.format_ece(0.0) == "ECE = 0.00%"
    assert plots.format_ece(0.123456) == "ECE = 12.35%"
    assert plots.format_ece(1.0) == "ECE = 100.00%"


def test_all_samples_in_one_bin_draws_one_bar():
    probs = np.tile([0.97, 0.02, 0.01], (8, 1))
    labels = np.array([0] * 6 + [1, 2])
    fig = plots.reliability_diagram(probs, labels)
    ax = fig.axes[0]
    assert len(_container(ax, "Outputs").patches) == 1
    np.testing.assert_allclose(_heights(_container(ax, "Outputs")), [0.75])
    assert _texts(ax) == ["ECE = 22.00%"]  # |0.75 - 0.97|


# --------------------------------------------------------------------------------------------
# classwise_reliability_diagram
# --------------------------------------------------------------------------------------------
def test_classwise_diagram_hand_example():
    # column 1 of HAND_PROBS: 0.03 0.03 0.92 0.25 0.31 0.35; positives (label 1): rows 1, 2, 4
    #   bin [0.0,0.1): 0.03 (neg), 0.03 (pos)  -> conf 0.03, freq 1/2, weight 2/6
    #   bin [0.2,0.3): 0.25 (neg)              -> conf 0.25, freq 0,   weight 1/6
    #   bin [0.3,0.4): 0.31 (pos), 0.35 (neg)  -> conf 0.33, freq 1/2, weight 2/6
    #   bin [0.9,1.0]: 0.92 (pos)              -> conf 0.92, freq 1,   weight 1/6
    # class-1 ECE = (2*0.47 + 0.25 + 2*0.17 + 0.08) / 6 = 1.61 / 6 = 0.268333
    for style in ("guo", "coursework"):
        fig = plots.classwise_reliability_diagram(
            HAND_PROBS, HAND_LABELS, class_index=1, style=style
        )
        ax = fig.axes[0]
        assert len(fig.axes) == (2 if style == "guo" else 1)
        acc_label = "Outputs" if style == "guo" else "Positive frequency"
        bars = _container(ax, acc_label)
        shift = 0.0 if style == "guo" else 0.1 / 3  # coursework: the middle of three bars
        np.testing.assert_allclose(_lefts(bars), np.add([0.0, 0.2, 0.3, 0.9], shift), atol=1e-12)
        np.testing.assert_allclose(_heights(bars), [0.5, 0.0, 0.5, 1.0], atol=1e-12)
        ece_text = _texts(ax) if style == "guo" else [ax.get_legend().get_title().get_text()]
        assert ece_text == ["ECE = 26.83%"]
        assert ax.get_title() == "Class 1 vs rest"


def test_classwise_diagram_matches_reliability_bins():
    _, probs, labels = _random_problem(seed=5)
    for j in range(probs.shape[1]):
        fig = plots.classwise_reliability_diagram(probs, labels, class_index=j, style="coursework")
        ax = fig.axes[0]
        b = metrics.reliability_bins(probs, labels, n_bins=10, class_index=j)
        keep, conf, acc, count = _nonempty(b)
        np.testing.assert_allclose(_heights(_container(ax, "Positive frequency")), acc, atol=1e-12)
        np.testing.assert_allclose(_heights(_container(ax, "Confidence")), conf, atol=1e-12)
        # class-j ECE computed independently from the raw column
        col, pos = probs[:, j], (labels == j).astype(float)
        idx = np.minimum((col * 10).astype(int), 9)
        expected = sum(
            abs(pos[idx == m].mean() - col[idx == m].mean()) * np.sum(idx == m) / len(col)
            for m in range(10)
            if np.any(idx == m)
        )
        assert ax.get_legend().get_title().get_text() == plots.format_ece(expected)


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
# reliability_grid
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("style,per_panel", [("guo", 2), ("coursework", 1)])
def test_reliability_grid(style, per_panel):
    logits, probs, labels = _random_problem(seed=2)
    by_method = {f"T={t}": softmax(logits / t) for t in (0.5, 1.0, 1.5, 2.0, 3.0)}
    fig = plots.reliability_grid(by_method, labels, n_bins=10, style=style)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == per_panel * len(by_method)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == len(by_method)
    acc_label = "Outputs" if style == "guo" else "Accuracy"
    for ax, (name, p) in zip(panels, by_method.items(), strict=True):
        assert (
            ax.get_title()
            == f"{name}: {plots.format_ece(metrics.ece(p, labels, n_bins=10))} (10 bins)"
        )
        _, _, acc, _ = _nonempty(metrics.reliability_bins(p, labels, n_bins=10))
        np.testing.assert_allclose(_heights(_container(ax, acc_label)), acc, atol=1e-12)
        assert _texts(ax) == []  # ECE in the title, not repeated in the corner or legend
        legend = ax.get_legend()
        assert legend is None or legend.get_title().get_text() == ""
    # 5 panels in 4 columns -> two rows of panels
    fig.draw_without_rendering()
    rows = {round(ax.get_position().y0, 3) for ax in panels}
    assert len(rows) == 2


def test_reliability_grid_ncols():
    fig = plots.reliability_grid(
        {"a": HAND_PROBS, "b": HAND_PROBS, "c": HAND_PROBS},
        HAND_LABELS,
        ncols=1,
        style="coursework",
    )
    fig.draw_without_rendering()
    xs = {round(ax.get_position().x0, 3) for ax in fig.axes}
    assert len(xs) == 1 and len(fig.axes) == 3


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


# --------------------------------------------------------------------------------------------
# save_figure
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "suffix,magic", [(".png", b"\x89PNG\r\n\x1a\n"), (".pdf", b"%PDF"), (".svg", b"<?xml")]
)
def test_save_figure_formats(tmp_path, suffix, magic):
    fig = plots.reliability_diagram(HAND_PROBS, HAND_LABELS)
    path = tmp_path / "sub" / f"diagram{suffix}"
    out = plots.save_figure(fig, path)
    assert out == path
    assert path.read_bytes().startswith(magic)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temp file left


def test_save_figure_error_leaves_nothing(tmp_path, monkeypatch):
    fig = plots.reliability_diagram(HAND_PROBS, HAND_LABELS)
    path = tmp_path / "diagram.png"

    def boom(*args, **kwargs):
        fname = args[0]
        with open(fname, "wb") as fh:  # a partial write, then a failure
            fh.write(b"\x89PNG partial")
        raise RuntimeError("renderer failed")

    monkeypatch.setattr(fig, "savefig", boom)
    with pytest.raises(RuntimeError, match="renderer failed"):
        plots.save_figure(fig, path)
    assert list(tmp_path.iterdir()) == []


def test_save_figure_replaces_existing_file(tmp_path):
    path = tmp_path / "d.png"
    path.write_bytes(b"old")
    plots.save_figure(plots.reliability_diagram(HAND_PROBS, HAND_LABELS), path)
    assert path.read_bytes().startswith(b"\x89PNG")


def test_save_figure_bad_input(tmp_path):
    fig = plots.reliability_diagram(HAND_PROBS, HAND_LABELS)
    with pytest.raises(ValueError, match="suffix"):
        plots.save_figure(fig, tmp_path / "diagram.xyz")
    with pytest.raises(ValueError, match="suffix"):
        plots.save_figure(fig, tmp_path / "diagram")
    with pytest.raises(ValueError, match="Figure"):
        plots.save_figure("not a figure", tmp_path / "diagram.png")
    assert list(tmp_path.iterdir()) == []


def test_save_figure_closes_pyplot_figure(tmp_path):
    import matplotlib.pyplot as plt

    fig = plt.figure()
    plots.reliability_diagram(HAND_PROBS, HAND_LABELS, ax=fig.add_subplot())
    assert plt.fignum_exists(fig.number)
    plots.save_figure(fig, tmp_path / "d.png")
    assert not plt.fignum_exists(fig.number)


# --------------------------------------------------------------------------------------------
# bad inputs: one-line ValueError
# --------------------------------------------------------------------------------------------
def _one_line(excinfo):
    assert "\n" not in str(excinfo.value)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: plots.reliability_diagram(np.log(HAND_PROBS), HAND_LABELS), "logits"),
        (lambda: plots.reliability_diagram(HAND_PROBS, HAND_LABELS[:-1]), "one label per row"),
        (lambda: plots.reliability_diagram(HAND_PROBS, HAND_LABELS + 1), r"\[0, 2\]"),
        (lambda: plots.reliability_diagram(HAND_PROBS, HAND_LABELS, n_bins=0), "n_bins"),
        (lambda: plots.reliability_diagram(HAND_PROBS, HAND_LABELS, style="bars"), "style"),
        (lambda: plots.reliability_diagram(HAND_PROBS, HAND_LABELS, binning="q"), "binning"),
        (lambda: plots.reliability_curve({"m": HAND_PROBS}, HAND_LABELS, binning="q"), "binning"),
        (lambda: plots.reliability_diagram(HAND_PROBS, HAND_LABELS, ax="ax"), "Axes"),
        (
            lambda: plots.reliability_diagram(
                HAND_PROBS, HAND_LABELS, style="coursework", ax=tuple(Figure().subplots(1, 2))
            ),
            "pair",
        ),
        (lambda: plots.reliability_diagram(HAND_PROBS, HAND_LABELS, title=3), "title"),
        (lambda: plots.reliability_diagram(HAND_PROBS[0], HAND_LABELS[:1]), "2-D"),
        (lambda: plots.classwise_reliability_diagram(HAND_PROBS, HAND_LABELS, 3), "class_index"),
        (lambda: plots.classwise_reliability_diagram(HAND_PROBS, HAND_LABELS, -1), "class_index"),
        (lambda: plots.classwise_reliability_diagram(HAND_PROBS, HAND_LABELS, 1.0), "class_index"),
        (lambda: plots.reliability_curve({}, HAND_LABELS), "non-empty dict"),
        (lambda: plots.reliability_curve([HAND_PROBS], HAND_LABELS), "dict"),
        (lambda: plots.reliability_curve({"m": HAND_PROBS * 2}, HAND_LABELS), "method 'm'"),
        (lambda: plots.reliability_grid({}, HAND_LABELS), "non-empty dict"),
        (lambda: plots.reliability_grid({"m": HAND_PROBS}, HAND_LABELS, ncols=0), "ncols"),
        (lambda: plots.reliability_grid({"m": HAND_PROBS}, HAND_LABELS, style="x"), "style"),
        (lambda: plots.reliability_grid({"m": HAND_PROBS}, HAND_LABELS[:2]), "method 'm'"),
        (lambda: plots.ece_vs_temperature(HAND_PROBS, HAND_LABELS, [1.0, 0.0]), "> 0"),
        (lambda: plots.ece_vs_temperature(HAND_PROBS, HAND_LABELS, []), "non-empty"),
        (lambda: plots.ece_vs_temperature(HAND_PROBS, HAND_LABELS, [[1.0]]), "1-D"),
        (lambda: plots.ece_vs_temperature(HAND_PROBS, HAND_LABELS, [np.nan]), "finite"),
        (lambda: plots.ece_vs_temperature(HAND_PROBS, HAND_LABELS, ["a"]), "numbers"),
        (lambda: plots.ece_vs_temperature(HAND_PROBS * np.inf, HAND_LABELS, [1.0]), "NaN"),
        (
            lambda: plots.binary_calibration_map(HAND_PROBS, HAND_LABELS, {"i": softmax}),
            "binary",
        ),
        (
            lambda: plots.binary_calibration_map([0.2, 1.3], [0, 1], {"i": softmax}),
            "scores",
        ),
        (lambda: plots.binary_calibration_map([0.2, 0.7], [0, 2], {"i": softmax}), "labels"),
        (lambda: plots.binary_calibration_map([0.2, 0.7], [0, 1], {"i": 3}), "not callable"),
        (lambda: plots.binary_calibration_map([0.2, 0.7], [0, 1], {}), "non-empty dict"),
        (
            lambda: plots.binary_calibration_map([0.2, 0.7], [0, 1], {"i": lambda z: z}),
            "calibrator 'i'",
        ),
        (
            lambda: plots.binary_calibration_map([0.2, 0.7], [0, 1], {"i": lambda z: z[:3, 0]}),
            "returned shape",
        ),
        (
            lambda: plots.binary_calibration_map([0.2, 0.7], [0, 1], {"i": softmax}, n_points=1),
            "n_points",
        ),
    ],
)
def test_bad_inputs_raise_one_line_value_error(call, match):
    with pytest.raises(ValueError, match=match) as excinfo:
        call()
    _one_line(excinfo)


def test_import_is_cheap():
    code = (
        "import sys, calbench.plots; "
        "heavy = [m for m in ('matplotlib', 'torch', 'scipy', 'sklearn') if m in sys.modules]; "
        "print(heavy); assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60)


def test_critical_difference_diagram_groups_and_svg():
    ranks = {"A": 1.9, "B": 2.1, "C": 2.4, "D": 3.0, "E": 3.6}
    fig = plots.critical_difference_diagram(ranks, 1.2, "ECE", n_models=14)
    (ax,) = fig.axes
    texts = {t.get_text() for t in ax.texts}
    assert {"A (1.90)", "E (3.60)", "CD = 1.20"} <= texts
    assert ax.get_title() == "ECE (average ranks over 14 models)"
    # thick lines join the maximal groups within CD: A..D (3.0 - 1.9 < 1.2) and D..E
    thick = sorted(
        (round(line.get_xdata()[0] + 0.03, 2), round(line.get_xdata()[1] - 0.03, 2))
        for line in ax.lines
        if line.get_linewidth() == 3
    )
    assert thick == [(1.9, 3.0), (3.0, 3.6)]
    svg = plots.figure_svg(fig)
    again = plots.figure_svg(plots.critical_difference_diagram(ranks, 1.2, "ECE", n_models=14))
    assert svg.startswith(b"<?xml") and svg == again  # deterministic bytes
    with pytest.raises(ValueError, match="cd"):
        plots.critical_difference_diagram(ranks, 0.0)
    with pytest.raises(ValueError, match="finite"):
        plots.critical_difference_diagram({"A": float("nan")}, 1.0)
