"""Tests of calbench.plots.reliability: each diagram shows the binned numbers it claims to show,
read back from the artists and compared with hand-computed values and with
calbench.metrics.reliability_bins / ece."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.figure import Figure  # noqa: E402

from calbench import plots  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from plot_checks import (  # noqa: E402
    HAND_ACC,
    HAND_CONF,
    HAND_ECE,
    HAND_LABELS,
    HAND_LEFT,
    HAND_PROBS,
    HAND_WEIGHT,
    _bottoms,
    _container,
    _heights,
    _lefts,
    _line,
    _nonempty,
    _random_problem,
    _texts,
)

metrics = pytest.importorskip("calbench.metrics")


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


def _ece_text(ax):
    """The ECE a diagram in its own figure shows: the last line of its title, without the bin
    count (nothing inside the axes names it)."""
    import re

    assert not any(t.get_text().startswith("ECE") for t in ax.texts)
    assert ax.get_legend() is None  # the legend is below the axes
    line = ax.get_title().split("\n")[-1]
    assert re.search(r" \(\d+ bins\)$", line), line
    return [re.sub(r" \(\d+ bins\)$", "", line)]


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
    assert _ece_text(ax) == [f"ECE = {100 * HAND_ECE:.2f}%"] == ["ECE = 25.67%"]
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
        assert _ece_text(ax) == [f"ECE = {100 * metrics.ece(probs, labels, n_bins=n_bins):.2f}%"]
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
    assert _ece_text(ax) == ["ECE = 25.67%"]
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
    assert _ece_text(ax) == [expected]


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
    assert _ece_text(ax) == [plots.format_ece(metrics.ece(probs, labels, n_bins=8, binning="mass"))]
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
    assert _ece_text(ax) == ["ECE = 22.00%"]  # |0.75 - 0.97|


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
        ece_text = _ece_text(ax)
        assert ece_text == ["ECE = 26.83%"]
        assert ax.get_title().split("\n")[0] == "Class 1 vs rest"


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
        assert _ece_text(ax) == [plots.format_ece(expected)]


# --------------------------------------------------------------------------------------------
# uncertainty: consistency bands, smoothed curve, sparse bins, legibility
# --------------------------------------------------------------------------------------------
from calbench.plots._base import consistency_band  # noqa: E402
from calbench.plots.reliability import (  # noqa: E402
    BAND_LABEL,
    SMOOTH_BAND_GID,
    SMOOTH_BOOTSTRAP,
    SMOOTH_LABEL,
    SMOOTH_LEVEL,
    SPARSE_ALPHA,
)


def test_consistency_band_hand_example():
    # bins of the hand example: (count, mean confidence) = (1, 0.45), (2, 0.635), (3, 0.94)
    #   n = 1: P(X = 0) = 0.55 >= 0.05 -> q05 = 0; P(X <= 0) < 0.95 -> q95 = 1  -> [0, 1]
    #   n = 2: P(X = 0) = 0.365^2 = 0.133 -> q05 = 0; P(X <= 1) = 1 - 0.635^2 = 0.597 -> q95 = 2
    #   n = 3: P(X <= 1) = 0.06^3 + 3 * 0.94 * 0.06^2 = 0.0104 < 0.05, P(X <= 2) = 1 - 0.94^3
    #          = 0.169 -> q05 = 2 -> 2/3; q95 = 3 -> [2/3, 1]
    lo, hi = consistency_band(HAND_CONF, [1, 2, 3])
    np.testing.assert_allclose(lo, [0.0, 0.0, 2 / 3], atol=1e-12)
    np.testing.assert_allclose(hi, [1.0, 1.0, 1.0], atol=1e-12)
    # the diagram draws those boxes over the three non-empty bins
    fig = plots.reliability_diagram(HAND_PROBS, HAND_LABELS, n_bins=10)
    band = _container(fig.axes[0], BAND_LABEL)
    np.testing.assert_allclose(_lefts(band), HAND_LEFT, atol=1e-12)
    np.testing.assert_allclose(_bottoms(band), lo, atol=1e-12)
    np.testing.assert_allclose(_bottoms(band) + _heights(band), hi, atol=1e-12)
    # empty bins: no band; certain predictions: a band of one point
    lo, hi = consistency_band([0.5, 0.7, 1.0, 0.0], [0, 10, 7, 5])
    assert np.isnan(lo[0]) and np.isnan(hi[0]) and lo[1] <= 0.7 <= hi[1]
    np.testing.assert_array_equal([lo[2], hi[2], lo[3], hi[3]], [1.0, 1.0, 0.0, 0.0])


def test_consistency_band_equals_binomial_quantiles():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.05, 0.999, 200)
    count = rng.integers(1, 3000, 200)
    lo, hi = consistency_band(conf, count)
    np.testing.assert_array_equal(np.round(lo * count), stats.binom.ppf(0.05, count, conf))
    np.testing.assert_array_equal(np.round(hi * count), stats.binom.ppf(0.95, count, conf))


def test_consistency_band_covers_calibrated_bins():
    # a perfectly calibrated bin (confidences spread over [0.6, 0.7], outcomes Bernoulli of
    # them) lands in its 5-95% band at least 90% of the time (the binomial band is slightly
    # wider than the Poisson-binomial truth): 2000 seeded bins of 40 samples
    rng = np.random.default_rng(1)
    c = rng.uniform(0.6, 0.7, (2000, 40))
    acc = (rng.random((2000, 40)) < c).mean(axis=1)
    lo, hi = consistency_band(c.mean(axis=1), np.full(2000, 40))
    inside = np.mean((acc >= lo - 1e-12) & (acc <= hi + 1e-12))
    assert 0.9 <= inside < 0.97


def test_band_over_the_accuracy_bar_in_coursework_style():
    fig = plots.reliability_diagram(HAND_PROBS, HAND_LABELS, style="coursework")
    ax = fig.axes[0]
    band, acc = _container(ax, BAND_LABEL), _container(ax, "Accuracy")
    np.testing.assert_allclose(_lefts(band), _lefts(acc), atol=1e-12)
    np.testing.assert_allclose(_bottoms(band), [0.0, 0.0, 2 / 3], atol=1e-12)


def test_smoothed_curve_is_the_smooth_reliability_curve():
    from calbench.metrics.smooth import smooth_reliability

    _, probs, labels = _random_problem(n=1500, seed=4)
    fig = plots.reliability_diagram(probs, labels, n_bins=10, min_count=200)
    ax = fig.axes[0]
    line = _line(ax, SMOOTH_LABEL)
    conf, correct = probs.max(axis=1), (probs.argmax(axis=1) == labels).astype(float)
    # a 95% band of 200 resamples (perf/bench_coverage.py: its coverage of the smoothed curve)
    assert (SMOOTH_LEVEL, SMOOTH_BOOTSTRAP, SMOOTH_LABEL) == (0.95, 200, "Smoothed, 95% band")
    want = smooth_reliability(conf, correct, n_points=201, n_bootstrap=200, level=0.95, seed=0)
    shown = want.n_local >= 200  # drawn only where min_count samples lie within ~ sigma
    assert 0 < shown.sum() < shown.size  # the problem has few low-confidence samples
    np.testing.assert_allclose(line.get_xdata(), want.t)
    np.testing.assert_allclose(np.asarray(line.get_ydata())[shown], want.mean[shown])
    assert np.all(np.isnan(np.asarray(line.get_ydata())[~shown]))
    (band,) = [c for c in ax.collections if c.get_gid() == SMOOTH_BAND_GID]
    ys = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
    lo, hi = want.lower[shown], want.upper[shown]
    assert ys.min() == pytest.approx(lo.min()) and ys.max() == pytest.approx(hi.max())
    # off: neither layer drawn
    fig = plots.reliability_diagram(probs, labels, bands=False, smooth=False)
    ax = fig.axes[0]
    assert not [c for c in ax.containers if c.get_label() == BAND_LABEL]
    assert not [ln for ln in ax.lines if ln.get_label() == SMOOTH_LABEL]
    assert not [c for c in ax.collections if c.get_gid() == SMOOTH_BAND_GID]


def test_min_count_marks_sparse_bins():
    _, probs, labels = _random_problem(n=400, seed=0)
    b = metrics.reliability_bins(probs, labels, n_bins=10)
    count = np.asarray(b.count)[np.asarray(b.count) > 0]
    for min_count in (1, 20, 60):
        fig = plots.reliability_diagram(probs, labels, n_bins=10, min_count=min_count)
        ax = fig.axes[0]
        outputs = _container(ax, "Outputs")
        marked = [r.get_hatch() == ".." and r.get_alpha() == 0.3 for r in outputs.patches]
        assert marked == list(count < min_count)
        counts = sorted(t.get_text() for t in ax.texts if t.get_text().startswith("n="))
        assert counts == sorted(f"n={c}" for c in count[count < min_count])
        # the band over a sparse bin is faint too
        band = _container(ax, BAND_LABEL)
        assert [r.get_alpha() == SPARSE_ALPHA for r in band.patches] == list(count < min_count)
    with pytest.raises(ValueError, match="min_count"):
        plots.reliability_diagram(probs, labels, min_count=0)
    with pytest.raises(ValueError, match="bands"):
        plots.reliability_diagram(probs, labels, bands="yes")


def _all_text_px(fig):
    from matplotlib.text import Text

    fig.canvas.draw()
    return [
        (t.get_text(), t.get_fontsize() * fig.dpi / 72.0)
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text()
    ]


@pytest.mark.parametrize("style", plots.STYLES)
def test_legible_at_default_dpi(style):
    """No text under 10 px at the figure's dpi (100); a single diagram fits a 400-px phone
    screen at its natural size (its axes at least 270 px wide), a grid's panels are at least
    380 px wide."""
    _, probs, labels = _random_problem(n=600, seed=2)
    figs = [
        plots.reliability_diagram(HAND_PROBS, HAND_LABELS, style=style, title="T"),
        plots.classwise_reliability_diagram(probs, labels, class_index=1, style=style),
        plots.reliability_grid({f"m{i}": probs for i in range(5)}, labels, style=style),
    ]
    for fig in figs:
        assert fig.dpi == 100
        small = [(s, px) for s, px in _all_text_px(fig) if px < 10.0]
        assert not small, small
        renderer = fig.canvas.get_renderer()
        widths = [ax.get_window_extent(renderer).width for ax in fig.axes]
        if fig is figs[2]:
            assert min(widths) >= 380, widths
        else:
            assert min(widths) >= 270 and fig.bbox.width <= 380, (widths, fig.bbox.width)
