"""One verdict per pair in the whole report: a pair of calibrators on one model and metric is
tested once (one Holm family per model and metric over the distinct pairs of all the questions,
:func:`calbench.stats.comparisons.holm_family`), and the findings, the comparison table, the
ranks and the robustness section never say different things about it."""

from __future__ import annotations

import base64
import csv
import io

import numpy as np

from calbench.functional import softmax
from calbench.metrics import METRICS
from calbench.report.context import build_context
from calbench.stats import ranks_nan_last
from calbench.stats.comparisons import compare_rows
from calbench.stats.robustness import DEFAULT_VARIANT, VARIANTS

METHODS = ("uncalibrated", "ts", "a", "b", "c")
MODELS = ("m0", "m1", "m2")
METRICS_USED = ("nll", "ece_ub")
PROV = {"config": "", "packages": {}, "logits": [], "splits": [], "datasets": []}
SPEC = {
    "title": "One verdict",
    "description": "",
    "protocol": {"n_bins": 15, "plot_bins": 10, "n_bootstrap": 20, "level": 0.95},
    "datasets": {"ds": {"display": "DS"}},
    "models": {m: {"dataset": "ds", "display": {"name": m.upper()}} for m in MODELS},
    "calibrators": {m: {"display": m.upper()} for m in METHODS},
    "table_metrics": list(METRICS_USED),
    "losses_metrics": [],
    "reference": None,
}
LABEL = {m.upper(): m for m in (*METHODS, *MODELS)}
#: the temperature of each calibrator's outputs: uncalibrated over-confident, the rest near 1
TEMPS = {"uncalibrated": 2.0, "ts": 1.05, "a": 1.0, "b": 0.97, "c": 1.4}


def _study():
    """Metric rows, comparison rows (``calbench compare``'s, from probabilities) and
    robustness rows of 3 models, every number computed from the same probabilities."""
    rows, compare, robust = [], [], []
    for i, model in enumerate(MODELS):
        rng = np.random.default_rng(i)
        z = rng.normal(size=(500, 4)) * 2
        y = (softmax(z).cumsum(1) > rng.random((500, 1))).argmax(1)
        probs = {m: softmax(TEMPS[m] * z) for m in METHODS}
        halves = {"test": (None, y), "meta": {"dataset": "ds", "model": model}}
        got = compare_rows(halves, probs, {m: METRICS[m] for m in METRICS_USED},
                           ["uncalibrated", "ts"], best={"nll": "a", "ece_ub": "b"},
                           n_bootstrap=20)  # fmt: skip
        compare += got
        value = {(r["metric"], r["method"]): r["value"] for r in got}
        value |= {(r["metric"], r["baseline"]): r["baseline_value"] for r in got}
        for metric in METRICS_USED:
            for m in METHODS:
                v = float(value[(metric, m)])
                rows.append({"dataset": "ds", "model": model, "method": m, "half": "test",
                             "metric": metric, "value": v, "ci_low": 0.0,
                             "ci_high": v + 1.0})  # fmt: skip
        ece = [float(value[("ece_ub", m)]) for m in METHODS]
        r = dict(zip(METHODS, ranks_nan_last(ece), strict=True))
        for m, v in zip(METHODS, ece, strict=True):
            for variant in VARIANTS:
                default = variant == DEFAULT_VARIANT
                robust.append({"dataset": "ds", "model": model, "method": m, "variant": variant,
                               "value": v, "rank": float(r[m]),
                               "p_first": float(r[m] == 1) if default else float("nan"),
                               "p_runner_up": 0.01 if default and r[m] == 1 else float("nan")})  # fmt: skip
    return rows, compare, robust


def _said(method: str, baseline: str, verdict: str) -> tuple[frozenset, str]:
    """A verdict on an unordered pair: which calibrator it favours, or ``none``."""
    pair = frozenset((method, baseline))
    if verdict == "better":
        return pair, method
    if verdict == "worse":
        return pair, baseline
    return pair, "none"


def walk(ctx) -> dict:
    """Every statement of the report about a pair of calibrators on a model and metric, checked
    to agree; returns the comparison table's verdicts ``(model, metric, pair) -> favoured``."""
    table: dict[tuple, str] = {}
    uri = ctx["compare"]["csv"]  # the comparison table's download: what the reader gets
    text = base64.b64decode(uri.split("base64,", 1)[1]).decode()
    for r in csv.DictReader(io.StringIO(text)):
        model, metric = LABEL[r["model"]], r["metric"]
        method, baseline = LABEL[r["calibrator"]], LABEL[r["against"]]
        diff = float(r["difference"])
        way = "better" if diff < 0 else "worse"  # both metrics: lower is better
        verdict = way if r["significant"] == "1" else "not significant"
        pair, favoured = _said(method, baseline, verdict)
        key = (model, metric, pair)
        assert table.setdefault(key, favoured) == favoured, f"two verdicts on {key}"
    # the findings: each statement matches the table, and no pair is stated twice
    stated: set = set()
    for item in ctx["findings"]["items"]:
        for e in item.get("pairs") or []:
            pair, favoured = _said(e["method"], e["baseline"], e["verdict"])
            key = (e["model"], e["metric"], pair)
            assert table[key] == favoured, f"finding {item['text']!r} disagrees on {key}"
            if item["family"].startswith("vs:"):
                assert key not in stated, f"{key} stated twice in the findings"
                stated.add(key)
    # the ranks rank the estimate the table compares: a calibrator significantly better than
    # another on every model never ranks behind it on average
    for entry in ctx["ranks"]:
        rank = {m["key"]: m["rank"] for m in entry["methods"]}
        for x in rank:
            for w in rank:
                if x != w and all(
                    table.get((model, entry["metric"], frozenset((x, w)))) == x for model in MODELS
                ):
                    assert rank[x] < rank[w], (entry["metric"], x, w)
    # robustness: the per-model winner is never significantly worse than its runner-up
    for d in ctx["robustness"]["per_model"]:
        model, win, up = LABEL[d["label"]], LABEL[d["winner"]], LABEL[d["runner_up"]]
        assert table.get((model, "ece_ub", frozenset((win, up))), win) in (win, "none")
    return table


def test_every_statement_about_a_pair_agrees():
    rows, compare, robust = _study()
    ctx = build_context(rows=rows, compare=compare, spec=SPEC, grids={},
                               provenance=PROV, robustness=robust)  # fmt: skip
    table = walk(ctx)
    # the shared pairs are there, tested once: ts vs uncalibrated and the best picks vs both
    assert (MODELS[0], "nll", frozenset(("ts", "uncalibrated"))) in table
    assert len(table) == len(MODELS) * len(METRICS_USED) * 9
    assert any(d.get("pairs") for d in ctx["findings"]["items"])


def test_an_older_file_with_a_pair_in_two_families_gets_one_verdict():
    """Comparison rows adjusted per question (files written before one family per model and
    metric): ts vs uncalibrated significant in ``vs:uncalibrated``, uncalibrated vs ts not
    in ``vs:ts``; the report adjusts the distinct pairs once and states one verdict."""
    rows, compare, robust = _study()
    for r in compare:
        if r["metric"] == "ece_ub" and {r["method"], r["baseline"]} == {"ts", "uncalibrated"}:
            r["p_value"], r["family_size"] = 0.004, 4
            r["p_holm"] = 0.016 if r["family"] == "vs:uncalibrated" else 0.2
            r["direction"] = "better" if r["method"] == "ts" else "worse"
            r["difference"] = -abs(r["difference"]) if r["method"] == "ts" else abs(
                r["difference"])  # fmt: skip
    ctx = build_context(rows=rows, compare=compare, spec=SPEC, grids={},
                               provenance=PROV, robustness=robust)  # fmt: skip
    table = walk(ctx)
    verdicts = {table[(m, "ece_ub", frozenset(("ts", "uncalibrated")))] for m in MODELS}
    assert len(verdicts) == 1


def test_a_pair_of_baselines_is_stated_once_against_uncalibrated():
    rows, compare, robust = _study()
    # temperature scaling significantly better than uncalibrated on NLL on every model, and
    # the vs:ts question listed first
    for r in compare:
        if r["metric"] == "nll" and {r["method"], r["baseline"]} == {"ts", "uncalibrated"}:
            r["p_value"], r["p_holm"] = 1e-6, 1e-5
            r["direction"] = "better" if r["method"] == "ts" else "worse"
    compare.sort(key=lambda r: r["family"] != "vs:ts")
    ctx = build_context(rows=rows, compare=compare, spec=SPEC, grids={},
                               provenance=PROV, robustness=robust)  # fmt: skip
    walk(ctx)
    said = [
        d for d in ctx["findings"]["items"]
        if any({e["method"], e["baseline"]} == {"ts", "uncalibrated"} and e["metric"] == "nll"
               for e in d["pairs"])
    ]  # fmt: skip
    assert len(said) == 1 and said[0]["family"] == "vs:uncalibrated"
    assert "TS" in said[0]["text"] and "vs UNCALIBRATED" in said[0]["text"]


def test_a_cross_fitted_study_says_one_thing_per_pair(tmp_path):
    """The same walk over a study cross-fitted through the calibrate step itself (3 models, 3
    folds x 2 partitions, the nested best, the corrected repeated cross-validation tests), its
    files read back as the report reads them: every statement about a pair agrees."""
    from calbench.calibrate_spec import DEFAULTS
    from calbench.protocol import CalibrateSpec
    from calbench.report.build import read_robustness_rows
    from calbench.results import COMPARE_COLUMNS, read_long_csv
    from calbench.split import save_split, study_split

    spec = {k: dict(v) if isinstance(v, dict) else v for k, v in DEFAULTS.items()}
    spec["calibrators"] = {
        key: {"method": method, "params": {}, "display": key.upper()}
        for key, method in zip(METHODS, ("uncalibrated", "ts", "vs", "hist", "iso"), strict=True)
    }
    spec["evaluation"] = {**spec["evaluation"], "scheme": "crossfit", "folds": 3, "repeats": 2,
                          "n_bootstrap": 20, "metrics": ["accuracy", *METRICS_USED]}  # fmt: skip
    spec["compare"] = {**spec["compare"], "metrics": list(METRICS_USED), "select_folds": 3,
                       "n_bootstrap": 20, "select_exclude": []}  # fmt: skip
    spec["plots"] = {**spec["plots"], "per_calibrator": False}
    metrics, compares, robust = [], [], []
    for i, model in enumerate(MODELS):
        rng = np.random.default_rng(i)
        z = rng.normal(size=(400, 4)) * 3
        y = (softmax(z / 2).cumsum(1) > rng.random((400, 1))).argmax(1)
        out = tmp_path / model
        files = (tmp_path / f"{model}.npz", tmp_path / f"{model}.split.npz")
        np.savez(files[0], logits=z, labels=y, order_hash="h", model=model, dataset="ds")
        save_split(files[1], *study_split(len(y)))
        CalibrateSpec.from_dict(spec).run(
            *files, calibrators_dir=out, metrics_dir=out, plots_dir=out, dataset="ds",
            model=model, compare_out=out / "compare.csv", robustness_out=out / "rob.csv",
        )  # fmt: skip
        metrics += [out / f"{m}.csv" for m in METHODS]
        compares.append(out / "compare.csv")
        robust.append(out / "rob.csv")
    rows = read_long_csv(metrics)
    assert {r["half"] for r in rows} == {"oof"}
    compare = read_long_csv(compares, required=COMPARE_COLUMNS)
    crossfit = {**SPEC, "protocol": {**SPEC["protocol"], "scheme": "crossfit", "folds": 3,
                                     "repeats": 2}}  # fmt: skip
    ctx = build_context(rows=rows, compare=compare, spec=crossfit, grids={}, provenance=PROV,
                        robustness=read_robustness_rows(robust))  # fmt: skip
    table = walk(ctx)
    assert (MODELS[0], "nll", frozenset(("ts", "uncalibrated"))) in table
