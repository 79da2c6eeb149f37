"""The workflow's calibration step ``calbench calibrate``: one process per model writes exactly
the files the single-step verbs (fit-calibrator, evaluate, compare, plot-reliability --grid)
write from the same inputs, and nothing when anything fails."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from calbench.functional import softmax
from calbench.split import save_split, study_split
from calbench.stats.robustness import VARIANTS

N, K = 300, 4
CALIBRATORS = {
    "uncalibrated": {"method": "uncalibrated", "params": {}, "display": "Uncalibrated"},
    "ts": {"method": "ts", "params": {}, "display": "T-scaling"},
    "hist": {"method": "hist", "params": {"n_bins": 5}, "display": "Hist {5}"},
}
SPEC = {
    "calibrators": CALIBRATORS,
    "evaluation": {
        "metrics": ["accuracy", "ece", "cwece", "ece_ub", "nll"],
        "halves": ["test", "val"],
        "n_bootstrap": 20,
        "level": 0.9,
        "seed": 3,
        "ci_halves": ["test"],
        "ci_metrics": ["ece", "nll"],
    },
    "compare": {
        "metrics": ["ece_ub", "nll"],
        "baselines": ["uncalibrated", "ts"],
        "n_bootstrap": 50,
        "select_folds": 3,
        "select_exclude": [],
    },
    "plots": {"n_bins": 10, "style": "guo"},
}


def _main(argv):
    from calbench.cli import main

    return main([str(a) for a in argv])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("calibrate")
    rng = np.random.default_rng(1)
    z = (rng.normal(size=(N, K)) * 4.0).astype(np.float32)
    y = np.array([rng.choice(K, p=row) for row in softmax(z / 3.0)], dtype=np.int64)
    np.savez(d / "logits.npz", logits=z, labels=y, order_hash="abc", model="mod", dataset="ds")
    save_split(d / "split.npz", *study_split(N))
    return d


def _calibrate(data, out, spec=SPEC, reuse=None):
    spec_path = out / "spec.json"
    out.mkdir(parents=True, exist_ok=True)
    spec_path.write_text(json.dumps(spec))
    return _main(
        [
            "calibrate",
            "--logits",
            data / "logits.npz",
            "--split",
            data / "split.npz",
            "--spec",
            f"@{spec_path}",
            "--calibrators-dir",
            out / "cal",
            "--metrics-dir",
            out / "met",
            "--plots-dir",
            out / "plot",
            "--compare",
            out / "compare.csv",
            "--robustness",
            out / "robustness.csv",
            *(["--reuse-dir", reuse] if reuse is not None else []),
        ]
    )


def _outputs(out):
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != "spec.json"
    }


def test_calibrate_equals_the_single_step_verbs(data, tmp_path):
    assert _calibrate(data, tmp_path / "batch") == 0
    one = tmp_path / "one"
    common = ["--logits", data / "logits.npz", "--split", data / "split.npz"]
    ev = SPEC["evaluation"]
    for key, entry in CALIBRATORS.items():
        cal = one / "cal" / f"{key}.json"
        assert (
            _main(
                [
                    "fit-calibrator",
                    *common,
                    "--method",
                    entry["method"],
                    "--params",
                    json.dumps(entry["params"]),
                    "--out",
                    cal,
                ]
            )
            == 0
        )
        assert (
            _main(
                [
                    "evaluate",
                    *common,
                    "--calibrator",
                    cal,
                    "--metrics",
                    ",".join(ev["metrics"]),
                    "--halves",
                    ",".join(ev["halves"]),
                    "--n-bootstrap",
                    ev["n_bootstrap"],
                    "--level",
                    ev["level"],
                    "--seed",
                    ev["seed"],
                    "--ci-halves",
                    "test",
                    "--ci-metrics",
                    "ece,nll",
                    "--plot",
                    one / "plot" / f"{key}.png",
                    "--n-bins",
                    10,
                    "--style",
                    "guo",
                    "--title",
                    entry["display"],
                    "--out",
                    one / "met" / f"{key}.csv",
                ]
            )
            == 0
        )
    cals = [one / "cal" / f"{k}.json" for k in CALIBRATORS]
    assert (
        _main(
            [
                "compare",
                *common,
                "--calibrators",
                *cals,
                "--metrics",
                "ece_ub,nll",
                "--baselines",
                "uncalibrated,ts",
                "--select-folds",
                3,
                "--n-bootstrap",
                50,
                "--level",
                0.9,
                "--seed",
                3,
                "--out",
                one / "compare.csv",
            ]
        )
        == 0
    )
    assert (
        _main(
            [
                "plot-reliability",
                "--grid",
                *common,
                "--calibrator",
                *cals,
                "--n-bins",
                10,
                "--style",
                "guo",
                "--out",
                one / "plot" / "grid.png",
            ]
        )
        == 0
    )
    batch = {
        p.relative_to(tmp_path / "batch"): p.read_bytes()
        for p in (tmp_path / "batch").rglob("*")
        if p.is_file() and p.name not in ("spec.json", "robustness.csv")
    }
    single = {p.relative_to(one): p.read_bytes() for p in one.rglob("*") if p.is_file()}
    assert sorted(batch) == sorted(single)
    assert len(batch) == 3 * len(CALIBRATORS) + 2
    assert [k for k in batch if batch[k] != single[k]] == []
    rows = list(csv.DictReader(open(tmp_path / "batch" / "robustness.csv")))
    assert {r["method"] for r in rows} == set(CALIBRATORS)
    assert {r["variant"] for r in rows} == set(VARIANTS)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda s: s["calibrators"]["hist"].update(params={"n_binz": 5}),
            "calibrator 'hist' (method 'hist')",
        ),
        (lambda s: s["calibrators"].update(nope={"method": "nope"}), "calibrator 'nope'"),
        (lambda s: s["compare"].update(baselines=["vs"]), "compare.baselines names 'vs'"),
        (lambda s: s["evaluation"].pop("seed"), "evaluation: missing key 'seed'"),
        (lambda s: s.update(extra=1), "unknown section 'extra'"),
        (lambda s: s["evaluation"].update(metrics=["ecee"]), "unknown metrics ['ecee']"),
        (lambda s: s["evaluation"].update(n_bootstrap=10**9), "must be an integer in [0, 100000]"),
        (lambda s: s["plots"].update(n_bins=10**9), "n_bins"),
        (lambda s: s["compare"].update(metrics=["ece", "nll"]), "'ece' is a plug-in estimate"),
        (lambda s: s["compare"].update(metrics=["cwece"]), "use 'cwece_ub'"),
        (lambda s: s["compare"].update(select_folds=1), "select_folds must be an integer"),
        (lambda s: s["compare"].update(select_exclude=["x"]), "compare.select_exclude names"),
        (lambda s: s["compare"].pop("select_folds"), "compare: missing key 'select_folds'"),
    ],
)
def test_bad_spec_is_one_line_and_writes_nothing(data, tmp_path, capsys, edit, message):
    spec = json.loads(json.dumps(SPEC))
    edit(spec)
    assert _calibrate(data, tmp_path, spec) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["spec.json"]


def test_a_failing_calibrator_names_itself_and_leaves_no_file(data, tmp_path, capsys):
    """The third calibrator fails at fit time: the files of the first two are removed too."""
    spec = json.loads(json.dumps(SPEC))
    spec["calibrators"]["platt"] = {
        "method": "platt",
        "params": {},
        "display": "Platt",
    }  # binary only
    assert _calibrate(data, tmp_path, spec) == 2
    err = capsys.readouterr().err.strip()
    assert "calibrator 'platt' (method 'platt')" in err and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["spec.json"]


def test_reuse_dir_refits_only_what_changed_and_writes_the_same_bytes(data, tmp_path, monkeypatch):
    """A calibrator added to the spec: the others are copied from --reuse-dir, not refitted, and
    every output equals a run without reuse; an edited parameter is refitted."""
    from calbench.calibrators import REGISTRY

    reuse = tmp_path / "kept"
    assert _calibrate(data, tmp_path / "first", reuse=reuse) == 0
    assert sorted(p.name for p in reuse.iterdir()) == sorted(CALIBRATORS)
    grown = json.loads(json.dumps(SPEC))
    grown["calibrators"]["iso"] = {"method": "iso", "params": {}, "display": "Isotonic"}
    grown["calibrators"]["hist"]["params"] = {"n_bins": 6}
    assert _calibrate(data, tmp_path / "plain", grown) == 0  # no reuse: the reference bytes

    fitted = []
    n_val = len(study_split(N)[0])
    for method in ("uncalibrated", "ts", "hist", "iso"):
        cls = REGISTRY[method]
        real = cls.fit

        def fit(self, z, *a, _m=method, _f=real, **k):
            if len(z) == n_val:  # the fit on the whole validation half, not a cross-fit fold
                fitted.append(_m)
            return _f(self, z, *a, **k)

        monkeypatch.setattr(cls, "fit", fit)
    assert _calibrate(data, tmp_path / "second", grown, reuse=reuse) == 0
    assert sorted(fitted) == ["hist", "iso"]  # ts and uncalibrated came from --reuse-dir
    assert _outputs(tmp_path / "second") == _outputs(tmp_path / "plain")
    # one kept version per calibrator: hist's old digest is gone
    assert all(len(list((reuse / key).iterdir())) == 1 for key in grown["calibrators"])

    # a kept folder that lost a file is recomputed, not half-copied
    fitted.clear()
    (next((reuse / "ts").iterdir()) / "diagram.png").unlink()
    assert _calibrate(data, tmp_path / "third", grown, reuse=reuse) == 0
    assert fitted == ["ts"]
    assert _outputs(tmp_path / "third") == _outputs(tmp_path / "plain")

    # a kept calibrator that does not load (a damaged JSON) is refitted, not an error
    fitted.clear()
    (next((reuse / "iso").iterdir()) / "calibrator.json").write_text("{not json")
    assert _calibrate(data, tmp_path / "fourth", grown, reuse=reuse) == 0
    assert fitted == ["iso"]
    assert _outputs(tmp_path / "fourth") == _outputs(tmp_path / "plain")

    # a calibrator removed from the spec loses its kept folder once a run succeeds
    shrunk = json.loads(json.dumps(grown))
    del shrunk["calibrators"]["iso"]
    assert _calibrate(data, tmp_path / "fifth", shrunk, reuse=reuse) == 0
    assert sorted(p.name for p in reuse.iterdir()) == sorted(shrunk["calibrators"])


def test_too_many_folds_for_the_validation_half_fail_before_any_fit(tmp_path, capsys, monkeypatch):
    """compare.select_folds against the validation half the job has read (its size is not
    known to the config for a whole dataset or a file's own split): refused before the first
    calibrator is fitted, in one line, writing nothing."""
    import calbench.protocol

    n = 30  # a validation half of 15: 8 folds need 16
    rng = np.random.default_rng(0)
    d = tmp_path / "in"
    d.mkdir()
    np.savez(d / "logits.npz", logits=rng.normal(size=(n, K)).astype(np.float32),
             labels=rng.integers(0, K, n), order_hash="abc", model="mod", dataset="ds")  # fmt: skip
    save_split(d / "split.npz", *study_split(n))
    fits = []
    real = calbench.protocol.get_calibrator

    def spy(method, **params):
        cal = real(method, **params)
        fit = cal.fit
        cal.fit = lambda *a, **k: (fits.append(method), fit(*a, **k))[1]
        return cal

    monkeypatch.setattr(calbench.protocol, "get_calibrator", spy)
    spec = json.loads(json.dumps(SPEC))
    spec["compare"]["select_folds"] = 8
    out = tmp_path / "out"
    assert _calibrate(d, out, spec) == 2
    err = capsys.readouterr().err.strip()
    assert "with 8 folds needs >= 16 validation samples, got 15" in err, err
    assert len(err.splitlines()) == 1 and fits == []
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == ["spec.json"]
