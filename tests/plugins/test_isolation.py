"""Plug-in code isolated inside ``calbench calibrate`` (calbench.isolation; issue 39, groups 1
and 9): a careless plug-in calibrator or metric changes nothing of the others' results (its
output is isolated or rejected), the reuse cache never keeps a result computed on changed
inputs, and every plug-in failure is one line naming the calibrator or metric and what it
returned or raised."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from calbench.functional import softmax
from calbench.split import save_split, study_split

HERE = Path(__file__).resolve().parent
N, K = 200, 3
GOOD = {
    "ts": {"method": "ts", "params": {}, "display": "T-scaling"},
    "iso": {"method": "iso", "params": {}, "display": "Isotonic"},
}


def _spec(bad: dict | None = None, metrics=("accuracy", "ece", "nll")) -> dict:
    """The good calibrators, after ``bad`` (a calibrator entry) when given."""
    cals = {**({"bad": bad} if bad else {}), **GOOD}
    return {
        "calibrators": cals,
        "evaluation": {"metrics": list(metrics), "halves": ["test", "val"], "n_bootstrap": 0,
                       "level": 0.9, "seed": 0, "ci_halves": None, "ci_metrics": None},
        "compare": {"metrics": ["nll"], "baselines": ["ts"], "n_bootstrap": 10,
                    "select_folds": 2, "select_exclude": []},
        "plots": {"n_bins": 5, "style": "guo"},
    }  # fmt: skip


def _plugin(cls: str) -> dict:
    return {"method": f"careless_plugins:{cls}", "params": {}, "display": cls}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("isolation")
    rng = np.random.default_rng(4)
    z = rng.normal(size=(N, K)) * 3.0  # float64: the arrays a plug-in's fit is handed
    y = np.array([rng.choice(K, p=row) for row in softmax(z / 2.0)], dtype=np.int64)
    np.savez(d / "logits.npz", logits=z, labels=y, order_hash="abc", model="mod", dataset="ds")
    save_split(d / "split.npz", *study_split(N))
    return d


@pytest.fixture(autouse=True)
def _plugins_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))


def _calibrate(data, out: Path, spec: dict, reuse=None) -> int:
    from calbench.cli import main

    out.mkdir(parents=True, exist_ok=True)
    (out / "spec.json").write_text(json.dumps(spec))
    return main([str(a) for a in [
        "calibrate", "--logits", data / "logits.npz", "--split", data / "split.npz",
        "--spec", f"@{out / 'spec.json'}", "--calibrators-dir", out / "cal",
        "--metrics-dir", out / "met", "--plots-dir", out / "plot", "--compare", out / "cmp.csv",
        *(["--reuse-dir", reuse] if reuse is not None else []),
    ]])  # fmt: skip


def _good_files(out: Path) -> dict:
    """The good calibrators' files: JSON, metrics CSV, diagram."""
    return {
        f"{d}/{key}.{ext}": (out / d / f"{key}.{ext}").read_bytes()
        for key in GOOD
        for d, ext in (("cal", "json"), ("met", "csv"), ("plot", "png"))
    }


def _files(out: Path) -> list[str]:
    return sorted(p.name for p in out.rglob("*") if p.is_file() and p.name != "spec.json")


@pytest.fixture(scope="module")
def plain(data, tmp_path_factory):
    """The good calibrators' files of a run without any plug-in."""
    out = tmp_path_factory.mktemp("plain")
    assert _calibrate(data, out, _spec()) == 0
    return _good_files(out)


def test_a_plug_in_scaling_its_logits_in_place_changes_no_other_result(data, tmp_path, plain):
    assert _calibrate(data, tmp_path, _spec(_plugin("ScalesInPlace"))) == 0
    assert _good_files(tmp_path) == plain


def test_the_reuse_cache_keeps_no_result_of_a_careless_plug_in_job(data, tmp_path, plain):
    """The issue's sequence: a run with the plug-in fills the cache, the plug-in is removed,
    the next run restores from the cache: what it restores equals a run that never had it."""
    reuse = tmp_path / "cache"
    assert _calibrate(data, tmp_path / "with", _spec(_plugin("ScalesInPlace")), reuse) == 0
    assert _calibrate(data, tmp_path / "without", _spec(), reuse) == 0
    assert _good_files(tmp_path / "without") == plain


def test_a_metric_that_unfreezes_and_overwrites_the_labels_stores_nothing(data, tmp_path, capsys):
    """A hostile metric (it makes the job's labels writeable again and zeroes them): the inputs
    are verified before a result is kept, so the job fails, one line, and the cache stays empty."""
    from calbench.plugins import find_metric

    find_metric("careless_plugins:scribbles_labels")
    reuse = tmp_path / "cache"
    spec = _spec(metrics=("accuracy", "scribbles_labels", "nll"))
    assert _calibrate(data, tmp_path, spec, reuse) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "the logits or labels changed while calibrator 'ts' ran" in err
    assert _files(tmp_path) == []
    assert not any(p.is_file() for p in reuse.rglob("*")) if reuse.exists() else True


@pytest.mark.parametrize(
    "cls, message",
    [
        # its first output was made read-only: overwriting it on the next call is the error
        ("ReusedBuffer", "predict_proba wrote into a read-only array (assignment destination "
                         "is read-only): it changes its input or an earlier output in place"),
        ("ReturnsList", "predict_proba returned a list, not a numpy.ndarray of shape (100, 3)"),
        ("ReturnsTensor", "predict_proba returned a torch.Tensor, not a numpy.ndarray"),
        ("DropsColumn", "predict_proba returned shape (100, 2) for logits of shape (100, 3)"),
        ("ExtraColumn", "predict_proba returned shape (100, 4) for logits of shape (100, 3)"),
        ("RaisesInFit", "fit raised RuntimeError: the solver diverged (details on a second line)"),
    ],
)  # fmt: skip
def test_a_bad_plug_in_calibrator_is_one_line_naming_it_and_writes_nothing(
    data, tmp_path, capsys, cls, message
):
    assert _calibrate(data, tmp_path, _spec(_plugin(cls))) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"calibrator 'bad' (method 'careless_plugins:{cls}'): {message}" in err, err
    assert _files(tmp_path) == []


def test_the_plug_ins_exception_is_kept_as_the_cause(data, tmp_path):
    from calbench.plugins import load_plugins
    from calbench.protocol import CalibrateSpec

    out = tmp_path
    load_plugins(calibrators=[_plugin("RaisesInFit")["method"]])  # as the calibrate verb does
    with pytest.raises(ValueError, match="fit raised RuntimeError") as info:
        CalibrateSpec.from_dict(_spec(_plugin("RaisesInFit"))).run(
                  data / "logits.npz", data / "split.npz", calibrators_dir=out / "cal", metrics_dir=out / "met", plots_dir=out / "plot",
                  compare_out=out / "cmp.csv")  # fmt: skip
    assert isinstance(info.value.__cause__, RuntimeError)


def test_a_builtin_calibrators_own_bug_stays_a_traceback(data, tmp_path, monkeypatch):
    """calbench's own calibrators are not wrapped: their bugs are not hidden."""
    from calbench.calibrators import REGISTRY

    def broken(self, z, y):
        raise RuntimeError("a bug in calbench")

    monkeypatch.setattr(REGISTRY["ts"], "_fit", broken)
    with pytest.raises(RuntimeError, match="a bug in calbench"):
        _calibrate(data, tmp_path, _spec())


@pytest.mark.parametrize(
    "name, message",
    [
        ("wipes_probs", "metric 'wipes_probs' wrote into a read-only array"),
        ("nan_metric", "metric 'nan_metric' returned nan; a metric must return a finite float"),
        ("list_metric", "metric 'list_metric' returned a list ([0.5]), not a float"),
    ],
)
def test_a_bad_plug_in_metric_is_one_line_naming_it_and_writes_nothing(
    data, tmp_path, capsys, name, message
):
    from calbench.plugins import find_metric

    find_metric(f"careless_plugins:{name}")
    assert _calibrate(data, tmp_path, _spec(metrics=("accuracy", name, "ece"))) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "calibrator 'ts' (method 'ts')" in err and message in err, err
    assert _files(tmp_path) == []


def test_outputs_are_read_only_and_the_data_frozen():
    """The unit under the job: copies in, a checked read-only array out."""
    from calbench import isolation
    from calbench.calibrators import get_calibrator

    rng = np.random.default_rng(0)
    z, y = rng.normal(size=(50, 3)), rng.integers(0, 3, 50)
    z0 = z.copy()
    cal = isolation.fit(get_calibrator("ts", device="cpu"), z, y)
    p = isolation.predict(cal, z)
    assert not p.flags.writeable and np.array_equal(z, z0)
    with pytest.raises(ValueError, match="sharing memory"):
        isolation.checked_probabilities(p, p.shape, others=[p])
    with pytest.raises(ValueError, match="invalid probabilities"):
        isolation.checked_probabilities(np.full((2, 3), 0.5), (2, 3))
    with pytest.raises(ValueError, match="dtype int64"):
        isolation.checked_probabilities(np.zeros((2, 3), dtype=np.int64), (2, 3))


def test_the_by_hand_verbs_name_a_failing_plug_in_in_one_line(data, tmp_path, capsys):
    from calbench.cli import main

    common = ["--logits", data / "logits.npz", "--split", data / "split.npz"]
    fit = ["fit-calibrator", *common, "--method"]
    assert (
        main([str(a) for a in [*fit, "careless_plugins:RaisesInFit", "--out", tmp_path / "r.json"]])
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert (
        len(err.splitlines()) == 1
        and (
            "calibrator 'careless_plugins:RaisesInFit': fit raised RuntimeError: the solver diverged"
        )
        in err
    ), err
    cal = tmp_path / "bad.json"
    assert main([str(a) for a in [*fit, "careless_plugins:ReturnsList", "--out", cal]]) == 0
    out = tmp_path / "m.csv"
    assert main([str(a) for a in ["evaluate", *common, "--calibrator", cal, "--out", out]]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "calibrator 'bad': predict_proba returned a list" in err
    assert not out.exists()
