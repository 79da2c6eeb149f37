"""calbench.protocol: one calibrate spec with one check, and every default of its settings once
(the config schema's, the CLI verbs' and the library functions' defaults agree)."""

from __future__ import annotations

import copy
import inspect
from pathlib import Path

import pytest
import yaml

from calbench.calibrate_spec import CALIBRATE_SPEC, DEFAULTS, PLOT_OPTIONAL_KEYS, SCHEME_KEYS
from calbench.protocol import CalibrateSpec

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
SECTIONS = ("evaluation", "compare", "plots")


def _lists(value):
    """Tuples as lists, as JSON and YAML give them."""
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return value


def _schema_defaults() -> dict:
    props = yaml.safe_load(SCHEMA.read_text())["properties"]
    return {
        s: {k: props[s]["properties"][k]["default"] for k in CALIBRATE_SPEC[s]} for s in SECTIONS
    }


def test_the_spec_defaults_are_the_schemas_and_a_config_carries_them_into_the_spec():
    from snakemake.utils import validate

    assert _lists(DEFAULTS) == _schema_defaults()
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    for section in SECTIONS:
        cfg.pop(section, None)
    validate(cfg, str(SCHEMA))  # fills the schema's defaults, as the workflow's config
    spec = CalibrateSpec.from_config(cfg)
    assert {s: getattr(spec, s) for s in SECTIONS} == _lists(DEFAULTS)
    assert DEFAULTS["evaluation"]["scheme"] == "holdout"  # the replication configs' scheme


def _by_hand(section: dict) -> dict:
    """A section's settings the by-hand verbs take (not the scheme: they run one step; not
    whether each calibrator gets a diagram: they draw the one they are asked for)."""
    return {k: v for k, v in section.items() if k not in (*SCHEME_KEYS, *PLOT_OPTIONAL_KEYS)}


def _called(monkeypatch, tmp_path, verb: str, argv: list) -> dict:
    """The keyword arguments ``calbench <argv>`` passes to ``calbench.steps.<verb>``."""
    from calbench import steps
    from calbench.cli import main

    seen: dict = {}
    monkeypatch.setattr(steps, verb, lambda *a, **k: seen.update(k))
    files = ["--logits", tmp_path / "l.npz", "--split", tmp_path / "s.npz"]
    assert main([str(a) for a in [argv[0], *files, *argv[1:]]]) == 0
    return seen


def test_the_cli_verbs_defaults_are_the_schemas(monkeypatch, tmp_path):
    schema = _schema_defaults()
    ev, cmp = _by_hand(schema["evaluation"]), schema["compare"]
    got = _called(monkeypatch, tmp_path, "evaluate",
                  ["evaluate", "--calibrator", tmp_path / "ts.json", "--out", tmp_path / "m.csv",
                   "--plot", tmp_path / "ts.png"])  # fmt: skip
    assert {k: got[k] for k in ev} == ev
    plots = _by_hand(schema["plots"])
    assert {k: got["plot_options"][k] for k in plots} == plots
    got = _called(monkeypatch, tmp_path, "compare",
                  ["compare", "--calibrators", tmp_path / "ts.json", tmp_path / "uncalibrated.json",
                   "--out", tmp_path / "c.csv"])  # fmt: skip
    assert {k: got[k] for k in cmp} == cmp
    assert (got["level"], got["seed"]) == (ev["level"], ev["seed"])  # the evaluation's


def test_the_library_functions_defaults_are_the_schemas():
    from calbench import steps

    schema = _schema_defaults()
    ev, cmp = _by_hand(schema["evaluation"]), schema["compare"]
    evaluate = inspect.signature(steps.evaluate).parameters
    assert {k: _lists(evaluate[k].default) for k in ev} == ev
    compare = inspect.signature(steps.compare).parameters
    assert {k: _lists(compare[k].default) for k in cmp} == cmp
    assert (compare["level"].default, compare["seed"].default) == (ev["level"], ev["seed"])


SPEC = {
    "calibrators": {
        "uncalibrated": {"method": "uncalibrated", "params": {}, "display": "uncalibrated"},
        "ts": {"method": "ts", "params": {}, "display": "TS"},
    },
    **copy.deepcopy(_lists(DEFAULTS)),
}


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s["compare"].update(baselines=["ts", "hist"]),
         "compare.baselines names 'hist', which is not among the calibrators"),
        (lambda s: s["evaluation"].update(halves=["val"]),
         r"evaluation.halves must name test \(and optionally val\), got \['val'\]"),
        (lambda s: s["evaluation"].update(ci_metrics=["mce", "aurc"]),
         r"evaluation.ci_metrics names \['aurc'\], which are not in evaluation.metrics"),
        (lambda s: s["compare"].update(metrics=["ece"]), "compare.metrics"),
        (lambda s: s["compare"].update(n_bootstrap=0), "compare.n_bootstrap must be >= 1"),
        (lambda s: s["plots"].update(style="nope"), "style"),
        (lambda s: s["calibrators"]["ts"].update(params={"nope": 1}), "calibrator 'ts'"),
        (lambda s: s["compare"].pop("select_folds"), "compare: missing key 'select_folds'"),
        (lambda s: s["evaluation"].update(scheme="kfold"),
         r"evaluation.scheme must be one of \['holdout', 'crossfit'\], got 'kfold'"),
        (lambda s: s["evaluation"].update(scheme="crossfit", folds=1),
         r"evaluation.folds must be an integer in \[2, 20\] \(e.g. 5\), got 1"),
        (lambda s: s["evaluation"].update(scheme="crossfit", repeats=0),
         r"evaluation.repeats must be an integer in \[1, 1000\] \(e.g. 3\), got 0"),
        (lambda s: s["evaluation"].update(repeats=True), "evaluation.repeats must be an integer"),
        (lambda s: s["plots"].update(per_calibrator="no"),
         "plots.per_calibrator must be true or false, got 'no'"),
    ],
)  # fmt: skip
def test_one_check_names_the_specs_setting_before_any_work(tmp_path, edit, message):
    spec = copy.deepcopy(SPEC)
    edit(spec)
    with pytest.raises(ValueError, match=message) as info:
        CalibrateSpec.from_dict(spec).run(
            tmp_path / "missing.npz", tmp_path / "missing_split.npz",
            calibrators_dir=tmp_path / "c", metrics_dir=tmp_path / "m", plots_dir=tmp_path / "p",
            compare_out=tmp_path / "cmp.csv",
        )  # fmt: skip
    assert "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_the_by_hand_verbs_get_the_same_checks_named_by_their_options(tmp_path):
    """``compare`` by hand checks its baselines as the spec's check does, before reading the
    logits (it used to find a missing baseline only after the cross-fitted selection);
    ``evaluate`` by hand may evaluate the validation half alone."""
    from calbench.steps import compare, evaluate

    missing = (tmp_path / "missing.npz", tmp_path / "missing_split.npz")
    cals = [tmp_path / "ts.json", tmp_path / "hist.json"]
    with pytest.raises(ValueError, match=r"--baselines names 'uncalibrated', which is not among"):
        compare(*missing, cals, tmp_path / "c.csv")
    with pytest.raises(ValueError, match=r"--select-exclude names \['iso'\]"):
        compare(*missing, cals, tmp_path / "c.csv", baselines=["ts"], select_exclude=["iso"])
    with pytest.raises(ValueError, match=r"--n-bootstrap must be >= 1 for the comparisons"):
        compare(*missing, cals, tmp_path / "c.csv", baselines=["ts"], n_bootstrap=0)
    with pytest.raises(
        ValueError, match=r"--ci-halves names \['test'\], which are not in --halves"
    ):
        evaluate(*missing, cals[0], tmp_path / "m.csv", halves=["val"], ci_halves=["test"])
    with pytest.raises(FileNotFoundError):  # halves=["val"] passes the check; the logits are read
        evaluate(*missing, cals[0], tmp_path / "m.csv", halves=["val"])
    assert list(tmp_path.iterdir()) == []


def test_the_spec_file_round_trips():
    spec = CalibrateSpec.from_dict(copy.deepcopy(SPEC))
    assert CalibrateSpec.from_dict(yaml.safe_load(spec.to_json())) == spec
    assert spec.to_dict() == {
        **SPEC,
        "evaluation": _by_hand(SPEC["evaluation"]),
        "plots": _by_hand(SPEC["plots"]),
    }
    crossfit = copy.deepcopy(SPEC)
    crossfit["evaluation"].update(scheme="crossfit", folds=4, repeats=2)
    crossfit["plots"].update(per_calibrator=False)
    spec = CalibrateSpec.from_dict(crossfit)
    assert spec.to_dict() == crossfit
    assert CalibrateSpec.from_dict(yaml.safe_load(spec.to_json())) == spec


#: the spec file's ``evaluation`` keys before the evaluation scheme existed
_HOLDOUT_KEYS = ["metrics", "halves", "n_bootstrap", "level", "seed", "ci_halves", "ci_metrics"]


def test_a_holdout_specs_file_is_unchanged_by_the_scheme():
    """A holdout config's spec file has the keys (and so the digest) it had before the scheme
    existed: nothing reruns; a spec file without the scheme's keys reads as holdout."""
    cfg = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    from snakemake.utils import validate

    validate(cfg, str(SCHEMA))
    text = CalibrateSpec.from_config(cfg).to_json()
    assert list(yaml.safe_load(text)["evaluation"]) == _HOLDOUT_KEYS
    old = yaml.safe_load(text)
    assert CalibrateSpec.from_dict(old).evaluation["scheme"] == "holdout"
    cfg["evaluation"] = {**cfg.get("evaluation", {}), "scheme": "crossfit", "repeats": 2}
    crossfit = yaml.safe_load(CalibrateSpec.from_config(cfg).to_json())["evaluation"]
    assert list(crossfit) == [*_HOLDOUT_KEYS, *SCHEME_KEYS]
    assert (crossfit["scheme"], crossfit["folds"], crossfit["repeats"]) == ("crossfit", 5, 2)


@pytest.mark.slow
def test_the_by_hand_verbs_with_their_defaults_write_what_the_default_spec_writes(tmp_path):
    """No setting given anywhere: fit-calibrator, evaluate --plot and compare write the bytes
    ``calibrate`` writes with the schema's default spec (before, evaluate computed every
    registered metric and compare every verdict-eligible one)."""
    import numpy as np

    from calbench.functional import softmax
    from calbench.split import save_split, study_split
    from calbench.steps import compare, evaluate, fit_calibrator

    n, k = 300, 4
    rng = np.random.default_rng(2)
    z = (rng.normal(size=(n, k)) * 4.0).astype(np.float32)
    y = np.array([rng.choice(k, p=row) for row in softmax(z / 3.0)], dtype=np.int64)
    files = (tmp_path / "l.npz", tmp_path / "s.npz")
    np.savez(files[0], logits=z, labels=y, order_hash="h", model="m", dataset="d")
    save_split(files[1], *study_split(n))
    spec, hand = tmp_path / "spec", tmp_path / "hand"
    CalibrateSpec.from_dict(copy.deepcopy(SPEC)).run(
        *files, calibrators_dir=spec, metrics_dir=spec, plots_dir=spec,
        compare_out=spec / "compare.csv",
    )  # fmt: skip
    for key in SPEC["calibrators"]:
        fit_calibrator(*files, key, {}, hand / f"{key}.json")
        evaluate(*files, hand / f"{key}.json", hand / f"{key}.csv", plot=hand / f"{key}.png",
                 plot_options={"title": SPEC["calibrators"][key]["display"]})  # fmt: skip
    compare(*files, [hand / f"{key}.json" for key in SPEC["calibrators"]], hand / "compare.csv")
    ours = {p.name: p.read_bytes() for p in hand.iterdir()}
    assert ours == {p.name: p.read_bytes() for p in spec.iterdir() if p.name != "grid.png"}


def _files(tmp_path, n=120, k=3, seed=2, rare=None):
    """A model's logits and split on disk (``rare``: that many samples of class ``k - 1``)."""
    import numpy as np

    from calbench.functional import softmax
    from calbench.split import save_split, study_split

    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 3.0
    y = np.array([rng.choice(k, p=row) for row in softmax(z / 2.0)], dtype=np.int64)
    if rare is not None:
        y[y == k - 1] = 0
        y[:rare] = k - 1
    files = (tmp_path / "l.npz", tmp_path / "s.npz")
    np.savez(files[0], logits=z, labels=y, order_hash="h", model="m", dataset="d")
    save_split(files[1], *study_split(n))
    return files


def _crossfit_spec(folds=3, repeats=2) -> dict:
    spec = copy.deepcopy(SPEC)
    spec["evaluation"].update(
        scheme="crossfit", folds=folds, repeats=repeats, n_bootstrap=20,
        metrics=["accuracy", "nll", "ece_ub"],
    )  # fmt: skip
    spec["compare"].update(metrics=["nll", "ece_ub"], select_folds=3)
    return spec


def _run(spec, files, out, **kw):
    return CalibrateSpec.from_dict(spec).run(
        *files, calibrators_dir=out, metrics_dir=out, plots_dir=out,
        compare_out=out / "compare.csv", **kw,
    )  # fmt: skip


def test_folds_above_the_smallest_class_count_is_a_one_line_error(tmp_path):
    files = _files(tmp_path, rare=2)
    with pytest.raises(ValueError, match=r"evaluation.folds = 3 exceeds the smallest class's count "
                       r"\(2 labelled samples of class 2\); lower evaluation.folds") as info:  # fmt: skip
        _run(_crossfit_spec(), files, tmp_path / "out")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "out").exists()


def test_crossfit_predicts_every_sample_once_per_repeat_by_a_calibrator_that_never_saw_it(
    tmp_path, monkeypatch
):
    """Every calibrator the cross-fit builds is wrapped to record the samples it is fitted on
    and predicts: no prediction of a sample it was fitted on, and in each repeat each sample is
    predicted once by one of the outer fits; the rows are over all N samples, the saved
    calibrator is the one fitted on all N, the nested best's rows carry their selection."""
    import numpy as np

    from calbench import protocol
    from calbench.calibrators import get_calibrator, load_calibrator
    from calbench.crossfit import crossfit_predict, fold_assignments
    from calbench.results import COMPARE_COLUMNS, PARTITION_COLUMNS, read_long_csv
    from calbench.split import load_halves

    files = _files(tmp_path)
    data = load_halves(*files)
    z = np.concatenate([data["val"][0], data["test"][0]])
    y = np.concatenate([data["val"][1], data["test"][1]])
    index = {row.tobytes(): i for i, row in enumerate(z)}
    log: list = []

    class Recording:
        def __init__(self, inner):
            self.inner = inner

        def fit(self, x, labels):
            self.seen = frozenset(index[row.tobytes()] for row in x)
            self.inner.fit(x, labels)
            return self

        def predict_proba(self, x):
            rows = frozenset(index[row.tobytes()] for row in x)
            log.append((self.inner.name, self.seen, rows))
            return self.inner.predict_proba(x)

    real = protocol.calibrator_maker
    monkeypatch.setattr(protocol, "calibrator_maker", lambda m, p: lambda: Recording(real(m, p)()))
    out = tmp_path / "out"
    spec = _crossfit_spec()
    _run(spec, files, out, partitions_out=out / "parts.csv", robustness_out=out / "rob.csv")
    assert log and all(not seen & rows for _, seen, rows in log)
    a = fold_assignments(y, 3, 2, 0)
    folds = {frozenset(np.flatnonzero(a[r] == f).tolist()): r for r in range(2) for f in range(3)}
    for method in ("uncalibrated", "ts"):
        outer = [rows for m, seen, rows in log if m == method and rows in folds]
        assert sorted(folds[rows] for rows in outer) == [0, 0, 0, 1, 1, 1]
        for r in range(2):  # each repeat's outer folds cover the N samples once
            assert sorted(i for rows in outer if folds[rows] == r for i in rows) == list(
                range(len(y))
            )
        # the nested selection's inner fits: one per pair of folds and repeat, fitted on the
        # folds but that pair (with 3 folds, one fold) and predicting the pair's two folds
        inner = [(seen, rows) for m, seen, rows in log if m == method and seen in folds]
        assert len(inner) == 2 * 3 and len(set(inner)) == 6
        assert all(seen | rows == set(range(len(y))) for seen, rows in inner)
    rows = read_long_csv([out / "ts.csv", out / "uncalibrated.csv"])
    assert {r["half"] for r in rows} == {"oof"}
    acc = next(r for r in rows if r["method"] == "uncalibrated" and r["metric"] == "accuracy")
    assert acc["value"] == pytest.approx(np.mean(z.argmax(axis=1) == y))  # over all N samples
    ts_nll = next(r for r in rows if r["method"] == "ts" and r["metric"] == "nll")
    oof = crossfit_predict(lambda: get_calibrator("ts"), z, y, assignment=a)
    want = np.mean([-np.mean(np.log(p[np.arange(len(y)), y])) for p in oof])
    assert ts_nll["value"] == pytest.approx(want, rel=1e-9)
    assert ts_nll["ci_low"] < ts_nll["ci_high"]
    saved = load_calibrator(out / "ts.json")
    full = get_calibrator("ts").fit(z, y)
    np.testing.assert_allclose(saved.predict_proba(z), full.predict_proba(z), rtol=1e-6)
    cmp = read_long_csv([out / "compare.csv"], COMPARE_COLUMNS, numeric=())
    assert {r["half"] for r in cmp} == {"oof"}
    assert {r["test"] for r in cmp} == {"corrected_repeated_cv_t"}
    best = [r for r in cmp if r["family"] == "best"]
    assert best and all(r["selected_on"].startswith("nested 3-fold x2") for r in best)
    parts = read_long_csv([out / "parts.csv"], PARTITION_COLUMNS, numeric=())
    assert [(r["metric"], r["family"], r["method"], r["baseline"]) for r in parts] == [
        (r["metric"], r["family"], r["method"], r["baseline"]) for r in cmp
    ]
    assert {r["n_partitions"] for r in parts} == {"2"}


def test_a_failing_cross_fit_is_one_line_naming_the_calibrator_and_leaves_no_output(
    tmp_path, monkeypatch
):
    """A calibrator that fails inside the cross-fit (not on the full fit) fails the step with
    one line naming it, as the holdout scheme's fits do, and every file written so far goes."""
    from calbench import protocol

    class Broken:
        def fit(self, x, labels):
            raise RuntimeError("boom\nsecond line")

        def predict_proba(self, x):  # pragma: no cover - never fitted
            raise AssertionError

    real = protocol.calibrator_maker
    monkeypatch.setattr(
        protocol, "calibrator_maker", lambda m, p: (lambda: Broken()) if m == "ts" else real(m, p)
    )
    files = _files(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"calibrator 'ts' \(method 'ts'\).*boom") as info:
        _run(_crossfit_spec(), files, out)
    assert "\n" not in str(info.value)
    assert [p for p in out.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("scheme", ["holdout", "crossfit"])
def test_the_grid_alone_draws_no_diagram_per_calibrator_and_changes_nothing_else(tmp_path, scheme):
    """``plots.per_calibrator: false`` (studies of many small models): no PNG per calibrator,
    every other file (the grid included) the bytes of the default run; its spec file keeps the
    key, the default's does not (a spec written before the key existed is unchanged)."""
    files = _files(tmp_path)
    spec = _crossfit_spec() if scheme == "crossfit" else copy.deepcopy(SPEC)
    _run(spec, files, tmp_path / "all", reuse_dir=tmp_path / "cache_all")
    spec["plots"]["per_calibrator"] = False
    written = _run(spec, files, tmp_path / "grid", reuse_dir=tmp_path / "cache_grid")
    got = {p.name: p.read_bytes() for p in (tmp_path / "grid").iterdir()}
    every = {p.name: p.read_bytes() for p in (tmp_path / "all").iterdir()}
    assert sorted(got) == sorted(p.name for p in written)
    assert {n for n in every if n.endswith(".png")} == {"grid.png", "uncalibrated.png", "ts.png"}
    assert [n for n in got if n.endswith(".png")] == ["grid.png"]
    assert got == {n: b for n, b in every.items() if n not in ("uncalibrated.png", "ts.png")}
    assert "per_calibrator" in yaml.safe_load(CalibrateSpec.from_dict(spec).to_json())["plots"]
    assert "per_calibrator" not in yaml.safe_load(CalibrateSpec.from_dict(SPEC).to_json())["plots"]
    if scheme == "holdout":  # a second run restores every calibrator from the cache: same bytes
        _run(spec, files, tmp_path / "again", reuse_dir=tmp_path / "cache_grid")
        again = {p.name: p.read_bytes() for p in (tmp_path / "again").iterdir()}
        assert again == got


def test_a_cross_fitted_unbiased_error_is_what_its_signed_rank_value_clips_to(tmp_path):
    """With several partitions the table's unbiased ECE (mean over partitions of the signed
    estimate, clipped) and the robustness rows' signed value (what the ranks use) are one
    estimate: the report's check that the second clips to the first holds (before, the table
    held the mean of clipped values of all partitions and the ranks the first partition's)."""
    from calbench.results import read_long_csv
    from calbench.stats.robustness import DEFAULT_VARIANT

    files = _files(tmp_path, n=160)
    out = tmp_path / "out"
    _run(_crossfit_spec(folds=3, repeats=3), files, out, robustness_out=out / "rob.csv")
    metrics = [out / "uncalibrated.csv", out / "ts.csv"]
    rows = read_long_csv(metrics, required=("metric", "value"))
    table = {r["method"]: r["value"] for r in rows if r.get("metric") == "ece_ub"}
    rob = read_long_csv([out / "rob.csv"], required=("variant",), numeric=("value",))
    signed = {r["method"]: r["value"] for r in rob if r["variant"] == DEFAULT_VARIANT}
    assert set(table) == set(signed) == {"uncalibrated", "ts"}
    for m in table:  # the report's check (calbench.report.ranks): the signed value clips to it
        assert abs(max(signed[m], 0.0) - table[m]) <= 1e-9, (m, signed[m], table[m])


def test_a_cross_fitted_calibrator_added_to_the_study_is_the_only_one_fitted(tmp_path, monkeypatch):
    """With a reuse folder a cross-fitted run keeps each calibrator's files, its out-of-fold
    predictions and its inner fits' scores: adding a calibrator fits the new one alone (outer,
    inner and full fits) and writes the bytes a fresh run writes; a damaged kept array is
    refitted with a note, again the same bytes."""
    from calbench import steps

    fitted: list[str] = []
    fit = steps._Isolated.fit

    def counted(self, logits, labels):
        fitted.append(self.name)
        return fit(self, logits, labels)

    monkeypatch.setattr(steps._Isolated, "fit", counted)
    files = _files(tmp_path, n=150)
    two = _crossfit_spec(folds=3, repeats=2)
    three = copy.deepcopy(two)
    three["calibrators"]["hist"] = {"method": "hist", "params": {"n_bins": 5}, "display": "H"}
    kw = {"robustness_out": None}

    def run(spec, name, cache):
        out = tmp_path / name
        _run(spec, files, out, reuse_dir=cache, partitions_out=out / "parts.csv", **kw)
        return {p.name: p.read_bytes() for p in sorted(out.iterdir())}

    fresh = run(three, "fresh", None)
    run(two, "first", tmp_path / "cache")
    fitted.clear()
    again = run(three, "again", tmp_path / "cache")
    assert set(fitted) == {"hist"}, "only the added calibrator is cross-fitted"
    assert again == fresh
    kept = next((tmp_path / "cache" / "ts").glob("*/oof.npy"))
    kept.write_bytes(kept.read_bytes()[:-8] + b"\0" * 8)
    fitted.clear()
    assert run(three, "repaired", tmp_path / "cache") == fresh
    assert "ts" in fitted and "uncalibrated" not in fitted
