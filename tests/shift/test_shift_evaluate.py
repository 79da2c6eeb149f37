"""Clean-fitted calibrators under shift (calbench.shift.evaluate), the shift-logits file format,
the verbs evaluate-shift / corrupt-dataset / shift-report, and the report section."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from calbench.calibrators import get_calibrator, save_calibrator
from calbench.cli import main
from calbench.logits import save_logits
from calbench.metrics import METRICS
from calbench.report import shift as R
from calbench.shift import evaluate as E
from calbench.shift.logits import load_shift_logits, save_shift_logits
from calbench.split import save_split, study_split
from calbench.stats import resample_indices

K, N = 4, 400
CORR = ["gaussian_noise", "contrast"]


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """Clean logits of an over-confident model, its split, calibrators fitted on the validation
    half, and shift logits whose signal fades with the severity."""
    d = tmp_path_factory.mktemp("shift")
    rng = np.random.default_rng(0)
    y = rng.integers(0, K, size=N)
    signal = np.eye(K)[y] * 2.0
    z = (signal + rng.normal(size=(N, K))) * 3.0
    save_logits(d / "clean.npz", z, y, order_hash="h" * 64, model="m", dataset="toy")
    val, test = study_split(N, seed=0)
    save_split(d / "split.npz", val, test, order_hash=np.str_("h" * 64))
    shifted = np.empty((len(CORR), 5, len(test), K), np.float32)
    for c in range(len(CORR)):
        for s in range(5):
            keep = 1.0 - 0.18 * (s + 1) * (c + 1) / 2
            noise = rng.normal(size=(len(test), K))
            shifted[c, s] = (signal[test] * keep + noise) * 3.0
    save_shift_logits(
        d / "shift.npz", logits=shifted, labels=y[test], test_idx=test, corruptions=CORR,
        sha256=["a" * 64, "b" * 64], order_hash="h" * 64, model="m", dataset="toy",
    )  # fmt: skip
    cals = []
    for name, method in (("uncalibrated", "uncalibrated"), ("ts", "ts"), ("hist", "hist")):
        cal = get_calibrator(method)
        cal.fit(z[val], y[val])
        save_calibrator(cal, d / f"{name}.json")
        cals.append(d / f"{name}.json")
    return {"dir": d, "z": z, "y": y, "val": val, "test": test, "shifted": shifted, "cals": cals}


@pytest.mark.parametrize("metric", ["nll", "accuracy", "brier"])
def test_resampled_metric_equals_metric_on_the_resample(metric):
    rng = np.random.default_rng(3)
    p = _softmax(rng.normal(size=(300, 5)) * 3)
    y = rng.integers(0, 5, size=300)
    w = E.resample_weights(300, 7, seed=2)
    idx = np.concatenate(list(resample_indices(300, 7, 2)))
    got = E.resampled_metric(metric, p, y, w)
    want = [METRICS[metric](p[i], y[i]) for i in idx]
    assert np.allclose(got, want, rtol=1e-10, atol=1e-12)
    assert np.allclose(E.resampled_metric(metric, p, y, np.ones((1, 300))), METRICS[metric](p, y))


def test_resampled_metric_refuses_other_metrics():
    with pytest.raises(ValueError, match="cannot be resampled"):
        E.resampled_metric("ece", np.full((3, 2), 0.5), np.zeros(3, int), np.ones((1, 3)))


def test_evaluate_shift_values(study):
    d = study["dir"]
    rows, comp = E.evaluate_shift(
        d / "shift.npz", d / "clean.npz", d / "split.npz", study["cals"],
        metrics=["accuracy", "ece", "nll"], compare_metrics=["ece_ub", "nll"], n_bootstrap=50,
    )  # fmt: skip
    # 3 calibrators x 3 metrics x (val + clean test + 2 corruptions x 5 severities)
    assert len(rows) == 3 * 3 * (2 + 10)
    from calbench.calibrators import load_calibrator

    ts = load_calibrator(d / "ts.json")
    pick = {
        (r["method"], r["half"], r["corruption"], r["severity"], r["metric"]): r["value"]
        for r in rows
    }
    yt = study["y"][study["test"]]
    p = ts.predict_proba(study["shifted"][1, 3])
    assert pick[("ts", "test", "contrast", 4, "ece")] == pytest.approx(METRICS["ece"](p, yt))
    p0 = ts.predict_proba(study["z"][study["test"]])
    assert pick[("ts", "test", "clean", 0, "nll")] == pytest.approx(METRICS["nll"](p0, yt))
    # accuracy falls with severity for the uncalibrated model
    acc = [
        np.mean([pick[("uncalibrated", "test", c, s, "accuracy")] for c in CORR])
        for s in range(1, 6)
    ]
    assert acc[0] > acc[2] > acc[4]
    # comparisons: 2 metrics x 2 comparisons x 6 severities
    assert len(comp) == 2 * 2 * 6
    for r in comp:
        assert r["difference"] == pytest.approx(r["value"] - r["baseline_value"])
        assert 0 <= r["p_value"] <= 1
        if r["metric"] == "nll":
            assert r["ci_low"] <= r["ci_high"] and r["n_resamples"] == 50
        else:  # unbiased ECE: the test of equal calibration error, no interval
            assert np.isnan(r["ci_low"]) and np.isnan(r["ci_high"]) and r["n_resamples"] == 0
    # nll at severity s: the mean over corruptions
    r = next(c for c in comp if c["comparison"] == "ts_vs_uncalibrated" and c["severity"] == 2
             and c["metric"] == "nll")  # fmt: skip
    assert r["value"] == pytest.approx(np.mean([pick[("ts", "test", c, 2, "nll")] for c in CORR]))
    # ece_ub at severity s: the root of the mean unclipped U-statistic over corruptions, and
    # the p-value of ub_mean_test on the same U-statistics
    from calbench.shift.ub_compare import ub_mean_test

    unc = load_calibrator(d / "uncalibrated.json")
    jack = METRICS["ece_ub"].jackknife
    shifted = study["shifted"]
    ua = [jack(ts.predict_proba(shifted[c, 1]), yt, np.float32) for c in range(len(CORR))]
    ub = [jack(unc.predict_proba(shifted[c, 1]), yt, np.float32) for c in range(len(CORR))]
    r = next(c for c in comp if c["comparison"] == "ts_vs_uncalibrated" and c["severity"] == 2
             and c["metric"] == "ece_ub")  # fmt: skip
    t_a = np.mean([u.t for u in ua])
    assert r["value"] == pytest.approx(np.sqrt(max(t_a, 0.0)))
    assert r["p_value"] == pytest.approx(ub_mean_test(ua, ub)[2])
    # at severity 0: the study's paired test of equal calibration error
    from calbench.stats import ub_paired_test

    r0 = next(c for c in comp if c["comparison"] == "ts_vs_uncalibrated" and c["severity"] == 0
              and c["metric"] == "ece_ub")  # fmt: skip
    zt = study["z"][study["test"]].astype(np.float32)
    want = ub_paired_test("ece_ub", ts.predict_proba(zt), unc.predict_proba(zt), yt)
    assert r0["p_value"] == pytest.approx(want.p_value)
    assert r0["difference"] == pytest.approx(want.difference)
    # best: 5-fold cross-fitting inside the validation half on the compared metric
    from calbench.calibrators import get_calibrator as make
    from calbench.stats.selection import crossfit_scores

    makers = {m: (lambda m=m: make(m)) for m in ("uncalibrated", "ts", "hist")}
    zv, yv = study["z"][study["val"]].astype(np.float32), study["y"][study["val"]]
    for metric in ("ece_ub", "nll"):
        fit = crossfit_scores(makers, zv, yv, {metric: METRICS[metric]}, k=5, seed=0)
        best = next(c for c in comp if c["comparison"] == "best_vs_ts" and c["metric"] == metric)
        assert best["method"] == fit.best(metric)
    # deterministic
    rows2, comp2 = E.evaluate_shift(
        d / "shift.npz", d / "clean.npz", d / "split.npz", study["cals"],
        metrics=["accuracy", "ece", "nll"], compare_metrics=["ece_ub", "nll"], n_bootstrap=50,
    )  # fmt: skip
    assert rows2 == rows and comp2 == comp


def test_interval_of_a_mean_difference_is_the_paired_bootstrap(study):
    # at severity 0 the section's interval of a difference of means is calbench.stats'
    # paired percentile bootstrap with the same seed (whose coverage perf/bench_coverage.py
    # simulates for the paired comparisons)
    from calbench.calibrators import load_calibrator
    from calbench.stats import paired_bootstrap

    d = study["dir"]
    _, comp = E.evaluate_shift(
        d / "shift.npz", d / "clean.npz", d / "split.npz", study["cals"],
        metrics=["accuracy", "ece", "nll"], compare_metrics=["nll", "brier"], n_bootstrap=60,
        level=0.9, seed=4,
    )  # fmt: skip
    z, yt = study["z"][study["test"]].astype(np.float32), study["y"][study["test"]]  # as saved
    ts, unc = (load_calibrator(d / f"{m}.json").predict_proba(z) for m in ("ts", "uncalibrated"))
    for metric in ("nll", "brier"):
        r = next(c for c in comp if c["comparison"] == "ts_vs_uncalibrated"
                 and c["severity"] == 0 and c["metric"] == metric)  # fmt: skip
        ci = paired_bootstrap(metric, ts, unc, yt, 60, 0.9, 4, method="percentile")
        assert (r["ci_low"], r["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-9)
        assert r["difference"] == pytest.approx(ci.difference, rel=1e-9)


def test_evaluate_shift_refuses_mismatched_inputs(study, tmp_path):
    d = study["dir"]
    with pytest.raises(ValueError, match="need calibrators"):
        E.evaluate_shift(d / "shift.npz", d / "clean.npz", d / "split.npz", study["cals"][2:],
                         metrics=["ece"], compare_metrics=["ece_ub"])  # fmt: skip
    val, test = study_split(N, seed=1)
    save_split(tmp_path / "other.npz", val, test)
    with pytest.raises(ValueError, match="other test samples"):
        E.evaluate_shift(d / "shift.npz", d / "clean.npz", tmp_path / "other.npz", study["cals"],
                         metrics=["ece"], compare_metrics=[])  # fmt: skip
    with pytest.raises(ValueError, match="unknown metrics"):
        E.evaluate_shift(d / "shift.npz", d / "clean.npz", d / "split.npz", study["cals"],
                         metrics=["eec"], compare_metrics=[])  # fmt: skip


def test_shift_logits_format(study, tmp_path):
    data = load_shift_logits(study["dir"] / "shift.npz")
    assert data["corruptions"] == CORR and data["logits"].shape == (2, 5, len(study["test"]), K)
    with pytest.raises(ValueError, match="corruptions=1"):
        save_shift_logits(tmp_path / "x.npz", logits=np.zeros((2, 5, 3, K)), labels=[0, 1, 2],
                          test_idx=[0, 1, 2], corruptions=["a"], sha256=["x"], order_hash="h",
                          model="m", dataset="d")  # fmt: skip
    assert not (tmp_path / "x.npz").exists()
    with pytest.raises(FileNotFoundError, match="shift-logits"):
        load_shift_logits(tmp_path / "none.npz")


def _read(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_verbs_evaluate_shift_and_shift_report(study, tmp_path, capsys):
    d = study["dir"]
    rc = main([
        "evaluate-shift", "--shift-logits", str(d / "shift.npz"), "--logits", str(d / "clean.npz"),
        "--split", str(d / "split.npz"), "--calibrators", *map(str, study["cals"]),
        "--n-bootstrap", "20", "--out-metrics", str(tmp_path / "m.csv"),
        "--out-compare", str(tmp_path / "c.csv"),
    ])  # fmt: skip
    assert rc == 0 and len(_read(tmp_path / "m.csv")) == 3 * 4 * 12  # accuracy, ece, ece_ub, nll
    assert len(_read(tmp_path / "c.csv")) == 24
    spec = (
        '{"datasets": {"toy": {"display": "Toy <b>set</b>"}}, "calibrators": {"uncalibrated": '
        '{"display": "Uncal"}, "ts": {"display": "TS & co"}, "hist": {}}, "models": {"m": '
        '{"dataset": "toy", "display": {"name": "<script>x</script>"}}}, "level": 0.9}'
    )
    rc = main([
        "shift-report", "--metrics", str(tmp_path / "m.csv"), "--compare", str(tmp_path / "c.csv"),
        "--spec", spec, "--out-section", str(tmp_path / "s.json"), "--out-dir", str(tmp_path / "o"),
    ])  # fmt: skip
    assert rc == 0
    from calbench.report.build import read_section
    from calbench.report.render import render_partial

    html = render_partial("sections/shift.html.j2", section=read_section(tmp_path / "s.json"))
    assert "<script>" not in html and "&lt;script&gt;" in html and "TS &amp; co" in html
    assert "Toy &lt;b&gt;set&lt;/b&gt;" in html and html.count("data:image/png;base64,") == 1
    assert len(_read(tmp_path / "o" / "mean_ece.csv")) == 3
    # a bad input: one line, exit 2, nothing written
    rc = main(["evaluate-shift", "--shift-logits", str(tmp_path / "none.npz"), "--logits",
               str(d / "clean.npz"), "--split", str(d / "split.npz"), "--calibrators",
               str(study["cals"][0]), "--out-metrics", str(tmp_path / "bad.csv"),
               "--out-compare", str(tmp_path / "bad2.csv")])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and "shift-logits" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "bad.csv").exists()


def test_verb_corrupt_dataset_errors(tmp_path, capsys):
    rc = main(["corrupt-dataset", "--dataset", "cifar10", "--corruption", "fog", "--data-root",
               str(tmp_path), "--out", str(tmp_path / "fog.npy")])  # fmt: skip
    assert rc == 2 and "unknown corruption 'fog'" in capsys.readouterr().err
    rc = main(["corrupt-dataset", "--dataset", "cifar10", "--corruption", "fog", "--source",
               "published", "--data-root", str(tmp_path), "--out", str(tmp_path / "fog.npy")])  # fmt: skip
    assert rc == 2 and "--archive-file" in capsys.readouterr().err
    assert not (tmp_path / "fog.npy").exists()


def _rows(gains, methods=("uncalibrated", "ts")):
    """Metric rows of one model whose uncalibrated ECE is .2 and TS's .2 - gain at severity s."""
    rows = []
    for s, g in enumerate(gains):
        for m in methods:
            v = 0.2 if m == "uncalibrated" else 0.2 - g
            for c in ["clean"] if s == 0 else ["a", "b"]:
                for metric, val in (("ece", v), ("accuracy", 0.9 - 0.1 * s), ("nll", v * 3)):
                    rows.append({"dataset": "d", "model": "m", "method": m, "half": "test",
                                 "corruption": c, "severity": s, "metric": metric, "value": val})  # fmt: skip
    return rows


def test_findings_are_computed_from_the_data():
    shrink = R.findings(
        _rows([0.1, 0.08, 0.06, 0.04, 0.02, 0.01]), [], "d", ["uncalibrated", "ts"], {}
    )
    grow = R.findings(
        _rows([0.01, 0.02, 0.04, 0.06, 0.08, 0.1]), [], "d", ["uncalibrated", "ts"], {}
    )
    text_s, text_g = " ".join(shrink), " ".join(grow)
    assert "gain shrinks with severity" in text_s and "gain grows with severity" in text_g
    assert "from 90.00% on the clean test half to 40.00% at severity 5" in text_s
    assert "gain 10.00 points" in text_s and "gain 1.00 points" in text_s
    # most graceful = the smallest rise of mean ECE from clean to severity 5
    assert "Most graceful degradation: uncalibrated" in text_s
    assert "Most graceful degradation: ts" in text_g


def test_unbiased_ece_differences_are_tested_without_interval():
    # an unbiased-ECE row has a p-value and no interval: "none" for its interval, its p-value
    # printed, significance (p < 1 - level) counted with its direction; means keep intervals
    rows = _rows([0.1, 0.08, 0.06, 0.04, 0.02, 0.01])
    nan = float("nan")
    compare = []
    # severities 1-5 of ece_ub: better (p .01), worse (p .02), not distinguishable (p .3) x 3
    ub = [(-0.1, 0.2), (-0.02, 0.01), (0.03, 0.02), (-0.01, 0.3), (0.01, 0.3), (-0.05, 0.06)]
    for s in range(6):
        diff, p_ub = ub[s]
        for metric, lo, hi, p, d in (("ece_ub", nan, nan, p_ub, diff),
                                     ("nll", -0.3, -0.1, 0.01, -0.2)):  # fmt: skip
            compare.append({"dataset": "d", "model": "m", "severity": s, "metric": metric,
                            "comparison": "ts_vs_uncalibrated", "method": "ts",
                            "baseline": "uncalibrated", "value": 0.1, "baseline_value": 0.1 - d,
                            "difference": d, "ci_low": lo, "ci_high": hi, "p_value": p,
                            "n_resamples": 50})  # fmt: skip
    text = " ".join(R.findings(rows, compare, "d", ["uncalibrated", "ts"], {}))
    assert ("unbiased ECE under shift: significantly better in 1, significantly worse in 1, "
            "not distinguishable in 3 of 5") in text  # fmt: skip
    assert "NLL under shift: significantly better in 5, significantly worse in 0" in text
    html = R.section_html(rows, compare, [], {"datasets": {"d": {}}, "calibrators": {}})
    assert "Differences of the unbiased ECE have no interval" in html
    assert "cross-fitting inside the clean validation half" in html
    assert html.count(">none</td>") == 6 and ">0.010</td>" in html and ">0.300</td>" in html
    assert html.count('class="num sig"') == 2 + 6  # ece_ub p < .05 twice, nll six times
    assert "[-0.300, -0.100]" in html


def test_a_calibrator_scaling_its_logits_in_place_changes_no_other_rows(study, monkeypatch):
    """Every calibrator is applied to the same shifted logits: each gets a copy
    (calbench.isolation), so one that scales them in place changes only its own rows."""
    from calbench.calibrators import REGISTRY

    d = study["dir"]
    args = (d / "shift.npz", d / "clean.npz", d / "split.npz", study["cals"])
    kw = {"metrics": ["accuracy", "nll"], "compare_metrics": [], "n_bootstrap": 0}
    plain, _ = E.evaluate_shift(*args, **kw)
    real = REGISTRY["uncalibrated"].predict_proba

    def scaling(self, logits, **k):
        logits *= 10
        return real(self, logits, **k)

    monkeypatch.setattr(REGISTRY["uncalibrated"], "predict_proba", scaling)
    careless, _ = E.evaluate_shift(*args, **kw)
    others = [r for r in careless if r["method"] != "uncalibrated"]
    assert others == [r for r in plain if r["method"] != "uncalibrated"]
