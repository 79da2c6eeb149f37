"""Weighted (bootstrap) forms of the metrics: a chunk of resamples given as an (r, N) array of
multiplicities equals the resample-by-resample loop."""

from __future__ import annotations

import numpy as np
import pytest

from calbench.metrics import METRICS
from calbench.metrics import binning as B
from calbench.stats import multiplicities, resample_indices

WEIGHTED = sorted(name for name, m in METRICS.items() if m.weighted is not None)


def test_the_weighted_metrics():
    assert WEIGHTED == sorted(
        [
            "ece",
            "mce",
            "cwece",
            "marginal_ce",
            "cwece_kull",
            "ece_kull",
            "mce_kull",
            "ece_ub",
            "cwece_ub",
        ]
    )


def edge_data(n=120, k=6, seed=0, dtype=np.float64):
    """Random probabilities with ties on bin edges (study and Kull grids), 0s, 1s, few samples
    per bin (many empty bins)."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(k, 0.3), size=n)
    edges = np.concatenate([np.linspace(0, 1, 16), np.linspace(0, 1, 15), np.arange(1, 16) / 15])
    for i in range(0, n // 2):  # top entry exactly on an edge, the rest spread evenly
        e = edges[rng.integers(len(edges))]
        e = max(e, 1.0 / k)
        p[i] = (1.0 - e) / (k - 1)
        p[i, rng.integers(k)] = e
    p[-3:] = 0.0
    p[-3:, 0] = 1.0  # one-hot rows: confidence exactly 1, entries exactly 0
    p = p.astype(dtype)
    return p, rng.integers(0, k, n)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", WEIGHTED)
def test_batched_equals_the_loop_over_resamples(name, dtype):
    p, y = edge_data(dtype=dtype)
    n = p.shape[0]
    m = METRICS[name]
    g = m.weighted(p, y, p.dtype)
    idx = next(resample_indices(n, 40, 5))
    w = multiplicities(idx, n)
    batched = g(w)
    assert batched.shape == (40,) and batched.dtype == np.float64
    one_by_one = np.array([g(row) for row in w])
    resampled = np.array([m(p[row], y[row]) for row in idx])
    np.testing.assert_allclose(batched, one_by_one, rtol=1e-12, atol=0)
    np.testing.assert_allclose(batched, resampled, rtol=1e-12, atol=1e-15)
    # all-ones weights, 1-D or one row, and None are the metric itself
    assert g(None) == pytest.approx(m(p, y), rel=1e-12, abs=0)
    assert g(np.ones(n)) == pytest.approx(m(p, y), rel=1e-12, abs=0)
    np.testing.assert_allclose(g(np.ones((1, n))), [m(p, y)], rtol=1e-12)
    # deterministic
    np.testing.assert_array_equal(g(w), batched)


@pytest.mark.parametrize("name", WEIGHTED)
def test_a_small_cast_buffer_gives_the_same_values(name, monkeypatch):
    p, y = edge_data(n=90, dtype=np.float32, seed=2)
    g = METRICS[name].weighted(p, y, p.dtype)
    w = multiplicities(next(resample_indices(90, 7, 1)), 90)
    ref = g(w)
    monkeypatch.setattr(B, "_CAST_BUFFER_BYTES", 8 * 6 * 7)  # 7 rows at a time
    np.testing.assert_allclose(g(w), ref, rtol=1e-12, atol=1e-15)


def test_weighted_bincount_rows_equal_single_bincounts():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 9, 500)
    rows = rng.integers(0, 60, 500)
    vals = rng.random(500)
    w = multiplicities(rng.integers(0, 60, (5, 60)), 60)
    out = B.weighted_bincount(keys, 9, w, rows, vals)
    for i in range(5):
        want = np.bincount(keys, weights=w[i][rows] * vals, minlength=9)
        np.testing.assert_allclose(out[i], want, rtol=1e-13)
    out = B.weighted_bincount(keys[:60], 9, w)
    for i in range(5):  # integer sums: exact
        np.testing.assert_array_equal(out[i], np.bincount(keys[:60], weights=w[i], minlength=9))
    assert B.weighted_bincount(keys[:0], 9, w, rows[:0], vals[:0]).tolist() == [[0.0] * 9] * 5


def test_weighted_column_sums_of_float32():
    rng = np.random.default_rng(1)
    p = rng.random((1000, 7)).astype(np.float32)
    w = multiplicities(rng.integers(0, 1000, (3, 1000)), 1000)
    np.testing.assert_allclose(B.weighted_column_sums(w, p), w @ p.astype(np.float64), rtol=1e-12)


def test_multiplicities_are_bincounts():
    idx = np.random.default_rng(2).integers(0, 30, (4, 30))
    w = multiplicities(idx, 30)
    assert w.dtype == np.float64
    for i in range(4):
        np.testing.assert_array_equal(w[i], np.bincount(idx[i], minlength=30))


@pytest.mark.parametrize("shape", [(5,), (2, 5), (1, 2, 6), ()])
def test_bad_weights_shape(shape):
    p, y = edge_data(n=6, k=3)
    g = METRICS["cwece"].weighted(p, y)
    with pytest.raises(ValueError, match="weights must have shape"):
        g(np.ones(shape))
