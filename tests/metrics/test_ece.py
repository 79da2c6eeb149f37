"""Known-answer and conformance tests for calbench.metrics.ece."""

import warnings

import numpy as np
import pytest

from calbench.metrics import (
    adaptive_ece,
    classwise_ece,
    debiased_ece,
    ece,
    ks_error,
    marginal_ce,
    mce,
)

# Five samples, K = 3.  Top label: conf .9 ok, .85 wrong, .7 ok, .65 wrong, .55 ok.
PROBS5 = np.array(
    [
        [0.9, 0.05, 0.05],
        [0.85, 0.1, 0.05],
        [0.1, 0.7, 0.2],
        [0.65, 0.3, 0.05],
        [0.15, 0.3, 0.55],
    ]
)
LABELS5 = np.array([0, 1, 1, 2, 2])


def random_probs(n, k, seed, scale=2.5):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, k)) * scale
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True), rng.integers(0, k, n)


def calibrated_sample(n, k, seed):
    """A perfectly calibrated model: labels drawn from the predicted probabilities."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(k, 0.3), size=n)
    u = rng.random(n)[:, None]
    y = (p.cumsum(axis=1) < u).sum(axis=1)
    return p, np.minimum(y, k - 1)


# ----------------------------------------------------------------------------- hand computed


def test_ece_hand_computed_five_bins():
    # bins of width .2: [.8,1]: .9 ok, .85 wrong -> conf .875 acc .5 gap .375 weight 2/5
    #                   [.6,.8): .7 ok, .65 wrong -> conf .675 acc .5 gap .175 weight 2/5
    #                   [.4,.6): .55 ok            -> gap .45 weight 1/5
    assert ece(PROBS5, LABELS5, n_bins=5) == pytest.approx(
        0.4 * 0.375 + 0.4 * 0.175 + 0.2 * 0.45, abs=1e-15
    )  # = 0.31
    assert mce(PROBS5, LABELS5, n_bins=5) == pytest.approx(0.45, abs=1e-15)
    assert ece(PROBS5, LABELS5, n_bins=5, norm="max") == mce(PROBS5, LABELS5, n_bins=5)
    l2 = np.sqrt(0.4 * 0.375**2 + 0.4 * 0.175**2 + 0.2 * 0.45**2)  # sqrt(0.109)
    assert ece(PROBS5, LABELS5, n_bins=5, norm="l2") == pytest.approx(l2, abs=1e-15)


def test_ece_study_defaults_fifteen_bins():
    # conf .95 and .97 both in the last bin [14/15, 1], both correct: gap |1 - .96| = .04;
    # conf .5 (wrong) alone in bin 7: gap .5.  ECE = 2/3 * .04 + 1/3 * .5
    probs = np.array([[0.95, 0.05], [0.03, 0.97], [0.5 + 1e-9, 0.5 - 1e-9]])
    labels = np.array([0, 1, 1])
    assert ece(probs, labels) == pytest.approx(2 / 3 * 0.04 + 1 / 3 * (0.5 + 1e-9), abs=1e-14)
    # mce over 15 bins, empty bins count as 0
    assert mce(probs, labels) == pytest.approx(0.5 + 1e-9, abs=1e-14)


def test_ece_confidence_one_goes_to_last_bin():
    probs = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert ece(probs, np.array([0, 1])) == 0.0
    assert ece(probs, np.array([1, 1])) == pytest.approx(0.5)  # last bin: acc .5 conf 1


def test_adaptive_ece_hand_computed():
    # 2 equal-mass bins: [.55 .65 .7] (2 of 3 correct) | [.85 .9] (1 of 2 correct)
    # gaps |2/3 - 1.9/3| = 1/30 and |.5 - .875| = .375 -> 3/5 * 1/30 + 2/5 * .375 = .17
    assert adaptive_ece(PROBS5, LABELS5, n_bins=2) == pytest.approx(0.17, abs=1e-15)
    assert ece(PROBS5, LABELS5, n_bins=2, binning="mass") == adaptive_ece(PROBS5, LABELS5, n_bins=2)


def test_classwise_ece_hand_computed():
    # 5 bins per class, weights count / 5:
    # class 0: column [.9 .85 .1 .65 .15] vs [1 0 0 0 0]
    #   bin0 {.1,.15}: gap .125 (x2) ; bin3 {.65}: gap .65 ; bin4 {.9,.85}: |.5-.875| (x2)
    cw0 = (2 * 0.125 + 0.65 + 2 * 0.375) / 5  # .33
    # class 1: column [.05 .1 .7 .3 .3] vs [0 1 1 0 0]
    #   bin0 {.05,.1}: |.5 - .075| (x2) ; bin1 {.3,.3}: .3 (x2) ; bin3 {.7}: .3
    cw1 = (2 * 0.425 + 2 * 0.3 + 0.3) / 5  # .35
    # class 2: column [.05 .05 .2 .05 .55] vs [0 0 0 1 1]; .2 is an edge -> bin 1
    #   bin0 {.05 x3}: |1/3 - .05| (x3) ; bin1 {.2}: .2 ; bin2 {.55}: .45
    cw2 = (3 * (1 / 3 - 0.05) + 0.2 + 0.45) / 5  # .3
    expected = (cw0 + cw1 + cw2) / 3
    assert classwise_ece(PROBS5, LABELS5, n_bins=5) == pytest.approx(expected, abs=1e-15)
    # marginal CE with p = 1 is the same quantity
    assert marginal_ce(PROBS5, LABELS5, n_bins=5, p=1) == pytest.approx(expected, abs=1e-15)


def test_marginal_ce_l2_hand_computed():
    sq0 = (2 * 0.125**2 + 0.65**2 + 2 * 0.375**2) / 5
    sq1 = (2 * 0.425**2 + 2 * 0.3**2 + 0.3**2) / 5
    sq2 = (3 * (1 / 3 - 0.05) ** 2 + 0.2**2 + 0.45**2) / 5
    expected = np.sqrt((sq0 + sq1 + sq2) / 3)
    assert marginal_ce(PROBS5, LABELS5, n_bins=5, p=2) == pytest.approx(expected, abs=1e-15)


def test_classwise_ece_counts_absent_classes():
    # class 2 never occurs and has probability 0 everywhere: its ECE is 0 but it still
    # counts in the mean over K = 3 classes
    probs = np.array([[0.9, 0.1, 0.0], [0.2, 0.8, 0.0]])
    labels = np.array([0, 1])
    # 15 bins; class 0: .9 (y=1) gap .1, .2 (y=0) gap .2 -> (.1 + .2)/2 ; class 1 likewise
    expected = ((0.1 + 0.2) / 2 + (0.2 + 0.1) / 2 + 0.0) / 3
    assert classwise_ece(probs, labels) == pytest.approx(expected, abs=1e-15)


def test_ks_error_hand_computed():
    # sorted by conf: (.55,1) (.65,0) (.7,1) (.85,0) (.9,1)
    # cumsum(correct - conf) = .45, -.2, .1, -.75, -.65 -> max |.| = .75 -> KS = .75 / 5
    assert ks_error(PROBS5, LABELS5) == pytest.approx(0.15, abs=1e-15)


def test_ks_error_ties_do_not_depend_on_order():
    # two samples with the same confidence .6, one right and one wrong: the curves are
    # compared after the whole tie: |1 - 1.2| / 2 = .1 in either order
    probs = np.array([[0.6, 0.4], [0.6, 0.4]])
    assert ks_error(probs, np.array([0, 1])) == pytest.approx(0.1, abs=1e-15)
    assert ks_error(probs, np.array([1, 0])) == pytest.approx(0.1, abs=1e-15)


def test_debiased_ece_hand_computed():
    # one bin, 10 samples of conf .9, 5 correct: (.5 - .9)^2 - .5 * .5 / 9
    probs = np.tile([0.9, 0.1], (10, 1))
    labels = np.array([0] * 5 + [1] * 5)
    expected = np.sqrt(0.4**2 - 0.25 / 9)
    for binning in ("width", "mass"):
        got = debiased_ece(probs, labels, n_bins=1, binning=binning)
        assert got == pytest.approx(expected, abs=1e-15)
    # when the variance term dominates the estimate is clamped at 0
    assert debiased_ece(PROBS5, LABELS5, n_bins=1) == 0.0  # (.6 - .73)^2 < .24 / 4


def test_debiased_marginal_single_bin():
    # two classes, one bin; class 0: conf mean .9 vs freq .5 -> .16 - .25/9 (as above);
    # class 1: conf mean .1 vs freq .5 -> the same
    probs = np.tile([0.9, 0.1], (10, 1))
    labels = np.array([0] * 5 + [1] * 5)
    got = marginal_ce(probs, labels, n_bins=1, p=2, debiased=True)
    assert got == pytest.approx(np.sqrt(0.16 - 0.25 / 9), abs=1e-15)
    with pytest.raises(ValueError, match="p=2"):
        marginal_ce(probs, labels, p=1, debiased=True)


# ----------------------------------------------------------------------------- properties


@pytest.mark.parametrize(
    "metric", [ece, adaptive_ece, classwise_ece, ks_error, debiased_ece, marginal_ce]
)
def test_perfectly_calibrated_model_error_vanishes(metric):
    small = metric(*calibrated_sample(500, 4, 1))
    large = metric(*calibrated_sample(200_000, 4, 2))
    assert large < 0.01
    assert large < small


def test_metrics_ignore_sample_order():
    probs, labels = random_probs(3000, 6, 5)
    perm = np.random.default_rng(0).permutation(3000)
    for metric in (ece, mce, classwise_ece, adaptive_ece, ks_error, debiased_ece, marginal_ce):
        assert metric(probs[perm], labels[perm]) == pytest.approx(metric(probs, labels), abs=1e-13)


def _classwise_loop(probs, labels, n_bins):
    """Independent classwise ECE: explicit loops with the study's [a, b) bins."""
    n, k = probs.shape
    edges = np.linspace(0, 1, n_bins + 1)
    total = 0.0
    for j in range(k):
        x, t = probs[:, j], (labels == j).astype(float)
        e = 0.0
        for b in range(n_bins):
            hi_ok = x < edges[b + 1] if b < n_bins - 1 else x <= 1.0
            m = (x >= edges[b]) & hi_ok
            if m.any():
                e += m.sum() / n * abs(t[m].mean() - x[m].mean())
        total += e
    return total / k


@pytest.mark.parametrize("n_bins", [1, 2, 15])
def test_classwise_matches_independent_loop(n_bins):
    probs, labels = random_probs(2000, 12, 3, scale=3.0)
    probs[:5] = np.eye(12)[:5]  # exact 0 and 1 entries
    assert classwise_ece(probs, labels, n_bins) == pytest.approx(
        _classwise_loop(probs, labels, n_bins), abs=1e-12
    )


# ----------------------------------------------------------------------------- conformance


def test_ece_matches_netcal():
    netcal = pytest.importorskip("netcal.metrics")
    for seed in range(3):
        probs, labels = random_probs(4000, 10, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref_ece = netcal.ECE(bins=15).measure(probs, labels)
            ref_mce = netcal.MCE(bins=15).measure(probs, labels)
        assert ece(probs, labels) == pytest.approx(ref_ece, abs=1e-12)
        assert mce(probs, labels) == pytest.approx(ref_mce, abs=1e-12)


def test_matches_uncertainty_calibration_package():
    """Kumar et al.'s package: ``get_ece`` = equal-width plug-in top-label l1 (its bins are
    (a, b] vs the study's [a, b): identical on continuous data); ``get_equal_bins`` = our
    ``binning="mass"``; ``debias=True, p=2`` = ``debiased_ece``; ``mode="marginal"`` =
    ``marginal_ce``."""
    cu = pytest.importorskip("calibration.utils")
    probs, labels = random_probs(3000, 8, 11)
    eq_w, eq_m = cu.get_equal_prob_bins, cu.get_equal_bins

    def ref(p, debias, scheme, mode):
        return cu.lower_bound_scaling_ce(
            probs, labels, p=p, debias=debias, num_bins=15, binning_scheme=scheme, mode=mode
        )

    tol = dict(abs=1e-12)
    assert ece(probs, labels) == pytest.approx(cu.get_ece(probs, labels, num_bins=15), **tol)
    assert adaptive_ece(probs, labels) == pytest.approx(
        cu.get_ece_em(probs, labels, num_bins=15), **tol
    )
    assert ece(probs, labels, norm="l2", binning="mass") == pytest.approx(
        ref(2, False, eq_m, "top-label"), **tol
    )
    assert ece(probs, labels, norm="l2") == pytest.approx(ref(2, False, eq_w, "top-label"), **tol)
    assert debiased_ece(probs, labels) == pytest.approx(
        cu.get_top_calibration_error(probs, labels), **tol
    )
    assert debiased_ece(probs, labels, binning="width") == pytest.approx(
        ref(2, True, eq_w, "top-label"), **tol
    )
    assert marginal_ce(probs, labels) == pytest.approx(ref(2, False, eq_w, "marginal"), **tol)
    assert marginal_ce(probs, labels, debiased=True) == pytest.approx(
        ref(2, True, eq_w, "marginal"), **tol
    )
    assert marginal_ce(probs, labels, binning="mass") == pytest.approx(
        ref(2, False, eq_m, "marginal"), **tol
    )
    assert classwise_ece(probs, labels) == pytest.approx(ref(1, False, eq_w, "marginal"), **tol)


def test_ece_matches_torchmetrics():
    torch = pytest.importorskip("torch")
    tm = pytest.importorskip("torchmetrics.functional.classification")
    probs, labels = random_probs(3000, 10, 21)
    for norm in ("l1", "max"):
        ref = tm.multiclass_calibration_error(
            torch.from_numpy(probs), torch.from_numpy(labels), num_classes=10, n_bins=15, norm=norm
        )
        # torchmetrics accumulates in float32
        assert ece(probs, labels, norm=norm) == pytest.approx(float(ref), abs=1e-6)
