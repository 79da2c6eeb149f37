"""Verdicts under shift: plug-in calibration errors refused (calbench.shift.evaluate, the
evaluate-shift verb, config_check), "best" cross-fitted without scoring a calibrator on the
samples it was fitted on, and the test of equal mean calibration error over corruptions that
share their images (calbench.shift.ub_compare): brute-force jackknife and type-I error."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from scipy.special import ndtr

from calbench import steps
from calbench.calibrators import get_calibrator, save_calibrator
from calbench.cli import main
from calbench.config_check import check_config
from calbench.logits import save_logits
from calbench.metrics import METRICS
from calbench.shift import evaluate as E
from calbench.shift.logits import save_shift_logits
from calbench.shift.ub_compare import ub_mean_test
from calbench.split import save_split, study_split

K, N = 4, 300
CORR = ["gaussian_noise", "contrast"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    d = tmp_path_factory.mktemp("verdicts")
    rng = np.random.default_rng(5)
    y = rng.integers(0, K, size=N)
    z = (np.eye(K)[y] * 2.0 + rng.normal(size=(N, K))) * 3.0
    save_logits(d / "clean.npz", z, y, order_hash="h" * 64, model="m", dataset="toy")
    val, test = study_split(N, seed=0)
    save_split(d / "split.npz", val, test, order_hash=np.str_("h" * 64))
    shifted = np.empty((len(CORR), 5, len(test), K), np.float32)
    for c in range(len(CORR)):
        for s in range(5):
            shifted[c, s] = (
                np.eye(K)[y[test]] * (1.6 - 0.25 * s) + rng.normal(size=(len(test), K))
            ) * 3
    save_shift_logits(
        d / "shift.npz", logits=shifted, labels=y[test], test_idx=test, corruptions=CORR,
        sha256=["a" * 64, "b" * 64], order_hash="h" * 64, model="m", dataset="toy",
    )  # fmt: skip
    cals = []
    for name in ("uncalibrated", "ts", "hist", "iso"):
        cal = get_calibrator(name).fit(z[val], y[val])
        save_calibrator(cal, d / f"{name}.json")
        cals.append(d / f"{name}.json")
    return {"dir": d, "z": z, "y": y, "val": val, "test": test, "cals": cals}


def _run(study, **kw):
    d = study["dir"]
    args = {"metrics": ["accuracy", "ece", "nll"], "n_bootstrap": 20, **kw}
    return E.evaluate_shift(
        d / "shift.npz", d / "clean.npz", d / "split.npz", study["cals"], **args
    )


@pytest.mark.parametrize(("metric", "instead"), [("ece", "ece_ub"), ("mce", "ece_ub")])
def test_plug_in_errors_are_refused(study, metric, instead):
    with pytest.raises(
        ValueError, match=rf"shift.compare_metrics: '{metric}' is a plug-in.*use '{instead}'"
    ):
        _run(study, compare_metrics=[metric, "nll"])


def test_verb_refuses_a_plug_in_error_in_one_line(study, tmp_path, capsys):
    d = study["dir"]
    rc = main([
        "evaluate-shift", "--shift-logits", str(d / "shift.npz"), "--logits", str(d / "clean.npz"),
        "--split", str(d / "split.npz"), "--calibrators", *map(str, study["cals"]),
        "--compare-metrics", "ece,nll", "--out-metrics", str(tmp_path / "m.csv"),
        "--out-compare", str(tmp_path / "c.csv"),
    ])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "use 'ece_ub'" in err
    assert not (tmp_path / "m.csv").exists() and not (tmp_path / "c.csv").exists()


def test_config_check_refuses_a_plug_in_shift_comparison():
    config = yaml.safe_load(open("config/test_shift.yaml"))
    assert config["shift"]["compare_metrics"] == ["ece_ub", "nll"]
    assert check_config(config) == []
    config["shift"]["compare_metrics"] = ["ece", "nll"]
    (problem,) = check_config(config)
    assert problem.startswith("shift.compare_metrics: 'ece' is a plug-in") and "'ece_ub'" in problem


class _Recorder:
    """A calibrator wrapper that remembers the rows it was fitted on and fails if it is asked
    to predict any of them; every row it sees is logged."""

    seen: list = []

    def __init__(self, inner):
        self.inner = inner
        self.fitted = set()

    def fit(self, logits, labels):
        self.fitted = {r.tobytes() for r in np.asarray(logits)}
        _Recorder.seen += list(self.fitted)
        self.inner.fit(logits, labels)
        return self

    def predict_proba(self, logits):
        rows = {r.tobytes() for r in np.asarray(logits)}
        assert not rows & self.fitted, "a calibrator was scored on samples it was fitted on"
        _Recorder.seen += list(rows)
        return self.inner.predict_proba(logits)


def test_crossfitted_best_never_scores_on_fitting_data(study, monkeypatch):
    real = steps.get_calibrator
    monkeypatch.setattr(steps, "get_calibrator", lambda m, **p: _Recorder(real(m, **p)))
    _Recorder.seen = []
    _, comp = _run(study, compare_metrics=["ece_ub", "nll"], select_folds=3)
    z32 = study["z"].astype(np.float32)  # as saved
    val_rows = {r.tobytes() for r in z32[study["val"]]}
    # every refit calibrator saw validation rows only, none of them in both fit and score
    assert _Recorder.seen and set(_Recorder.seen) <= val_rows
    # 4 candidates x 3 folds: each fitted once per fold, on 2/3 of the validation half
    assert len(_Recorder.seen) == 4 * 3 * len(study["val"])
    picks = {r["metric"]: r["method"] for r in comp if r["comparison"] == "best_vs_ts"}
    assert set(picks) == {"ece_ub", "nll"} and set(picks.values()) <= {
        "uncalibrated",
        "ts",
        "hist",
        "iso",
    }


def test_select_exclude_removes_candidates(study):
    _, comp = _run(study, compare_metrics=["nll"], select_exclude=["hist", "iso", "uncalibrated"])
    assert {r["method"] for r in comp if r["comparison"] == "best_vs_ts"} == {"ts"}
    with pytest.raises(ValueError, match="select_exclude names"):
        _run(study, compare_metrics=["nll"], select_exclude=["nope"])
    with pytest.raises(ValueError, match="select_folds must be an integer"):
        _run(study, compare_metrics=["nll"], select_folds=1)


def _probs(conf, correct):
    """Rows with ``conf`` on class 0 (the label) when correct, else on class 1 + i mod 3."""
    n = conf.shape[0]
    p = np.repeat(((1 - conf) / (K - 1))[:, None], K, axis=1)
    p[np.arange(n), np.where(correct, 0, 1 + np.arange(n) % (K - 1))] = conf
    return p


def _sets(rng, n, n_corr, delta_a, delta_b):
    """U-statistics of two methods (confidence x + delta) on corrupted sets sharing their
    images: correctness ``u_i < x_ci`` with one ``u_i`` per image (dependent across sets)."""
    zi, u, y = rng.standard_normal(n), rng.random(n), np.zeros(n, dtype=np.int64)
    jack = METRICS["ece_ub"].jackknife
    a, b = [], []
    for c in range(n_corr):
        lo = 0.35 + 0.2 * c
        x = lo + (0.92 - lo) * ndtr(0.7 * zi + 0.714 * rng.standard_normal(n))
        a.append(jack(_probs(x + delta_a, u < x), y, np.float64))
        b.append(jack(_probs(x + delta_b, u < x), y, np.float64))
    return a, b


def test_ub_mean_test_is_the_jackknife_over_images():
    # brute force: leave image i out of every set and both methods, recompute every T
    rng = np.random.default_rng(1)
    n, n_corr = 40, 2
    zi, u, y = rng.standard_normal(n), rng.random(n), np.zeros(n, dtype=np.int64)
    pa, pb = [], []
    for _ in range(n_corr):
        x = 0.4 + 0.5 * ndtr(0.7 * zi + 0.7 * rng.standard_normal(n))
        pa.append(_probs(x + 0.05, u < x))
        pb.append(_probs(x, u < x))
    t = lambda p, yy: METRICS["ece_ub"].jackknife(p, yy, np.float64).t  # noqa: E731
    d_loo = np.array([
        np.mean([t(np.delete(pa[c], i, 0), y[1:]) - t(np.delete(pb[c], i, 0), y[1:])
                 for c in range(n_corr)])
        for i in range(n)
    ])  # fmt: skip
    se = math.sqrt((n - 1) / n * np.sum((d_loo - d_loo.mean()) ** 2))
    d = np.mean([t(pa[c], y) - t(pb[c], y) for c in range(n_corr)])
    a = [METRICS["ece_ub"].jackknife(p, y, np.float64) for p in pa]
    b = [METRICS["ece_ub"].jackknife(p, y, np.float64) for p in pb]
    diff, z, p = ub_mean_test(a, b)
    assert z == pytest.approx(d / se, rel=1e-9)
    assert p == pytest.approx(2 * ndtr(-abs(d / se)), rel=1e-9)
    ta, tb = np.mean([x.t for x in a]), np.mean([x.t for x in b])
    assert diff == pytest.approx(math.sqrt(max(ta, 0)) - math.sqrt(max(tb, 0)))
    # swapping the methods negates z and keeps p
    assert ub_mean_test(b, a)[1:] == pytest.approx((-z, p))
    with pytest.raises(ValueError, match="same >= 1 corrupted sets"):
        ub_mean_test(a, b[:1])
    with pytest.raises(ValueError, match="same images"):
        ub_mean_test(a, [b[0], METRICS["ece_ub"].jackknife(pb[1][:-1], y[:-1], np.float64)])


def test_ub_mean_test_type_one_error_and_power_small_simulation():
    # null: x + .05 against x - .05 on every corrupted set (both squared errors exactly .05^2,
    # correctness shared across sets through u_i); alternative: x + .05 against x
    rng = np.random.default_rng(11)
    reps, n, n_corr = 150, 1000, 3
    null = np.mean(
        [ub_mean_test(*_sets(rng, n, n_corr, 0.05, -0.05))[2] < 0.05 for _ in range(reps)]
    )
    power = np.mean(
        [ub_mean_test(*_sets(rng, n, n_corr, 0.05, 0.0))[2] < 0.05 for _ in range(reps)]
    )
    mc = math.sqrt(0.05 * 0.95 / reps)
    assert null <= 0.05 + 2.5 * mc, null  # 0.05 + MC error
    assert power >= 0.3, power  # the test is not empty at n = 1,000, 3 sets
