"""calbench.stats.comparisons: verdict-eligible metrics only, the direction of every verdict, the
resolution floor of a resampling test and the wording of each test's null hypothesis."""

from __future__ import annotations

import numpy as np
import pytest

from calbench.functional import softmax
from calbench.metrics import METRICS, PAIRED_TESTS
from calbench.stats import PairedTest, holm
from calbench.stats.comparisons import (
    NULL_HYPOTHESES,
    check_verdict_metrics,
    compare_rows,
    direction,
    null_hypothesis,
    p_floor,
    verdict_metrics,
)


def test_direction_labels():
    assert direction(-0.02, higher_is_better=False) == "better"  # lower NLL
    assert direction(0.02, higher_is_better=False) == "worse"
    assert direction(0.01, higher_is_better=True) == "better"  # higher accuracy
    assert direction(-0.01, higher_is_better=True) == "worse"
    assert direction(0.0, higher_is_better=False) == "equal"
    assert direction(float("nan"), higher_is_better=False) == ""


def test_p_floor_only_for_resampling_tests():
    assert p_floor(PairedTest(0.1, 0.1, 1 / 720, "sign_flip", 1 / 720, 719)) == 1 / 720
    assert p_floor(PairedTest(0.1, 2.0, 0.04, "paired_t", 0.0)) == 0.0
    # McNemar's smallest p-value is exact, not a resolution floor
    assert p_floor(PairedTest(0.1, 3.0, 0.25, "mcnemar_exact", 0.25)) == 0.0


def test_every_paired_test_has_its_null_in_words():
    assert set(PAIRED_TESTS) <= set(NULL_HYPOTHESES)
    assert "not equal calibration error" in null_hypothesis("sign_flip")
    assert null_hypothesis("jackknife_z").startswith("equal population")
    with pytest.raises(ValueError, match="no null-hypothesis wording"):
        null_hypothesis("nope")


def test_plug_in_metrics_are_refused_with_the_metric_to_use_instead():
    eligible = verdict_metrics()
    assert {"accuracy", "nll", "brier", "ece_ub", "cwece_ub", "ece_ub_mass"} <= set(eligible)
    assert not {"ece", "cwece", "mce", "smece"} & set(eligible)
    for plug_in, instead in (("ece", "ece_ub"), ("cwece", "cwece_ub"), ("ace", "ece_ub_mass")):
        with pytest.raises(ValueError, match=f"use '{instead}'"):
            check_verdict_metrics(["nll", plug_in])
    with pytest.raises(ValueError, match="unknown metric 'ecee'"):
        check_verdict_metrics(["ecee"])
    y = np.array([0, 1] * 10)
    halves = {"test": (None, y), "meta": {"dataset": "d", "model": "m"}}
    p = np.full((20, 2), 0.5)
    with pytest.raises(ValueError, match="plug-in estimate"):
        compare_rows(halves, {"a": p, "b": p}, {"ece": METRICS["ece"]}, ["b"])


def test_rows_carry_direction_floor_and_null_and_best_comes_from_outside():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(2000, 4)) * 2
    p = softmax(z)
    y = (p.cumsum(1) > rng.random((2000, 1))).argmax(1)
    by = {"good": p, "over": softmax(3 * z)}
    halves = {"test": (None, y), "meta": {"dataset": "d", "model": "m"}}
    metrics = {m: METRICS[m] for m in ("nll", "ece_ub", "accuracy")}
    rows = compare_rows(halves, by, metrics, ["over"], best={"nll": "over"},
                        selected_on="val:5-fold cross-fit", n_bootstrap=20)  # fmt: skip
    by_key = {(r["metric"], r["family"], r["method"], r["baseline"]): r for r in rows}
    r = by_key[("nll", "vs:over", "good", "over")]
    assert r["direction"] == "better" and r["difference"] < 0 and r["p_floor"] == 0.0
    assert r["null_hypothesis"] == NULL_HYPOTHESES["paired_t"]
    # the selection (made elsewhere, here deliberately the worse one) is tested, not redone
    r = by_key[("nll", "best", "over", "good")]
    assert r["direction"] == "worse" and r["selected_on"] == "val:5-fold cross-fit"
    r = by_key[("ece_ub", "vs:over", "good", "over")]
    assert r["direction"] == "better" and r["test"] == "jackknife_z" and r["p_value"] < 1e-6
    assert r["null_hypothesis"] == NULL_HYPOTHESES["jackknife_z"]
    # no "best" family for a metric without a selection
    assert not [r for r in rows if r["family"] == "best" and r["metric"] != "nll"]
    assert by_key[("accuracy", "vs:over", "good", "over")]["direction"] == "equal"
    with pytest.raises(ValueError, match="selected calibrators"):
        compare_rows(halves, by, metrics, ["over"], best={"nll": "nope"})


def test_paired_sides_equal_the_pairwise_functions_bit_for_bit(monkeypatch):
    from calbench import _checks
    from calbench.stats import paired_bootstrap, paired_test
    from calbench.stats import sides as sides_module
    from calbench.stats.sides import PairedSides

    rng = np.random.default_rng(5)
    n, k = 300, 4
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k)) + 2.0 * np.eye(k)[y]
    probs = {
        "a": softmax(z).astype(np.float32),
        "b": softmax(0.5 * z),
        "c": softmax(1.7 * z),
    }
    names = [*verdict_metrics(), "ece"]  # and one sign-flip metric, by the pairwise function
    for name in names:
        fn = METRICS[name]
        sides = PairedSides(fn, probs, y)
        for a in probs:
            assert sides.value(a) == float(fn(probs[a], y)), name
            for b in probs:
                if a == b:
                    continue
                assert sides.test(a, b, n_permutations=99, seed=3) == paired_test(
                    fn, probs[a], probs[b], y, n_permutations=99, seed=3
                ), (name, a, b)
                if fn.interval == "percentile":
                    got = sides.bootstrap(
                        a, b, n_resamples=50, level=0.9, seed=2, method="percentile"
                    )
                    want = paired_bootstrap(
                        fn, probs[a], probs[b], y, n_resamples=50, level=0.9, seed=2,
                        method="percentile",
                    )  # fmt: skip
                    assert got == want, (name, a, b)
    # each array is validated once, whatever the number of comparisons
    seen = []
    real = _checks.check_probs
    monkeypatch.setattr(
        sides_module, "check_probs", lambda p, *a, **kw: seen.append(1) or real(p, *a, **kw)
    )
    sides = PairedSides(METRICS["nll"], probs, y)
    for a in probs:
        for b in probs:
            if a != b:
                sides.test(a, b)
                sides.bootstrap(a, b, n_resamples=20, method="percentile")
    assert len(seen) == len(probs)


def test_paired_sides_refuse_mismatched_shapes():
    from calbench.stats.sides import PairedSides

    y = np.array([0, 1, 0])
    with pytest.raises(ValueError, match="probs_b has shape"):
        PairedSides(METRICS["nll"], {"a": np.full((3, 2), 0.5), "b": np.full((3, 3), 1 / 3)}, y)


def test_the_metrics_rows_jackknives_serve_the_comparisons_unchanged(monkeypatch):
    from calbench.steps import evaluate_rows

    rng = np.random.default_rng(8)
    n, k = 400, 3
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k)) + 2.0 * np.eye(k)[y]
    by = {"a": softmax(z), "b": softmax(0.6 * z), "c": softmax(1.5 * z)}
    halves = {"test": (z, y), "meta": {"dataset": "d", "model": "m"}}
    metrics = {name: METRICS[name] for name in ("ece_ub", "cwece_ub", "nll")}
    kept = {}
    for m, p in by.items():
        kept[m] = {}
        evaluate_rows(halves, {"test": p}, m, metrics, half_names=["test"], n_bootstrap=20,
                      level=0.95, seed=0, jackknives=kept[m])  # fmt: skip
        kept[m] = kept[m]["test"]
    assert {m: sorted(j) for m, j in kept.items()} == dict.fromkeys(by, ["cwece_ub", "ece_ub"])
    options = {"best": {"ece_ub": "b"}, "n_bootstrap": 30, "seed": 1}
    fresh = compare_rows(halves, by, metrics, ["a"], **options)
    calls = []
    from calbench.stats import sides as sides_module

    real_once = sides_module.PairedSides._once

    def counting(self, key, compute):
        if key[0] == "jackknife" and key not in self._memo:
            calls.append(key)
        return real_once(self, key, compute)

    monkeypatch.setattr(sides_module.PairedSides, "_once", counting)
    shared = compare_rows(halves, by, metrics, ["a"], jackknives=kept, **options)
    assert not calls  # every jackknife came from the metrics rows
    assert [{k: repr(v) for k, v in r.items()} for r in shared] == [
        {k: repr(v) for k, v in r.items()} for r in fresh
    ]  # bit for bit (NaN bounds included)


def test_a_pair_asked_by_two_questions_gets_one_test_and_one_verdict():
    """ts vs uncalibrated (family vs:uncalibrated), uncalibrated vs ts (vs:ts) and the best pick
    against each baseline are one Holm family per model and metric, each pair in it once."""
    rng = np.random.default_rng(3)
    z = rng.normal(size=(600, 4)) * 2
    y = (softmax(z).cumsum(1) > rng.random((600, 1))).argmax(1)
    by = {
        "uncalibrated": softmax(2.2 * z),
        "ts": softmax(1.1 * z),
        "a": softmax(1.0 * z),
        "b": softmax(0.9 * z),
        "c": softmax(1.6 * z),
    }
    halves = {"test": (None, y), "meta": {"dataset": "d", "model": "m"}}
    metrics = {m: METRICS[m] for m in ("nll", "ece_ub")}
    rows = compare_rows(halves, by, metrics, ["uncalibrated", "ts"],
                        best={"nll": "a", "ece_ub": "a"}, n_bootstrap=20)  # fmt: skip
    for metric in metrics:
        rs = [r for r in rows if r["metric"] == metric]
        pairs = {frozenset((r["method"], r["baseline"])) for r in rs}
        # 4 vs uncalibrated, 3 more vs ts, 2 more for the best pick
        assert len(pairs) == 9 and len(rs) == 4 + 4 + 4
        assert {r["family_size"] for r in rs} == {9}
        by_pair: dict = {}
        for r in rs:
            by_pair.setdefault(frozenset((r["method"], r["baseline"])), []).append(r)
        shared = {k: v for k, v in by_pair.items() if len(v) > 1}
        assert frozenset(("ts", "uncalibrated")) in shared
        assert frozenset(("a", "uncalibrated")) in shared
        for twins in shared.values():
            assert len({r["p_holm"] for r in twins}) == 1
            assert len({r["p_value"] for r in twins}) == 1
            signs = {
                (r["method"], r["direction"]) if r["method"] == twins[0]["method"]
                else (r["baseline"], {"better": "worse", "worse": "better"}.get(r["direction"],
                                                                              r["direction"]))
                for r in twins
            }  # fmt: skip
            assert len(signs) == 1
        # Holm over the 9 distinct pairs
        first = {}
        for r in rs:
            first.setdefault(frozenset((r["method"], r["baseline"])), r["p_value"])
        expected = dict(zip(first, holm(list(first.values())), strict=True))
        for r in rs:
            assert r["p_holm"] == pytest.approx(expected[frozenset((r["method"], r["baseline"]))])
