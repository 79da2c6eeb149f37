"""Known-answer tests for calbench.metrics.binning (bin rules and reliability bins)."""

import numpy as np
import pytest

from calbench.metrics.binning import (
    bin_ids,
    mass_bin_ids,
    mass_upper_edges,
    reliability_bins,
    width_bin_ids,
    width_edges,
)


def test_width_edges_are_linspace():
    assert np.array_equal(width_edges(15), np.linspace(0, 1, 16))


def test_width_bins_half_open_with_exact_edges():
    edges = width_edges(15)
    x = np.array([0.0, edges[1], np.nextafter(edges[1], 0), edges[7], 0.5, 1.0, edges[14]])
    # 0 -> bin 0; an inner edge belongs to the bin above it ([a, b)); just below the edge
    # stays in the bin below; 1.0 is put in the last bin; 0.5 = 7.5/15 -> bin 7
    assert width_bin_ids(x, 15).tolist() == [0, 1, 0, 7, 7, 14, 14]


def test_width_bins_use_float_edges_not_floor():
    # linspace(0, 1, 6)[3] is 0.6000000000000001, so the literal 0.6 lies *below* that edge
    edges = width_edges(5)
    assert edges[3] > 0.6
    assert width_bin_ids(np.array([0.6, edges[3]]), 5).tolist() == [2, 3]


def test_mass_bins_uneven_split():
    # N = 5, M = 2 -> groups of 3 and 2 (first group larger): [.1 .2 .2 | .3 .9]
    x = np.array([0.3, 0.1, 0.9, 0.2, 0.2])
    upper = mass_upper_edges(x, 2)
    assert upper.tolist() == [0.25, 1.0]  # midpoint of .2 and .3, then 1
    assert mass_bin_ids(x, upper).tolist() == [1, 0, 1, 0, 0]
    # N = 7, M = 3 -> sizes 3, 2, 2
    x7 = np.arange(1, 8) / 10.0
    ids, _ = bin_ids(x7, 3, "mass")
    assert np.bincount(ids).tolist() == [3, 2, 2]


def test_mass_bins_keep_ties_together():
    # sorted [.2 .2 .2 | .2 .9]: the split falls inside the run of .2, boundary = .2,
    # so the whole run goes to the lower bin (bins are (a, b])
    x = np.array([0.2, 0.2, 0.9, 0.2, 0.2])
    upper = mass_upper_edges(x, 2)
    assert upper.tolist() == [0.2, 1.0]
    assert mass_bin_ids(x, upper).tolist() == [0, 0, 1, 0, 0]
    # all equal: every boundary collapses onto the value -> bins merge, no empty bin
    same = np.full(6, 0.4)
    ids, edges = bin_ids(same, 3, "mass")
    assert edges.tolist() == [0.0, 0.4, 1.0]
    assert ids.tolist() == [0] * 6


def test_mass_bins_more_bins_than_samples():
    x = np.array([0.6, 0.3])
    # M is reduced to N = 2: one boundary, the midpoint of .3 and .6
    np.testing.assert_allclose(mass_upper_edges(x, 5), [0.45, 1.0], rtol=1e-15)


def _five():
    # conf .9 ok, .85 wrong, .7 ok, .65 wrong, .55 ok
    probs = np.array(
        [
            [0.9, 0.05, 0.05],
            [0.85, 0.1, 0.05],
            [0.1, 0.7, 0.2],
            [0.65, 0.3, 0.05],
            [0.15, 0.3, 0.55],
        ]
    )
    return probs, np.array([0, 1, 1, 2, 2])


def test_reliability_bins_top_label_hand_computed():
    probs, labels = _five()
    rb = reliability_bins(probs, labels, n_bins=5)
    assert np.array_equal(rb.edges, np.linspace(0, 1, 6))
    # bins [.4,.6): .55 (ok); [.6,.8): .7 ok, .65 wrong; [.8,1]: .9 ok, .85 wrong
    assert rb.count.tolist() == [0, 0, 1, 2, 2]
    np.testing.assert_allclose(rb.confidence, [0, 0, 0.55, 0.675, 0.875], atol=1e-15)
    np.testing.assert_allclose(rb.accuracy, [0, 0, 1.0, 0.5, 0.5], atol=1e-15)
    np.testing.assert_allclose(rb.weight, [0, 0, 0.2, 0.4, 0.4])


def test_reliability_bins_one_vs_rest_hand_computed():
    probs, labels = _five()
    # column 2 = [.05 .05 .2 .05 .55] against y == 2 -> [0 0 0 1 1]; 0.2 is an edge -> bin 1
    rb = reliability_bins(probs, labels, n_bins=5, class_index=2)
    assert rb.count.tolist() == [3, 1, 1, 0, 0]
    np.testing.assert_allclose(rb.confidence, [0.05, 0.2, 0.55, 0, 0], atol=1e-15)
    np.testing.assert_allclose(rb.accuracy, [1 / 3, 0, 1, 0, 0], atol=1e-15)


def test_reliability_bins_mass():
    probs, labels = _five()
    # sorted conf [.55 .65 .7 | .85 .9]; boundary (.7 + .85)/2 = .775
    rb = reliability_bins(probs, labels, n_bins=2, binning="mass")
    np.testing.assert_allclose(rb.edges, [0, 0.775, 1.0])
    assert rb.count.tolist() == [3, 2]
    np.testing.assert_allclose(rb.confidence, [1.9 / 3, 0.875])
    np.testing.assert_allclose(rb.accuracy, [2 / 3, 0.5])


@pytest.mark.parametrize("bad", [-1, 3, 1.0, True, "0"])
def test_reliability_bins_bad_class_index(bad):
    probs, labels = _five()
    with pytest.raises(ValueError, match="class_index"):
        reliability_bins(probs, labels, class_index=bad)


def test_reliability_bins_bad_binning_and_bins():
    probs, labels = _five()
    with pytest.raises(ValueError, match="binning"):
        reliability_bins(probs, labels, binning="quantile")
    with pytest.raises(ValueError, match="n_bins"):
        reliability_bins(probs, labels, n_bins=0)
