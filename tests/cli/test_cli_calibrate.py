"""The verbs fit-calibrator, evaluate and compare, run through the real CLI entry point."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from calbench.functional import softmax
from calbench.split import save_split, study_split

N, K = 300, 4


def _main(argv):
    from calbench.cli import main

    return main([str(a) for a in argv])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Over-confident synthetic logits (labels drawn from softmax(z / 3)) and the study split."""
    d = tmp_path_factory.mktemp("cal")
    rng = np.random.default_rng(0)
    z = (rng.normal(size=(N, K)) * 4.0).astype(np.float32)
    p_true = softmax(z / 3.0)
    y = np.array([rng.choice(K, p=row) for row in p_true], dtype=np.int64)
    logits = d / "logits.npz"
    np.savez(logits, logits=z, labels=y, order_hash="abc", model="mod", dataset="ds")
    val, test = study_split(N)
    split = d / "split.npz"
    save_split(split, val, test)
    return {"dir": d, "z": z, "y": y, "val": val, "test": test, "logits": logits, "split": split}


def _read(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _ece15(p, y):
    """Independent top-label ECE, 15 equal-width bins [a, b), confidence 1 in the last bin."""
    conf, pred = p.max(1), p.argmax(1)
    total = 0.0
    for m in range(15):
        lo, hi = m / 15, (m + 1) / 15
        sel = (conf >= lo) & ((conf < hi) if m < 14 else (conf <= 1.0))
        if sel.any():
            total += sel.sum() / len(y) * abs((pred[sel] == y[sel]).mean() - conf[sel].mean())
    return total


def test_fit_calibrator_uses_only_the_validation_half(data, tmp_path):
    from calbench.calibrators import get_calibrator, load_calibrator

    out = tmp_path / "cal" / "ts.json"
    assert (
        _main(
            [
                "fit-calibrator",
                "--logits",
                data["logits"],
                "--split",
                data["split"],
                "--method",
                "ts",
                "--out",
                out,
            ]
        )
        == 0
    )
    ours = load_calibrator(out)
    ref = get_calibrator("ts").fit(data["z"][data["val"]], data["y"][data["val"]])
    np.testing.assert_array_equal(ours.predict_proba(data["z"]), ref.predict_proba(data["z"]))
    # fitting on the test half instead would give another temperature
    other = get_calibrator("ts").fit(data["z"][data["test"]], data["y"][data["test"]])
    assert not np.array_equal(ours.predict_proba(data["z"]), other.predict_proba(data["z"]))


def test_fit_calibrator_params_reach_the_constructor(data, tmp_path):
    out = tmp_path / "hist.json"
    assert (
        _main(
            [
                "fit-calibrator",
                "--logits",
                data["logits"],
                "--split",
                data["split"],
                "--method",
                "hist",
                "--params",
                '{"n_bins": 7}',
                "--out",
                out,
            ]
        )
        == 0
    )
    saved = json.loads(out.read_text())
    assert saved["method"] == "hist" and saved["params"] == {"n_bins": 7, "precision": "float64"}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--method", "nope"], "unknown calibrator 'nope'"),
        (["--method", "ts", "--params", "{bad"], "--params is not valid JSON"),
        (["--method", "ts", "--params", "[1]"], "must be a JSON object"),
    ],
)
def test_fit_calibrator_bad_input_one_line_no_file(data, tmp_path, capsys, args, message):
    out = tmp_path / "x.json"
    rc = _main(
        [
            "fit-calibrator",
            "--logits",
            data["logits"],
            "--split",
            data["split"],
            *args,
            "--out",
            out,
        ]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and message in err and len(err.splitlines()) == 1
    assert not out.exists() and not list(tmp_path.iterdir())


def test_split_of_another_size_is_refused(data, tmp_path, capsys):
    bad = tmp_path / "split.npz"
    save_split(bad, *study_split(N + 2))
    rc = _main(
        [
            "fit-calibrator",
            "--logits",
            data["logits"],
            "--split",
            bad,
            "--method",
            "ts",
            "--out",
            tmp_path / "c.json",
        ]
    )
    assert rc == 2 and "logits have 300 rows" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()


def test_missing_logits_file(tmp_path, capsys):
    rc = _main(
        [
            "fit-calibrator",
            "--logits",
            tmp_path / "no.npz",
            "--split",
            tmp_path / "s.npz",
            "--method",
            "ts",
            "--out",
            tmp_path / "c.json",
        ]
    )
    assert rc == 2 and "run calbench cache-logits first" in capsys.readouterr().err


@pytest.fixture(scope="module")
def fitted(data):
    paths = {}
    for method in ("uncalibrated", "ts", "hist"):
        paths[method] = data["dir"] / f"{method}.json"
        assert (
            _main(
                [
                    "fit-calibrator",
                    "--logits",
                    data["logits"],
                    "--split",
                    data["split"],
                    "--method",
                    method,
                    "--out",
                    paths[method],
                ]
            )
            == 0
        )
    return paths


def test_evaluate_known_answers_both_halves(data, fitted, tmp_path):
    out = tmp_path / "m.csv"
    assert (
        _main(
            [
                "evaluate",
                "--logits",
                data["logits"],
                "--split",
                data["split"],
                "--calibrator",
                fitted["uncalibrated"],
                "--metrics",
                "accuracy,ece,nll",
                "--n-bootstrap",
                "0",
                "--out",
                out,
            ]
        )
        == 0
    )
    rows = _read(out)
    assert list(rows[0]) == [
        "dataset",
        "model",
        "method",
        "half",
        "metric",
        "value",
        "ci_low",
        "ci_high",
    ]
    assert len(rows) == 6
    got = {(r["half"], r["metric"]): r for r in rows}
    for half, idx in (("test", data["test"]), ("val", data["val"])):
        p, y = softmax(data["z"][idx]), data["y"][idx]
        assert float(got[half, "accuracy"]["value"]) == pytest.approx(
            (p.argmax(1) == y).mean(), abs=1e-15
        )
        assert float(got[half, "ece"]["value"]) == pytest.approx(_ece15(p, y), abs=1e-12)
        # NLL, study rule (sklearn<=1.0): clip to [1e-15, 1-1e-15], renormalise, mean -log p_y
        q = np.clip(p, 1e-15, 1 - 1e-15)
        q /= q.sum(1, keepdims=True)
        assert float(got[half, "nll"]["value"]) == pytest.approx(
            -np.log(q[np.arange(len(y)), y]).mean(), rel=1e-12
        )
        assert got[half, "ece"]["ci_low"] == "" and got[half, "ece"]["method"] == "uncalibrated"
        assert got[half, "ece"]["model"] == "mod" and got[half, "ece"]["dataset"] == "ds"


def test_evaluate_bootstrap_intervals_bracket_the_value(data, fitted, tmp_path):
    out = tmp_path / "m.csv"
    argv = [
        "evaluate",
        "--logits",
        data["logits"],
        "--split",
        data["split"],
        "--calibrator",
        fitted["ts"],
        "--metrics",
        "ece,brier",
        "--halves",
        "test",
        "--n-bootstrap",
        "50",
        "--seed",
        "3",
        "--name",
        "temp",
        "--out",
        out,
    ]
    assert _main(argv) == 0
    rows = _read(out)
    assert {r["half"] for r in rows} == {"test"} and {r["method"] for r in rows} == {"temp"}
    for r in rows:
        if r["metric"] == "ece":  # no interval covered ECE as stated (the registry says why)
            assert r["ci_low"] == r["ci_high"] == ""
            continue
        lo, v, hi = float(r["ci_low"]), float(r["value"]), float(r["ci_high"])
        assert lo < hi and lo <= v * 1.5 and hi >= v * 0.5
    first = out.read_bytes()
    assert _main(argv) == 0 and out.read_bytes() == first  # deterministic with the seed


def test_evaluate_unknown_metric(data, fitted, tmp_path, capsys):
    rc = _main(
        [
            "evaluate",
            "--logits",
            data["logits"],
            "--split",
            data["split"],
            "--calibrator",
            fitted["ts"],
            "--metrics",
            "ece,eec",
            "--out",
            tmp_path / "m.csv",
        ]
    )
    assert rc == 2 and "unknown metrics ['eec']" in capsys.readouterr().err
    assert not (tmp_path / "m.csv").exists()


def test_compare_best_vs_baselines(data, fitted, tmp_path):
    from calbench import stats as S
    from calbench.calibrators import get_calibrator, load_calibrator
    from calbench.metrics import METRICS
    from calbench.stats.selection import crossfit_scores

    out = tmp_path / "cmp.csv"
    assert (
        _main(
            [
                "compare",
                "--logits",
                data["logits"],
                "--split",
                data["split"],
                "--calibrators",
                *fitted.values(),
                "--metrics",
                "ece_ub,accuracy",
                "--n-bootstrap",
                "100",
                "--select-folds",
                "3",
                "--out",
                out,
            ]
        )
        == 0
    )
    rows = _read(out)
    zt, yt = data["z"][data["test"]], data["y"][data["test"]]
    zv, yv = data["z"][data["val"]], data["y"][data["val"]]
    cals = {m: load_calibrator(p) for m, p in fitted.items()}
    probs = {m: c.predict_proba(zt) for m, c in cals.items()}
    methods = list(fitted)
    # the best method is picked by 3-fold cross-fitting inside the validation half (each
    # calibrator refitted from its method and hyperparameters); the test half measures it
    makers = {m: (lambda c=c: get_calibrator(c.name, **c.get_params())) for m, c in cals.items()}
    chosen = {k: METRICS[k] for k in ("ece_ub", "accuracy")}
    cross = crossfit_scores(makers, zv, yv, chosen, k=3, seed=0)
    best_ece = cross.best("ece_ub")
    best_acc = cross.best("accuracy", higher_is_better=True)
    expected = []
    for metric, best in (("ece_ub", best_ece), ("accuracy", best_acc)):
        expected += [
            (metric, f"vs:{b}", m, b) for b in ("uncalibrated", "ts") for m in methods if m != b
        ]
        expected += [(metric, "best", best, m) for m in methods if m != best]
    got = [(r["metric"], r["family"], r["method"], r["baseline"]) for r in rows]
    assert got == expected  # no self-comparisons
    assert all(r["method"] != r["baseline"] for r in rows)
    assert {r["selected_on"] for r in rows if r["family"] == "best"} == {"val:3-fold cross-fit"}
    assert {r["n_resamples"] for r in rows} == {"100"}
    for metric in ("ece_ub", "accuracy"):  # the distinct pairs of the metric's questions
        pairs = {frozenset((r["method"], r["baseline"])) for r in rows if r["metric"] == metric}
        assert {r["family_size"] for r in rows if r["metric"] == metric} == {str(len(pairs))}
    first = next(r for r in rows if r["family"] == "best" and r["metric"] == "ece_ub")
    assert first["method"] == best_ece and first["interval"] == "none"
    assert first["test"] == "jackknife_z" and first["p_floor"] == "0.0"
    test = S.paired_test("ece_ub", probs[best_ece], probs[first["baseline"]], yt)
    value = METRICS["ece_ub"](probs[best_ece], yt)
    against = METRICS["ece_ub"](probs[first["baseline"]], yt)
    assert float(first["value"]) == pytest.approx(value)
    assert float(first["difference"]) == pytest.approx(value - against, abs=1e-15)
    assert first["direction"] == ("better" if value < against else "worse")
    assert first["ci_low"] == first["ci_high"] == ""  # no interval of the difference
    assert float(first["p_value"]) == pytest.approx(test.p_value)
    assert "equal population" in first["null_hypothesis"]
    # Holm once per metric over the distinct pairs of its questions
    for metric in ("ece_ub", "accuracy"):
        first: dict = {}
        for r in rows:
            if r["metric"] == metric:
                first.setdefault(frozenset((r["method"], r["baseline"])), float(r["p_value"]))
        want = dict(zip(first, S.holm(list(first.values())), strict=True))
        group = [r for r in rows if r["metric"] == metric]
        np.testing.assert_allclose(
            [float(r["p_holm"]) for r in group],
            [want[frozenset((r["method"], r["baseline"]))] for r in group],
        )
    acc = [r for r in rows if r["metric"] == "accuracy"]
    assert all(r["interval"] == "percentile" and r["test"] == "mcnemar_exact" for r in acc)
    from calbench.stats import paired_bootstrap

    a0 = acc[0]
    ref = paired_bootstrap(
        "accuracy", probs[a0["method"]], probs[a0["baseline"]], yt, n_resamples=100, seed=0
    )
    assert (float(a0["ci_low"]), float(a0["ci_high"])) == pytest.approx((ref.low, ref.high))
    assert all(r["method"] == best_acc for r in acc if r["family"] == "best")


def test_compare_refuses_a_plug_in_metric(data, fitted, tmp_path, capsys):
    out = tmp_path / "cmp.csv"
    argv = ["compare", "--logits", data["logits"], "--split", data["split"],
            "--calibrators", *fitted.values(), "--metrics", "ece,nll", "--out", out]  # fmt: skip
    assert _main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "'ece' is a plug-in estimate" in err and "use 'ece_ub'" in err
    assert len(err.splitlines()) == 1 and not out.exists()


def test_compare_missing_baseline(data, fitted, tmp_path, capsys):
    rc = _main(
        [
            "compare",
            "--logits",
            data["logits"],
            "--split",
            data["split"],
            "--calibrators",
            fitted["hist"],
            "--baselines",
            "ts",
            "--out",
            tmp_path / "c.csv",
        ]
    )
    assert rc == 2 and "--baselines names 'ts'" in capsys.readouterr().err


def _evaluate_argv(data, calibrator, out, *extra):
    return [
        "evaluate",
        "--logits",
        data["logits"],
        "--split",
        data["split"],
        "--calibrator",
        calibrator,
        "--metrics",
        "ece,brier,nll",
        "--n-bootstrap",
        "40",
        "--out",
        out,
        *extra,
    ]


def test_evaluate_intervals_only_for_the_chosen_halves_and_metrics(data, fitted, tmp_path):
    """--ci-halves test --ci-metrics nll,brier: exactly those rows get the same interval as
    with intervals everywhere (same seed), the others keep their value with empty bounds; ECE
    has no interval anywhere (Metric.interval is None)."""
    from calbench.calibrators import load_calibrator
    from calbench.metrics import METRICS
    from calbench.stats import bootstrap_ci

    full, some = tmp_path / "full.csv", tmp_path / "some.csv"
    assert _main(_evaluate_argv(data, fitted["ts"], full)) == 0
    argv = _evaluate_argv(
        data, fitted["ts"], some, "--ci-halves", "test", "--ci-metrics", "nll,brier"
    )
    assert _main(argv) == 0
    a = {(r["half"], r["metric"]): r for r in _read(full)}
    b = {(r["half"], r["metric"]): r for r in _read(some)}
    assert sorted(a) == sorted(b) and len(b) == 6
    with_ci = {("test", "nll"), ("test", "brier")}
    for key in b:
        assert b[key]["value"] == a[key]["value"]
        if key in with_ci:
            assert (b[key]["ci_low"], b[key]["ci_high"]) == (a[key]["ci_low"], a[key]["ci_high"])
            assert float(b[key]["ci_low"]) < float(b[key]["ci_high"])
        else:
            assert b[key]["ci_low"] == b[key]["ci_high"] == ""
            assert (a[key]["ci_low"] == "") == (key[1] == "ece")
    # the interval is calbench.stats.bootstrap_ci of the test half's calibrated probabilities
    zt, yt = data["z"][data["test"]], data["y"][data["test"]]
    p = load_calibrator(fitted["ts"]).predict_proba(zt)
    ref = bootstrap_ci(METRICS["nll"], p, yt, n_resamples=40, seed=0)
    assert float(b["test", "nll"]["ci_low"]) == pytest.approx(ref.low, rel=1e-12)
    assert float(b["test", "nll"]["ci_high"]) == pytest.approx(ref.high, rel=1e-12)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--ci-metrics", "ece,mce"], "--ci-metrics names ['mce']"),
        (["--halves", "test", "--ci-halves", "val"], "--ci-halves names ['val']"),
    ],
)
def test_evaluate_interval_selection_must_be_evaluated(
    data, fitted, tmp_path, capsys, extra, message
):
    out = tmp_path / "m.csv"
    rc = _main(_evaluate_argv(data, fitted["ts"], out, *extra))
    err = capsys.readouterr().err.strip()
    assert rc == 2 and message in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_logits_are_read_by_the_library_reader(tmp_path, capsys):
    """cli.calibrate reads logits with calbench.logits.load_logits: its checks apply (here: a
    file without the recorded sample order is refused with its message)."""
    bad = tmp_path / "old.npz"
    np.savez(bad, logits=np.zeros((4, 3), np.float32), labels=np.array([0, 1, 2, 0]))
    save_split(tmp_path / "s.npz", *study_split(4))
    rc = _main(
        [
            "fit-calibrator",
            "--logits",
            bad,
            "--split",
            tmp_path / "s.npz",
            "--method",
            "ts",
            "--out",
            tmp_path / "c.json",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "lacks ['order_hash', 'model', 'dataset']" in err
    assert not (tmp_path / "c.json").exists()


def test_evaluate_with_plot_draws_the_plot_reliability_figure(data, fitted, tmp_path):
    """`evaluate --plot` (the workflow's one job per calibrator) writes the same CSV as
    `evaluate` alone and the same image, byte for byte, as `plot-reliability`."""
    common = ["--logits", data["logits"], "--split", data["split"], "--calibrator", fitted["ts"]]
    style = ["--n-bins", 7, "--style", "coursework", "--title", "T {x}"]
    assert _main(["evaluate", *common, "--seed", 3, "--out", tmp_path / "alone.csv"]) == 0
    both = ["--plot", tmp_path / "both.png", *style, "--out", tmp_path / "both.csv"]
    assert _main(["evaluate", *common, "--seed", 3, *both]) == 0
    assert _main(["plot-reliability", *common, *style, "--out", tmp_path / "plot.png"]) == 0
    assert (tmp_path / "both.csv").read_bytes() == (tmp_path / "alone.csv").read_bytes()
    png = (tmp_path / "both.png").read_bytes()
    assert png.startswith(b"\x89PNG") and png == (tmp_path / "plot.png").read_bytes()


def test_evaluate_plot_bad_style_leaves_no_output(data, fitted, tmp_path, capsys):
    out, png = tmp_path / "m.csv", tmp_path / "m.png"
    argv = ["evaluate", "--logits", data["logits"], "--split", data["split"]]
    argv += ["--calibrator", fitted["ts"], "--plot", png, "--style", "fancy", "--out", out]
    assert _main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "style" in err and "fancy" in err
    assert not out.exists() and not png.exists()


@pytest.mark.parametrize("existing", [False, True])
def test_evaluate_refuses_one_path_for_plot_and_out(data, fitted, tmp_path, existing):
    """The library's ``evaluate(plot=X, out=X)`` (or the same file by another spelling; the CLI
    refuses it before calling): the CSV would replace the diagram. One line, nothing written or
    replaced."""
    from calbench.steps import evaluate

    out = tmp_path / "m.csv"
    if existing:
        out.write_text("kept\n")
    (tmp_path / "sub").mkdir()
    with pytest.raises(ValueError, match="--plot and --out both name") as info:
        evaluate(data["logits"], data["split"], fitted["ts"], out, plot=tmp_path / "sub/../m.csv")
    assert "\n" not in str(info.value)
    assert out.read_text() == "kept\n" if existing else not out.exists()
