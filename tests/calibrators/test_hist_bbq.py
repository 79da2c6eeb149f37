"""Histogram binning and BBQ (calbench.calibrators.binning)."""

import numpy as np
import pytest

from calbench.calibrators import binning
from calbench.calibrators.binning import (
    BBQ,
    HistogramBinning,
    apply_histogram_binning,
    bbq_bin_counts,
    bdeu_log_score,
    beta_posterior_mean,
    equal_width_bin_index,
    fit_bbq_column,
    fit_bbq_columns,
    fit_histogram_binning,
    renormalise_rows,
)
from conftest import sample_labels, softmax64


def binary_logits(p1):
    """Logits whose softmax's column 1 is ``p1`` (column 0 is ``1 - p1``)."""
    p1 = np.asarray(p1, dtype=np.float64)
    return np.stack([np.zeros_like(p1), np.log(p1 / (1 - p1))], axis=1)


# a walkthrough of Guo et al. 2017's worked example: 9 samples, 3 bins -> bin values 0.50, 0.67, 0.75
EX_P = np.array([0.15, 0.22, 0.35, 0.48, 0.63, 0.72, 0.85, 0.89, 0.95])
EX_Y = np.array([0, 1, 1, 0, 1, 1, 1, 0, 1])


def test_worked_example_bin_values():
    theta = fit_histogram_binning(np.stack([1 - EX_P, EX_P], 1), EX_Y, n_bins=3)
    np.testing.assert_allclose(theta[1], [1 / 2, 2 / 3, 3 / 4], rtol=0, atol=1e-15)
    # same through the calibrator on logits: one-vs-rest column of class 1 before renormalising
    hb = HistogramBinning(n_bins=3).fit(binary_logits(EX_P), EX_Y)
    np.testing.assert_allclose(hb.theta_[1], [0.5, 2 / 3, 0.75], atol=1e-12)
    raw = apply_histogram_binning(hb.theta_, np.stack([1 - EX_P, EX_P], 1))
    np.testing.assert_allclose(raw[:, 1], [0.5, 0.5, 2 / 3, 2 / 3, 2 / 3, 0.75, 0.75, 0.75, 0.75])


def test_bin_index_edge_convention():
    # [a, b) bins, exactly 1 in the last bin, values on an edge go to the bin to its right
    edges = np.linspace(0, 1, 21)
    p = np.concatenate([edges, np.nextafter(edges[1:], 0), [0.0, 1.0, 0.3, 0.7]])
    got = equal_width_bin_index(p[:, None], 20)[:, 0]
    want = np.minimum(np.searchsorted(edges, p, side="right") - 1, 19)
    np.testing.assert_array_equal(got, want)
    rng = np.random.default_rng(0)
    q = rng.random((500, 7))
    np.testing.assert_array_equal(
        equal_width_bin_index(q, 15),
        np.minimum(np.searchsorted(np.linspace(0, 1, 16), q, "right") - 1, 14),
    )


def test_empty_bins_get_their_centre_and_values_by_hand():
    probs = np.array([[0.95, 0.05], [0.9, 0.1], [0.2, 0.8], [0.4, 0.6]])
    y = np.array([0, 1, 1, 0])
    theta = fit_histogram_binning(probs, y, n_bins=4)
    # column 1 holds 0.05, 0.1 (bin 0: labels 0, 1), 0.8 (bin 3: 1), 0.6 (bin 2: 0); bin 1 empty
    np.testing.assert_allclose(theta[1], [0.5, 0.375, 0.0, 1.0])
    # column 0 holds 0.95, 0.9 (bin 3: both class 0? labels 0 and 1 -> 1/2), 0.2 (bin 0: 0), 0.4 (bin 1: 1)
    np.testing.assert_allclose(theta[0], [0.0, 1.0, 0.625, 0.5])


def test_matches_per_class_loop():
    rng = np.random.default_rng(1)
    z = rng.normal(size=(400, 6)) * 2
    y = sample_labels(rng, softmax64(z / 2))
    hb = HistogramBinning().fit(z, y)
    p = softmax64(z)
    for j in range(6):
        for m in range(20):
            lo, hi = m / 20, (m + 1) / 20
            sel = (p[:, j] >= lo) & ((p[:, j] < hi) if m < 19 else (p[:, j] <= 1))
            want = (y[sel] == j).mean() if sel.any() else (m + 0.5) / 20
            assert hb.theta_[j, m] == pytest.approx(want, abs=1e-15)
    out = hb.predict_proba(z)
    raw = apply_histogram_binning(hb.theta_, p)
    np.testing.assert_allclose(out, raw / raw.sum(1, keepdims=True))


def test_zero_row_becomes_uniform():
    v = np.array([[0.0, 0.0, 0.0], [0.2, 0.2, 0.6], [1.0, 0.0, 1.0]])
    np.testing.assert_allclose(
        renormalise_rows(v.copy()), [[1 / 3] * 3, [0.2, 0.2, 0.6], [0.5, 0, 0.5]]
    )
    # a calibrator that maps everything to 0: all training probabilities in bins with no positive
    z = binary_logits(np.array([0.5, 0.5, 0.5, 0.5]))  # both columns 0.5 -> bin 10 of each
    hb = HistogramBinning().fit(z, np.array([0, 0, 1, 1]))
    hb.theta_[:] = 0.0
    np.testing.assert_allclose(hb.predict_proba(z), 0.5)


def test_hist_options_validated():
    with pytest.raises(ValueError, match="n_bins"):
        HistogramBinning(n_bins=0)


# ---------------------------------------------------------------------------------------- BBQ


def test_beta_posterior_and_bdeu_by_hand():
    # bin with 3 positives out of 4, prior Beta(1, 1): posterior mean (3+1)/(4+2)
    assert beta_posterior_mean(3.0, 4.0, 1.0, 1.0) == pytest.approx(4 / 6)
    # one bin, ess 2, midpoint 0.5 -> alpha = beta = 1: marginal likelihood of a specific
    # sequence with m ones in n is B(m+1, n-m+1) = m! (n-m)! / (n+1)!; here m = 1, n = 2 -> 1/6
    assert np.exp(bdeu_log_score([1], [2], [0.5], ess=2.0)) == pytest.approx(1 / 6)
    # two bins (alpha = beta = 0.5 each): Jeffreys marginals, one sample per bin: 1/2 * 1/2
    assert np.exp(bdeu_log_score([1, 0], [1, 1], [0.5, 0.5])) == pytest.approx(0.25)


def test_bbq_model_space():
    assert bbq_bin_counts(1000)[0] == 1 and bbq_bin_counts(1000)[-1] == 100
    assert bbq_bin_counts(5000).tolist() == list(range(1, 172))
    assert bbq_bin_counts(8, c=10).tolist() == list(range(1, 9))  # capped at N


def test_bbq_single_models_are_beta_posteriors():
    s = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    t = np.array([0, 0, 1, 0, 1, 1])
    breaks, values = fit_bbq_column(s, t, bin_counts=[1])
    assert breaks.size == 0
    # one bin over [0, 1]: midpoint 0.5, alpha = beta = 1, 3 of 6 positive -> (3+1)/(6+2)
    np.testing.assert_allclose(values, [0.5])
    # two equal-frequency bins split midway between 0.3 and 0.7 (at 0.5): intervals [0, 0.5)
    # and [0.5, 1], midpoints 0.25 / 0.75, ess/B = 1 -> Beta(0.25, 0.75) and Beta(0.75, 0.25);
    # posterior means (1 + 0.25)/(3 + 1) and (2 + 0.75)/(3 + 1)
    breaks, values = fit_bbq_column(s, t, bin_counts=[2])
    np.testing.assert_allclose(breaks, [0.5])
    np.testing.assert_allclose(values, [1.25 / 4, 2.75 / 4])
    # averaging both models weights them by their BDeu scores
    b2, v2 = fit_bbq_column(s, t, bin_counts=[1, 2])
    l1 = bdeu_log_score([3], [6], [0.5])
    l2 = bdeu_log_score([1, 2], [3, 3], [0.25, 0.75])
    w1 = 1 / (1 + np.exp(l2 - l1))
    np.testing.assert_allclose(v2, [w1 * 0.5 + (1 - w1) * 1.25 / 4, w1 * 0.5 + (1 - w1) * 2.75 / 4])
    assert bbq_bin_counts(6, c=1e-9).tolist() == [6]


def test_bbq_calibrated_input_stays_close_to_identity():
    rng = np.random.default_rng(2)
    n = 20000
    p = rng.uniform(0.02, 0.98, n)
    y = (rng.random(n) < p).astype(np.int64)  # p is calibrated for class 1
    bbq = BBQ().fit(binary_logits(p), y)
    grid = np.linspace(0.1, 0.9, 9)
    out = bbq.predict_proba(binary_logits(grid))[:, 1]
    np.testing.assert_allclose(out, grid, atol=0.05)
    assert np.all(np.diff(out) > 0)  # monotone data -> increasing map


def test_bbq_learns_monotone_miscalibration():
    rng = np.random.default_rng(3)
    n = 20000
    s = rng.uniform(0, 1, n)
    true = s**3  # over-confident scores
    y = (rng.random(n) < true).astype(np.int64)
    breaks, values = fit_bbq_column(s, y)
    grid = np.linspace(0.1, 0.95, 12)
    got = values[np.searchsorted(breaks, grid, side="right")]
    np.testing.assert_allclose(got, grid**3, atol=0.06)
    assert np.all(np.diff(got) >= -0.02)


def test_bbq_options_validated():
    with pytest.raises(ValueError, match="c must"):
        BBQ(c=0)


# ------------------------------------------------------- fast path vs the straightforward method


def _dense_histogram_reference(probs, labels, n_bins):
    """Straightforward one-vs-rest histogram binning: every entry's bin by ``searchsorted`` on
    the float edges, then per-class bin counts over all N entries of each column."""
    n, k = probs.shape
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    ids = np.minimum(np.searchsorted(edges, probs, side="right") - 1, n_bins - 1)
    theta = np.empty((k, n_bins))
    for j in range(k):
        for m in range(n_bins):
            sel = ids[:, j] == m
            theta[j, m] = (labels[sel] == j).mean() if sel.any() else (m + 0.5) / n_bins
    raw = theta[np.arange(k)[None, :], ids]
    return theta, raw


def _edge_heavy_probs(rng, n, k, n_bins):
    """Softmax rows, with some entries moved onto bin edges and their float neighbours."""
    z = rng.normal(size=(n, k)) * 3
    p = softmax64(z)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    i = rng.integers(0, n, n // 2)
    j = rng.integers(0, k, n // 2)
    e = edges[rng.integers(0, n_bins + 1, n // 2)]
    p[i, j] = np.where(rng.random(n // 2) < 0.5, e, np.nextafter(e, rng.integers(0, 2, n // 2)))
    return p  # rows no longer sum to 1 exactly: the binning functions do not need it


@pytest.mark.parametrize(
    ("n", "k", "n_bins"), [(500, 50, 20), (300, 4, 15), (200, 7, 1), (50, 3, 7)]
)
def test_fast_histogram_binning_equals_dense_reference(n, k, n_bins):
    rng = np.random.default_rng(n + k + n_bins)
    p = _edge_heavy_probs(rng, n, k, n_bins)
    y = rng.integers(0, k, n)
    theta_ref, raw_ref = _dense_histogram_reference(p, y, n_bins)
    theta = fit_histogram_binning(p, y, n_bins)
    np.testing.assert_array_equal(theta, theta_ref)
    np.testing.assert_array_equal(apply_histogram_binning(theta, p), raw_ref)
    # fused renormalisation: bit-identical to renormalise_rows of the raw values
    np.testing.assert_array_equal(
        apply_histogram_binning(theta, p, renormalise=True), renormalise_rows(raw_ref.copy())
    )
    # float32 and Fortran-ordered input are binned on their (exact) float64 values
    p32 = p.astype(np.float32)
    theta32_ref, raw32_ref = _dense_histogram_reference(p32.astype(np.float64), y, n_bins)
    np.testing.assert_array_equal(fit_histogram_binning(p32, y, n_bins), theta32_ref)
    np.testing.assert_array_equal(apply_histogram_binning(theta32_ref, p32), raw32_ref)
    np.testing.assert_array_equal(fit_histogram_binning(np.asfortranarray(p), y, n_bins), theta)


def test_apply_histogram_binning_in_place_and_out_checked():
    rng = np.random.default_rng(5)
    p = softmax64(rng.normal(size=(3000, 30)) * 3)  # several row blocks of 2^15 entries
    y = rng.integers(0, 30, 3000)
    theta = fit_histogram_binning(p, y, 20)
    want = renormalise_rows(apply_histogram_binning(theta, p))
    buf = p.copy()
    got = apply_histogram_binning(theta, buf, out=buf, renormalise=True)
    assert got is buf
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="out must be"):
        apply_histogram_binning(theta, p, out=np.empty((3000, 30), dtype=np.float32))


def test_calibrator_predict_equals_reference_and_leaves_input_alone():
    rng = np.random.default_rng(6)
    z = rng.normal(size=(800, 40)) * 3
    y = sample_labels(rng, softmax64(z / 2))
    z_copy = z.copy()
    hb = HistogramBinning(n_bins=10).fit(z, y)
    theta_ref, raw_ref = _dense_histogram_reference(softmax64(z), y, 10)
    np.testing.assert_allclose(hb.theta_, theta_ref, rtol=0, atol=1e-15)
    np.testing.assert_allclose(
        hb.predict_proba(z), raw_ref / raw_ref.sum(1, keepdims=True), rtol=1e-14
    )
    np.testing.assert_array_equal(z, z_copy)


def _bbq_reference(scores, targets, c=10.0, ess=2.0):
    """One column, model by model (Naeini et al. 2015 as the module docstring states it)."""
    order = np.argsort(scores, kind="stable")
    s = np.asarray(scores, dtype=np.float64)[order]
    t = np.asarray(targets, dtype=np.float64)[order]
    n = s.size
    cum = np.concatenate([[0.0], np.cumsum(t)])
    models = []
    for n_bins in bbq_bin_counts(n, c):
        starts = np.unique(np.round(np.arange(n_bins) * n / n_bins).astype(np.int64))
        ends = np.append(starts[1:], n)
        inner = 0.5 * (s[starts[1:] - 1] + s[starts[1:]])
        edges = np.concatenate([[0.0], inner, [1.0]])
        mid = np.clip(0.5 * (edges[:-1] + edges[1:]), 1e-12, 1 - 1e-12)
        counts = (ends - starts).astype(np.float64)
        pos = cum[ends] - cum[starts]
        models.append((inner, counts, pos, mid, bdeu_log_score(pos, counts, mid, ess)))
    log_scores = np.array([m[-1] for m in models])
    weights = np.exp(log_scores - log_scores.max())
    weights /= weights.sum()
    breaks = np.unique(np.concatenate([m[0] for m in models]))
    probe = np.concatenate([[breaks[0] - 1.0] if breaks.size else [0.0], breaks])
    values = np.zeros(probe.size)
    for w, (inner, counts, pos, mid, _) in zip(weights, models, strict=True):
        b = inner.size + 1
        a = ess / b * mid
        theta = beta_posterior_mean(pos, counts, a, ess / b - a)
        values += w * theta[np.searchsorted(inner, probe, side="right")]
    return breaks, values


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("decimals", [None, 1, 2])
@pytest.mark.parametrize("block", [None, 100])  # all columns at once; blocks of 1 or 2 columns
def test_bbq_columns_are_bitwise_the_model_by_model_fits(dtype, decimals, block, monkeypatch):
    # all columns scored at once must give every column's own fit, to the last bit (the row
    # sums of the BDeu scores and model weights in the 1-D summation order)
    if block:
        monkeypatch.setattr(binning, "BBQ_BLOCK", block)
    rng = np.random.default_rng(7)
    for trial, (n, k, c) in enumerate([(1, 2, 10.0), (6, 3, 1e-9), (28, 4, 10.0), (90, 5, 3.0),
                                       (300, 3, 10.0)]):  # fmt: skip
        x = rng.random((n, k)).astype(dtype)
        if decimals:
            x = np.round(x, decimals)  # ties: repeated midpoints, collapsed breaks
        y = rng.random((n, k)) < rng.random(k)
        fits = fit_bbq_columns(x, y, c=c)
        for j in range(k):
            ref = _bbq_reference(x[:, j], y[:, j], c=c)
            np.testing.assert_array_equal(fits[j][0], ref[0], err_msg=f"breaks {trial} {j}")
            np.testing.assert_array_equal(fits[j][1], ref[1], err_msg=f"values {trial} {j}")
