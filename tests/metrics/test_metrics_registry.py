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
    "ece_ub",
    "ece_ub_mass",
    "cwece_ub",
    "ece_kull",
    "mce_kull",
    "cwece_kull",
    "brier_kull",
    "nll_kull",
    "calib_err_logloss",
    "refinement_logloss",
    "calib_err_brier",
    "refinement_brier",
    "aurc",
    "acc_at_90",
    "lac_size",
    "aps_size",
    "spiegelhalter_p",
    "ks_cal_p",
    "kuiper_cal_p",
    "lac_coverage",
    "aps_coverage",
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
    # percent is derived from the scale; the study's own percent metrics are among them
    assert {"accuracy", "ece", "mce", "cwece"} <= STUDY_PERCENT
    assert STUDY_PERCENT == {n for n, m in METRICS.items() if m.scale == 100.0}
    assert not {"nll", "brier", "nll_modern", "ece_kull"} & STUDY_PERCENT


@pytest.mark.parametrize("name", list(METRICS))
def test_every_metric_declares_every_fact(name):
    """Walks the registry: a metric added with a missing or inconsistent fact fails here."""
    m = METRICS[name]
    assert m.name == name
    assert m.missing_facts() == [], f"{name} lacks or contradicts {m.missing_facts()}"
    assert m.percent == (m.scale == 100.0)
    assert m.decimals <= 4 and m.display.strip() == m.display
    # the printed label, direction and interval are what every consumer reads
    from calbench import display as D
    from calbench import stats as S

    assert D.display_spec(name) == (m.scale, m.decimals, m.display)
    assert (name in D.HIGHER_IS_BETTER) == m.higher_is_better
    assert S.interval_method(name) == m.interval
    assert (name in S.NO_INTERVAL) == (m.interval is None)
    if m.interval is None:
        assert m.no_interval_reason.strip() and "\n" not in m.no_interval_reason
    # the paired test fits the metric's shape: McNemar for a 0/1 score, per-sample tests for
    # means of per-sample losses, the sign-flip test (valid for any metric) otherwise
    if m.paired_test == "mcnemar_exact":
        assert m.is_mean and m.higher_is_better
    if m.paired_test in ("paired_t", "wilcoxon"):
        assert m.is_mean
    # a metric's display labels are unique (tables and the registry name each other)
    labels = [x.display for x in METRICS.values()]
    assert labels.count(m.display) == 1


def test_registry_facts_known_values():
    assert (METRICS["accuracy"].higher_is_better, METRICS["ece"].higher_is_better) == (True, False)
    assert METRICS["cwece"].decimals == 3 and METRICS["ece"].decimals == 2
    assert METRICS["nll"].scale == 1.0 and METRICS["ece"].scale == 100.0
    assert METRICS["mce"].interval is None and METRICS["mce_kull"].interval is None
    assert METRICS["accuracy"].paired_test == "mcnemar_exact"
    assert METRICS["nll"].paired_test == METRICS["brier"].paired_test == "paired_t"
    assert METRICS["ece"].paired_test == "sign_flip"


VERDICT_METRICS = {
    "accuracy",
    "nll",
    "nll_modern",
    "brier",
    "brier_kull",
    "nll_kull",
    "ece_ub",
    "ece_ub_mass",
    "cwece_ub",
}


def test_verdicts_only_from_estimators_whose_bias_ignores_sharpness():
    assert {n for n, m in METRICS.items() if m.verdicts} == VERDICT_METRICS
    for name in ("ece", "mce", "cwece", "ace", "ece_l2_mass", "smece", "ks", "sbece", "dece"):
        assert METRICS[name].verdicts is False
    for name in ("ece_ub", "ece_ub_mass", "cwece_ub"):
        m = METRICS[name]
        assert (m.interval, m.paired_test, m.higher_is_better) == (
            "jackknife",
            "jackknife_z",
            False,
        )
        assert m.jackknife is not None and m.scale == 100.0


def test_verdicts_fact_is_required_and_consistent():
    base = METRICS["ece"]
    facts = {
        "display": "x",
        "scale": 1.0,
        "decimals": 2,
        "higher_is_better": False,
        "interval": None,
        "no_interval_reason": "why",
        "reference": "Someone 2020",
    }
    core = base.core
    assert M.Metric("x", core, paired_test="sign_flip", **facts).missing_facts() == ["verdicts"]
    # a verdict from the sign-flip test (its null is exchangeability) is inconsistent
    bad = M.Metric("x", core, paired_test="sign_flip", verdicts=True, **facts)
    assert bad.missing_facts() == ["verdicts"]
    # ... and says so: it is declared, but contradicts the paired test
    why = bad.fact_problems()["verdicts"]
    assert why.startswith("declares verdicts=True with paired_test 'sign_flip'")
    assert "verdicts=False" in why
    assert M.Metric("x", core, paired_test="sign_flip", **facts).fact_problems() == {"verdicts": ""}
    ok = M.Metric("x", core, paired_test="sign_flip", verdicts=False, **facts)
    assert ok.missing_facts() == []
    # the jackknife interval and test need the metric's leave-one-out form
    nojack = M.Metric("x", core, paired_test="jackknife_z", verdicts=True, **facts)
    assert nojack.missing_facts() == ["jackknife"]


def test_old_constructor_is_caught_by_the_fact_check():
    """A metric built with the old positional constructor still runs, but the registry check
    names every fact it lacks (no silent defaults for the label or direction)."""
    old = M.Metric("old", lambda p, y, dtype=None: 0.5, percent=True)
    p, y = random_probs()
    assert old(p, y) == 0.5
    assert old.scale == 100.0 and old.percent
    assert set(old.missing_facts()) == {
        "display",
        "decimals",
        "higher_is_better",
        "interval",
        "paired_test",
        "reference",
        "verdicts",
    }
    bare = M.Metric("bare", lambda p, y, dtype=None: 0.5)
    assert "scale" in bare.missing_facts() and not bare.percent
    # declared "no interval" needs its reason; an interval with a reason is inconsistent
    none = M.Metric("x", bare.core, interval=None)
    assert "no_interval_reason" in none.missing_facts()
    both = M.Metric("x", bare.core, interval="basic", no_interval_reason="why")
    assert "no_interval_reason" in both.missing_facts()
    with pytest.raises(ValueError, match="percent=True contradicts scale"):
        M.Metric("x", bare.core, percent=True, scale=1.0)


def test_a_new_metric_reaches_every_consumer(monkeypatch):
    """Adding a metric is one registry entry: display, direction and interval follow."""
    import importlib

    new = M.Metric(
        "neg_acc",
        lambda p, y, dtype=None: -float(np.mean(np.argmax(p, 1) == y)),
        display="Negated accuracy",
        scale=1.0,
        decimals=3,
        higher_is_better=True,
        interval="percentile",
        paired_test="sign_flip",
        reference="a test metric, 2026",
    )
    monkeypatch.setitem(METRICS, "neg_acc", new)
    from calbench import display as D
    from calbench import stats as S

    D2 = importlib.reload(D)
    try:
        assert D2.display_spec("neg_acc") == (1.0, 3, "Negated accuracy")
        assert "neg_acc" in D2.HIGHER_IS_BETTER
        assert S.interval_method("neg_acc") == "percentile"
        assert D2.best_mask(np.array([[-0.5, -0.7]]), "neg_acc").tolist() == [[True, False]]
    finally:
        monkeypatch.delitem(METRICS, "neg_acc")
        importlib.reload(D)


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


def test_joint_values_equal_each_metric_exactly():
    p, y = random_probs()
    joints = {m.joint for m in METRICS.values() if m.joint is not None}
    assert len(joints) == 3  # refinement split, conformal sets, calibration tests
    for name, m in METRICS.items():
        if m.joint is not None:
            assert m.joint(p, y, p.dtype)[name] == m(p, y), name


def test_metric_values_runs_each_joint_and_decomposition_once(monkeypatch):
    from calbench.metrics import refinement

    p, y = random_probs()
    p32 = p.astype(np.float32)
    calls = []
    real = refinement.fit_inverse_temperature
    monkeypatch.setattr(
        refinement, "fit_inverse_temperature", lambda *a: calls.append(1) or real(*a)
    )
    refinement._FITTED.clear()
    got = M.metric_values(dict(METRICS), p32, y, p32.dtype)
    assert len(calls) == 1  # the four split metrics share one fit
    refinement._FITTED.clear()
    assert got == {name: m(p32, y) for name, m in METRICS.items()}  # exactly, float32 rule too
