"""METRICS registry, compute_metrics, and input validation of every public metric."""

import numpy as np
import pytest

import calbench.metrics as M
from calbench.metrics import METRICS, STUDY_PERCENT, compute_metrics

NAMES = [
    "accuracy",
    "ece",
    "mce",
    "cwece",
    "ace",
    "ece_l2_mass",
    "nll",
    "nll_modern",
    "brier",
    "ks",
    "sbece",
    "dece",
    "debiased_ece",
    "marginal_ce",
    "ece_sweep",
    "smece",
    "ece_kull",
    "mce_kull",
    "cwece_kull",
    "brier_kull",
    "nll_kull",
]

PUBLIC = [
    M.ece_kull,
    M.mce_kull,
    M.cwece_kull,
    M.accuracy,
    M.ece,
    M.mce,
    M.classwise_ece,
    M.adaptive_ece,
    M.nll,
    M.brier,
    M.ks_error,
    M.sb_ece,
    M.dece,
    M.debiased_ece,
    M.marginal_ce,
    M.ece_sweep,
    M.reliability_bins,
]
BINNED = [
    M.ece,
    M.mce,
    M.classwise_ece,
    M.adaptive_ece,
    M.sb_ece,
    M.dece,
    M.debiased_ece,
    M.marginal_ce,
    M.reliability_bins,
]


def random_probs(n=400, k=5, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, k)) * 2
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True), rng.integers(0, k, n)


def test_registry_names_and_percent():
    assert list(METRICS) == NAMES
    assert STUDY_PERCENT == {"accuracy", "ece", "mce", "cwece"}


def test_registry_uses_study_defaults():
    p, y = random_probs()
    assert METRICS["ece"](p, y) == M.ece(p, y, n_bins=15)
    assert METRICS["mce"](p, y) == M.mce(p, y, n_bins=15)
    assert METRICS["cwece"](p, y) == M.classwise_ece(p, y, n_bins=15)
    assert METRICS["ace"](p, y) == M.adaptive_ece(p, y, n_bins=15)
    assert METRICS["ece_l2_mass"](p, y) == M.ece(p, y, norm="l2", binning="mass")
    assert METRICS["nll"](p, y) == M.nll(p, y, rule="study")
    assert METRICS["nll_modern"](p, y) == M.nll(p, y, rule="modern")
    assert METRICS["brier"](p, y) == M.brier(p, y)
    assert METRICS["ks"](p, y) == M.ks_error(p, y)
    assert METRICS["sbece"](p, y) == M.sb_ece(p, y)
    assert METRICS["dece"](p, y) == M.dece(p, y)
    assert METRICS["debiased_ece"](p, y) == M.debiased_ece(p, y)
    assert METRICS["marginal_ce"](p, y) == M.marginal_ce(p, y)
    assert METRICS["accuracy"](p, y) == M.accuracy(p, y)


def test_per_sample_decomposition_reproduces_value():
    p, y = random_probs()
    idx = np.random.default_rng(1).integers(0, len(y), len(y))
    for name, m in METRICS.items():
        if m.stats is None:
            continue
        arrays = m.stats(p, y, p.dtype)
        assert all(a.shape == y.shape for a in arrays), name
        assert m.reduce(*arrays) == pytest.approx(m(p, y), abs=1e-15), name
        # a resample of the per-sample arrays equals the metric of the resampled input
        sub = m.reduce(*(a[idx] for a in arrays))
        assert sub == pytest.approx(m(p[idx], y[idx]), abs=1e-12), name


def test_compute_metrics_matches_individual_calls():
    p, y = random_probs()
    got = compute_metrics(p, y)
    assert list(got) == NAMES
    for name, value in got.items():
        assert value == pytest.approx(METRICS[name](p, y), abs=1e-15), name
        assert isinstance(value, float)
    assert compute_metrics(p, y, ["ece"]) == {"ece": METRICS["ece"](p, y)}
    with pytest.raises(ValueError, match="unknown metric"):
        compute_metrics(p, y, ["ECE"])


def test_nll_modern_keeps_float32_rule_in_registry():
    p, y = random_probs()
    p[0] = np.eye(5)[(y[0] + 1) % 5]  # a confident mistake: capped at -log(eps)
    p32 = p.astype(np.float32)
    assert METRICS["nll_modern"](p32, y) == M.nll(p32, y, rule="modern")
    assert compute_metrics(p32, y, ["nll_modern"])["nll_modern"] == M.nll(p32, y, rule="modern")
    assert METRICS["nll_modern"](p32, y) < METRICS["nll_modern"](p, y)


GOOD_P, GOOD_Y = random_probs(20, 4, 3)
NAN_P = GOOD_P.copy()
NAN_P[3, 1] = np.nan
BAD_INPUTS = {
    "nan": (NAN_P, GOOD_Y, "NaN"),
    "1d_probs": (GOOD_P[:, 0], GOOD_Y, "2-D"),
    "label_count": (GOOD_P, GOOD_Y[:-1], "one label per row"),
    "label_range": (GOOD_P, np.where(GOOD_Y == 0, 4, GOOD_Y), r"\[0, 3\]"),
    "negative_label": (GOOD_P, np.where(GOOD_Y == 0, -1, GOOD_Y), r"\[0, 3\]"),
    "float_labels": (GOOD_P, GOOD_Y + 0.5, "integer"),
    "row_sums": (GOOD_P * 0.9, GOOD_Y, "sum to 1"),
    "logits": (np.log(GOOD_P), GOOD_Y, "logits"),
    "empty": (np.empty((0, 4)), np.empty(0, dtype=int), "empty"),
    "one_class": (np.ones((3, 1)), np.zeros(3, dtype=int), "2 classes"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
@pytest.mark.parametrize(
    "fn",
    PUBLIC + list(METRICS.values()),
    ids=lambda f: getattr(f, "name", getattr(f, "__name__", "?")),
)
def test_bad_inputs_raise_one_line_value_error(fn, case):
    probs, labels, match = BAD_INPUTS[case]
    with pytest.raises(ValueError, match=match) as err:
        fn(probs, labels)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("fn", BINNED, ids=lambda f: f.__name__)
@pytest.mark.parametrize("n_bins", [0, -3, 1.5, True, "15"])
def test_bad_n_bins(fn, n_bins):
    with pytest.raises(ValueError, match="n_bins"):
        fn(GOOD_P, GOOD_Y, n_bins=n_bins)


def test_bad_choices():
    with pytest.raises(ValueError, match="norm"):
        M.ece(GOOD_P, GOOD_Y, norm="l3")
    with pytest.raises(ValueError, match="binning"):
        M.ece(GOOD_P, GOOD_Y, binning="equal")
    with pytest.raises(ValueError, match="binning"):
        M.marginal_ce(GOOD_P, GOOD_Y, binning="equal")
    with pytest.raises(ValueError, match="p must"):
        M.marginal_ce(GOOD_P, GOOD_Y, p=0)


def test_cli_import_stays_light():
    import subprocess
    import sys

    code = (
        "import sys, calbench.metrics, calbench.stats;"
        "heavy = [m for m in ('torch', 'scipy', 'sklearn', 'matplotlib') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
