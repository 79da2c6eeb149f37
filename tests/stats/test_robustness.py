"""calbench.stats.robustness: rankings under other evaluation choices (Nixon et al. 2019) on the
unbiased calibration errors, and the robust-winner rule (a test against the runner-up that
rejects and first place under every choice)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calbench.functional import softmax
from calbench.stats.robustness import (
    DEFAULT_VARIANT,
    VARIANTS,
    first_place_probability,
    robustness_rows,
    summarise,
)


def _ub_pairs(p, y, n_bins):
    """Independent unbiased top-label error by brute force: equal-width bins [a, b) (confidence
    1 in the last bin), T = 1/N sum_b sum_{i != j in b} d_i d_j / (n_b - 1), d = correct - conf;
    as its signed root sign(T) sqrt(|T|) (the reported sqrt(max(T, 0)) where T >= 0)."""
    conf, pred = p.max(1), p.argmax(1)
    d = (pred == y).astype(float) - conf
    ids = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        db = d[ids == b]
        n = len(db)
        if n >= 2:
            pairs = sum(db[i] * db[j] for i in range(n) for j in range(n) if i != j)
            total += pairs / (n - 1)
    t = total / len(y)
    return math.copysign(math.sqrt(abs(t)), t)


@pytest.fixture(scope="module")
def probs():
    """Three prediction sets on the same labels: calibrated, over-confident, under-confident."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(2000, 5)) * 2.0
    p_true = softmax(z)
    y = (p_true.cumsum(1) > rng.random((2000, 1))).argmax(1)
    return {"good": p_true, "over": softmax(3 * z), "under": softmax(z / 3)}, y


def test_values_equal_an_independent_unbiased_error():
    rng = np.random.default_rng(3)
    z = rng.normal(size=(150, 4)) * 2.0
    p = softmax(z)
    y = (p.cumsum(1) > rng.random((150, 1))).argmax(1)
    by = {"good": p, "over": softmax(3 * z), "under": softmax(z / 3)}
    rows = robustness_rows(by, y, dataset="d", model="m", n_resamples=5)
    for r in rows:
        if r["variant"] in ("ece_ub_w10", "ece_ub_w15", "ece_ub_w20"):
            bins = int(r["variant"][-2:])
            assert r["value"] == pytest.approx(_ub_pairs(by[r["method"]], y, bins), abs=1e-12)
    assert {r["variant"] for r in rows} == set(VARIANTS)
    assert len(rows) == len(VARIANTS) * 3
    # an estimate below 0 ranks below a 0 estimate: no tie from the clipping at 0
    assert min(r["value"] for r in rows) < 0


def test_calibrated_model_ranks_first_everywhere_and_summary_says_robust(probs):
    by, y = probs
    rows = robustness_rows(by, y, dataset="d", model="m", n_resamples=50)
    assert all(r["rank"] == 1.0 for r in rows if r["method"] == "good")
    p_first = {r["method"]: r["p_first"] for r in rows if r["variant"] == DEFAULT_VARIANT}
    assert p_first["good"] > 0.9 and sum(p_first.values()) == pytest.approx(1.0)
    assert all(math.isnan(r["p_first"]) for r in rows if r["variant"] != DEFAULT_VARIANT)
    # the winner's row carries its test against the runner-up (equal calibration error)
    win = next(r for r in rows if r["variant"] == DEFAULT_VARIANT and r["method"] == "good")
    assert win["p_runner_up"] < 1e-6
    assert all(math.isnan(r["p_runner_up"]) for r in rows if r is not win)
    s = summarise(rows)
    assert s["headline"] == ["good"] and s["robust"] and s["models"] == 1
    assert s["per_model"][0]["robust"] and s["per_model"][0]["runner_up"] in ("over", "under")


def _ub_fast(p, y, n_bins=15):
    """The unclipped T of :func:`_ub_pairs`, with sum_{i != j} d_i d_j = S^2 - Q per bin."""
    conf, pred = p.max(1), p.argmax(1)
    d = (pred == y).astype(float) - conf
    ids = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        db = d[ids == b]
        if len(db) >= 2:
            total += (db.sum() ** 2 - (db * db).sum()) / (len(db) - 1)
    return total / len(y)


def test_first_place_probability_equals_a_resample_loop(probs):
    """Same seed, same resampled indices: the vectorised count equals a plain loop."""
    from calbench.stats import resample_indices

    by, y = probs
    got = first_place_probability(by, y, n_resamples=30, seed=4)
    wins = dict.fromkeys(by, 0.0)
    for idx in resample_indices(len(y), 30, 4):
        for row in idx:
            vals = {m: _ub_fast(p[row], y[row]) for m, p in by.items()}
            best = min(vals.values())
            firsts = [m for m, v in vals.items() if abs(v - best) <= 1e-12]
            for m in firsts:
                wins[m] += 1 / len(firsts)
    assert got == pytest.approx({m: w / 30 for m, w in wins.items()}, abs=1e-12)


def _table(ranks_by_variant, p_runner_up, values=None, model="m"):
    """Hand-built robustness rows: ``{variant: {method: rank}}``; the default variant's rank-1
    method carries ``p_runner_up``."""
    rows = []
    for variant, per_method in ranks_by_variant.items():
        for method, rank in per_method.items():
            default = variant == DEFAULT_VARIANT
            rows.append(
                {
                    "dataset": "d",
                    "model": model,
                    "method": method,
                    "variant": variant,
                    "value": (values or {}).get(method, rank / 10),
                    "rank": rank,
                    "p_first": 0.5 if default else float("nan"),
                    "p_runner_up": p_runner_up if default and rank == 1.0 else float("nan"),
                }
            )
    return rows


def test_robust_only_when_the_test_rejects_and_first_under_every_choice():
    first = {DEFAULT_VARIANT: {"a": 1.0, "b": 2.0}, "ece_ub_w10": {"a": 1.0, "b": 2.0}}
    s = summarise(_table(first, 0.001))
    assert s["robust"] and s["separated"] and not s["disagree"]
    # first everywhere, but the test against the runner-up does not reject: not robust
    s = summarise(_table(first, 0.2))
    assert not s["robust"] and not s["separated"] and not s["disagree"]
    assert s["per_model"][0]["robust"] is False
    # the test rejects, but another calibrator ranks first under 10 bins: not robust
    flip = {DEFAULT_VARIANT: {"a": 1.0, "b": 2.0}, "ece_ub_w10": {"a": 2.0, "b": 1.0}}
    s = summarise(_table(flip, 0.001))
    assert s["headline"] == ["a"] and s["survives"] == [DEFAULT_VARIANT] and not s["robust"]
    assert s["disagree"] == ["ece_ub_w10"] and s["per_model"][0]["disagree"] == ["ece_ub_w10"]


def test_over_models_the_exact_signed_rank_test_decides():
    first = {DEFAULT_VARIANT: {"a": 1.0, "b": 2.0}, "ece_ub_w10": {"a": 1.0, "b": 2.0}}
    rows = []
    for i in range(6):  # a below b on all six models: p = 2 / 2^6 = 0.03125
        rows += _table(first, 0.001, {"a": 0.01, "b": 0.02 + i / 100}, model=f"m{i}")
    s = summarise(rows)
    assert s["p"] == pytest.approx(2 / 64) and s["robust"] and s["models"] == 6
    # five models allow no p below 2 / 2^5 = 0.0625: never robust, whatever the data
    s = summarise([r for r in rows if r["model"] != "m5"])
    assert s["p"] == pytest.approx(2 / 32) == s["p_floor"] and not s["robust"]


def test_more_than_twenty_models_get_a_test_and_the_report_names_it():
    """25 and 80 models: the exact test (it was an error beyond 20); 450 models: the normal
    approximation, named in the report's sentence."""
    from calbench.report.verdicts import robustness_view

    first = {DEFAULT_VARIANT: {"a": 1.0, "b": 2.0}, "ece_ub_w10": {"a": 1.0, "b": 2.0}}
    spec = {"calibrators": {"a": {"display": "A"}, "b": {}}}
    for n, method in ((25, "exact"), (80, "exact"), (450, "normal")):
        rows = []
        for i in range(n):  # a below b on 4 of 5 models
            gap = 0.01 + i / 1000 if i % 5 else -0.005 - i / 1000
            rows += _table(first, 0.001, {"a": 0.01, "b": 0.01 + gap}, model=f"m{i}")
        s = summarise(rows)
        assert s["models"] == n and s["p_method"] == method
        assert 0 < s["p"] < 0.05 and s["robust"] and s["p_floor"] < 1e-6
        view = robustness_view(rows, spec)
        said = (
            f"signed-rank test over {n} models, normal approximation with the tie correction"
            if method == "normal"
            else f"exact signed-rank test over {n} models"
        )
        assert said in view["sentence"], view["sentence"]
        how = "its normal approximation" if method == "normal" else "the exact Wilcoxon 1945"
        assert how in view["over_models"]


def test_models_without_both_values_are_left_out_of_the_test():
    first = {DEFAULT_VARIANT: {"a": 1.0, "b": 2.0}}
    rows = []
    for i in range(6):
        rows += _table(first, 0.001, {"a": 0.01, "b": 0.02 + i / 100}, model=f"m{i}")
    rows += _table(first, 0.001, {"a": 0.01, "b": float("nan")}, model="m6")
    s = summarise(rows)
    assert s["p"] == 2 / 64 and s["p_method"] == "exact"


def test_bad_input():
    with pytest.raises(ValueError, match="at least one calibrator"):
        robustness_rows({}, np.array([0, 1, 0]), dataset="d", model="m")
    with pytest.raises(ValueError, match="n_resamples must be >= 1"):
        first_place_probability({"a": np.full((3, 2), 0.5)}, np.array([0, 1, 0]), n_resamples=0)


def test_written_rows_read_back_and_bad_files_are_named(probs, tmp_path):
    """The report reads the CSV as strictly as every other result file."""
    from calbench.report.build import read_robustness_rows
    from calbench.results import ROBUSTNESS_COLUMNS, write_long_csv

    by, y = probs
    rows = robustness_rows(by, y, dataset="d", model="m", n_resamples=10)
    path = tmp_path / "m.csv"
    write_long_csv(path, rows, ROBUSTNESS_COLUMNS)
    back = read_robustness_rows([path])
    assert [(r["method"], r["variant"], r["rank"]) for r in back] == [
        (r["method"], r["variant"], r["rank"]) for r in rows
    ]
    with pytest.raises(ValueError, match="nope.csv does not exist"):
        read_robustness_rows([tmp_path / "nope.csv"])
    text = path.read_text().splitlines()
    (tmp_path / "empty.csv").write_text(text[0] + "\n")
    with pytest.raises(ValueError, match="empty.csv holds no rows"):
        read_robustness_rows([tmp_path / "empty.csv"])
    bad = list(text)
    bad[1] = bad[1].replace(bad[1].split(",")[5], "nan", 1)  # a rank that is not finite
    path.write_text("\n".join(bad) + "\n")
    with pytest.raises(ValueError, match="m.csv line 2"):
        read_robustness_rows([path])
    default_line = next(i for i, t in enumerate(text) if f",{DEFAULT_VARIANT}," in t)
    cells = text[default_line].split(",")
    cells[ROBUSTNESS_COLUMNS.index("p_first")] = ""  # blank p_first
    text[default_line] = ",".join(cells)
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(ValueError, match="has no first-place probability"):
        read_robustness_rows([path])


def test_report_view_says_robust_or_names_the_flip(probs):
    from calbench.report.verdicts import robustness_view

    by, y = probs
    spec = {"calibrators": {"good": {"display": "Good"}, "over": {}, "under": {}}}
    view = robustness_view(robustness_rows(by, y, dataset="d", model="m", n_resamples=10), spec)
    assert view["sentence"].startswith(
        "Robust: Good has the best average rank on the unbiased ECE under all 5"
    )
    assert view["robust"] and all(r["same"] for r in view["table"]) and view["n_robust"] == 1
    flipped = [
        {
            **r,
            "rank": 3.0 - r["rank"]
            if r["variant"] == "ece_ub_w10" and r["method"] != "under"
            else r["rank"],
        }
        for r in robustness_rows(by, y, dataset="d", model="m", n_resamples=10)
    ]
    view = robustness_view(flipped, spec)
    assert view["sentence"].startswith("Not shown robust: Good has the best average rank")
    assert "Unbiased ECE, 10 equal-width bins (over)" in view["sentence"]
    assert "the data cannot separate" in view["sentence"]


def test_report_view_says_when_the_data_cannot_separate_the_two():
    from calbench.report.verdicts import robustness_view

    first = {DEFAULT_VARIANT: {"a": 1.0, "b": 2.0}, "ece_ub_w10": {"a": 1.0, "b": 2.0}}
    rows = []
    for i in range(3):
        rows += _table(first, 0.001, {"a": 0.01, "b": 0.02}, model=f"m{i}")
    view = robustness_view(rows, {"calibrators": {"a": {"display": "A"}, "b": {}}})
    assert not view["robust"]
    assert "its difference from the runner-up b is not significant" in view["sentence"]
    assert "exact signed-rank test over 3 models, p = 0.250" in view["sentence"]
    assert "the smallest p-value 3 models allow is 0.25" in view["sentence"]


@pytest.mark.parametrize("n", [60, 2000])
def test_every_signed_estimate_is_its_metric_unclipped(n):
    """Each metric of SIGNED_ESTIMATES ranks on a variant that computes the metric's own ``T``,
    signed: where ``T >= 0`` it equals the metric's value, where ``T < 0`` its negative root;
    the classwise error too when few samples thin its bins (``classwise_bins``)."""
    from calbench.metrics import METRICS
    from calbench.stats.robustness import SIGNED_ESTIMATES

    assert set(SIGNED_ESTIMATES) == {"ece_ub", "ece_ub_mass", "cwece_ub"}
    seen_negative = set()
    for seed in range(12):
        rng = np.random.default_rng(seed)
        p = softmax(rng.normal(size=(n, 10)) * 1.5)
        y = (p.cumsum(1) > rng.random((n, 1))).argmax(1)
        for metric, variant in SIGNED_ESTIMATES.items():
            signed = VARIANTS[variant][1](p, y)
            value = METRICS[metric](p, y)
            if signed >= 0:
                assert signed == pytest.approx(value, rel=1e-9, abs=1e-12)
            else:
                assert value == 0.0
                seen_negative.add(metric)
    assert seen_negative  # the case reaches the clipped side
