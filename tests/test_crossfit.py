"""Cross-fitting (calbench.crossfit): the folds, the out-of-fold predictions, and the nested
"best" that never sees the fold it predicts (proved by an instrumented calibrator)."""

from __future__ import annotations

import numpy as np
import pytest

from calbench.calibrators import get_calibrator
from calbench.crossfit import (
    crossfit_predict,
    fold_assignments,
    nested_best,
    nested_bests,
    ring_pairs,
)
from calbench.metrics import brier, nll


def _problem(n=60, k=3, seed=0):
    """Logits whose first column is the sample's index (so a calibrator can tell which samples
    it sees) and labels with unequal class sizes."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k))
    z[:, 0] = np.arange(n)
    y = rng.choice(k, size=n, p=[0.6, 0.3, 0.1])
    return z, y


class Frequencies:
    """Predicts the training part's label frequencies (plus-one smoothed) whatever the logits;
    ``shrink`` pulls them towards uniform (another candidate). Records what it sees."""

    log: list = []

    def __init__(self, shrink=0.0, name="freq"):
        self.shrink, self.name = shrink, name

    def fit(self, z, y):
        self.seen = set(z[:, 0].astype(int).tolist())
        Frequencies.log.append((id(self), "fit", frozenset(self.seen)))
        k = z.shape[1]
        f = (np.bincount(y, minlength=k) + 1.0) / (len(y) + k)
        self.p = (1 - self.shrink) * f + self.shrink / k
        z[:] = 0.0  # a careless plug-in writing into its input must not change other fits
        return self

    def predict_proba(self, z):
        rows = frozenset(z[:, 0].astype(int).tolist())
        Frequencies.log.append((id(self), "predict", rows))
        return np.tile(self.p, (z.shape[0], 1))


@pytest.fixture(autouse=True)
def _fresh_log():
    Frequencies.log = []


def test_folds_are_deterministic_balanced_and_stratified():
    _, y = _problem(n=61)
    a = fold_assignments(y, folds=5, repeats=3, seed=4)
    assert a.shape == (3, 61) and a.dtype == np.int64
    np.testing.assert_array_equal(a, fold_assignments(y, 5, 3, 4))
    np.testing.assert_array_equal(a[:2], fold_assignments(y, 5, 2, 4))  # more repeats keep these
    assert not np.array_equal(a[0], a[1]) and not np.array_equal(a, fold_assignments(y, 5, 3, 5))
    for row in a:
        sizes = np.bincount(row, minlength=5)
        assert sizes.max() - sizes.min() <= 1
        for c in range(3):
            per = np.bincount(row[y == c], minlength=5)
            assert per.max() - per.min() <= 1, (c, per)
    plain = fold_assignments(61, folds=5, repeats=2, seed=4, stratified=False)
    assert all(np.ptp(np.bincount(r)) <= 1 for r in plain)
    # the documented construction of a plain partition
    want = np.empty(61, dtype=np.int64)
    want[np.random.default_rng([4, 1]).permutation(61)] = np.arange(61) % 5
    np.testing.assert_array_equal(plain[1], want)


def test_stratification_is_needed_for_a_rare_class():
    # 5 samples of class 2 among 60: plain folds put two in some fold for some seed, stratified
    # folds one in each
    y = np.array([0] * 40 + [1] * 15 + [2] * 5)
    strat = fold_assignments(y, 5, 20, 0)
    plain = fold_assignments(60, 5, 20, 0, stratified=False)
    assert all(np.bincount(r[y == 2], minlength=5).max() == 1 for r in strat)
    assert any(np.bincount(r[y == 2], minlength=5).max() > 1 for r in plain)


def test_crossfit_predict_known_answer_and_fresh_fits():
    z, y = _problem()
    a = fold_assignments(y, 4, 2, 0)
    out = crossfit_predict(Frequencies, z, y, assignment=a)
    assert out.shape == (2, 60, 3)
    for r in range(2):
        for f in range(4):
            train = a[r] != f
            want = (np.bincount(y[train], minlength=3) + 1.0) / (train.sum() + 3)
            np.testing.assert_allclose(out[r, a[r] == f], np.tile(want, ((a[r] == f).sum(), 1)))
    fits = [e for e in Frequencies.log if e[1] == "fit"]
    assert len(fits) == 8
    assert z[:, 0].tolist() == list(range(60))  # the caller's logits are untouched
    np.testing.assert_array_equal(out, crossfit_predict(Frequencies, z, y, 4, 2, 0))


def test_no_fit_sees_the_fold_it_predicts():
    z, y = _problem()
    crossfit_predict(Frequencies, z, y, folds=5, repeats=3, seed=1)
    fitted = {}
    for obj, what, rows in Frequencies.log:
        if what == "fit":
            fitted[obj] = rows
        else:
            assert not rows & fitted[obj]
            assert len(rows) + len(fitted[obj]) == 60  # trained on all the other folds


def test_make_must_return_a_new_calibrator():
    z, y = _problem()
    one = Frequencies()
    with pytest.raises(ValueError, match="return a new one each call") as info:
        crossfit_predict(lambda: one, z, y, folds=3)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda z, y: fold_assignments(y, folds=1), "folds must be an integer in"),
        (lambda z, y: fold_assignments(y, repeats=0), "repeats must be an integer in"),
        (lambda z, y: fold_assignments(60, 5), "stratified folds need the labels"),
        (lambda z, y: fold_assignments(y[:9], 5), "need >= 10 samples"),
        (lambda z, y: crossfit_predict(Frequencies, z, y, assignment=np.zeros(60, int)), "F >= 2"),
        (
            lambda z, y: crossfit_predict(lambda: _Bad(), z, y, folds=3),
            "predict_proba gave",
        ),
        (lambda z, y: crossfit_predict(_Unnormalised, z, y, folds=3), "summing to 1"),
        (
            lambda z, y: crossfit_predict(lambda: get_calibrator("platt"), z, y, folds=3),
            "repeat 0, fold 0: .*platt is binary",
        ),
        (lambda z, y: nested_best({}, z, y, nll), "at least one candidate"),
    ],
)
def test_bad_input_is_a_one_line_error(call, match):
    z, y = _problem()
    with pytest.raises(ValueError, match=match) as info:
        call(z, y)
    assert "\n" not in str(info.value)


class _Bad(Frequencies):
    def predict_proba(self, z):
        return np.full((z.shape[0], 2), 0.5)


class _Unnormalised(Frequencies):
    def predict_proba(self, z):
        return np.full(z.shape, 0.5)


def _makers():
    return {
        "freq": lambda: Frequencies(0.0, "freq"),
        "half": lambda: Frequencies(0.5, "half"),
        "uniform": lambda: Frequencies(1.0, "uniform"),
    }


def test_nested_best_never_sees_the_fold_it_predicts():
    z, y = _problem(n=80)
    a = fold_assignments(y, 4, 2, 3)
    best = nested_best(_makers(), z, y, nll, assignment=a, inner_folds=3)
    assert len(best.picks) == 2 and all(len(row) == 4 for row in best.picks)
    # the log in order: for each outer split, the inner cross-fit's fits and predictions, then
    # the pick's fit on the training part and its prediction of the held fold
    held_sets = [
        (r, f, frozenset(np.flatnonzero(a[r] == f).tolist())) for r in range(2) for f in range(4)
    ]
    fitted, segment, done = {}, [], 0
    for obj, what, rows in Frequencies.log:
        if what == "fit":
            fitted[obj] = rows
        else:
            assert not rows & fitted[obj], "a calibrator predicted samples it was fitted on"
        segment.append(rows if what == "predict" else fitted[obj])
        r, f, held = held_sets[done]
        if what == "predict" and rows == held:
            for touched in segment:  # nothing of this split touched its held fold but its
                assert touched == held or not touched & held  # final prediction
            assert sum(touched == held for touched in segment) == 1
            segment, done = [], done + 1
    assert done == 8


def test_nested_picks_do_not_depend_on_the_held_folds_labels():
    z, y = _problem(n=80, seed=2)
    a = fold_assignments(y, 4, 1, 0)
    base = nested_best(_makers(), z, y, nll, assignment=a, inner_folds=3)
    held = a[0] == 1
    y2 = y.copy()
    y2[held] = np.random.default_rng(9).permutation(np.repeat([2, 1], [held.sum() - 3, 3]))
    other = nested_best(_makers(), z, y2, nll, assignment=a, inner_folds=3)
    assert other.picks[0][1] == base.picks[0][1]  # only fold 1's labels changed
    np.testing.assert_array_equal(other.probs[0, held], base.probs[0, held])


def test_nested_best_reuses_the_candidates_out_of_fold_predictions():
    z, y = _problem(n=80)
    makers = _makers()
    oof = {m: crossfit_predict(make, z, y, 4, 2, 0) for m, make in makers.items()}
    direct = nested_best(makers, z, y, nll, folds=4, repeats=2, inner_folds=3)
    Frequencies.log = []
    reused = nested_best(makers, z, y, nll, folds=4, repeats=2, inner_folds=3, oof=oof)
    assert reused.picks == direct.picks
    np.testing.assert_array_equal(reused.probs, direct.probs)
    # with oof, the only fits are the inner cross-fits' (3 candidates x 3 inner folds x 8 splits)
    assert sum(e[1] == "fit" for e in Frequencies.log) == 3 * 3 * 8
    assert set(reused.share()) <= set(makers) and sum(reused.share().values()) == pytest.approx(1)


def test_nested_bests_picks_each_metrics_best_with_one_inner_cross_fit():
    """Several metrics at the cost of one: the same picks and predictions as nested_best per
    metric, with each outer fold's inner cross-fit run once for all of them."""
    z, y = _problem(n=80)
    makers = _makers()
    a = fold_assignments(y, 4, 2, 0)
    oof = {m: crossfit_predict(make, z, y, assignment=a) for m, make in makers.items()}
    single = {
        name: nested_best(makers, z, y, fn, assignment=a, inner_folds=3, oof=oof)
        for name, fn in (("nll", nll), ("brier", brier))
    }
    Frequencies.log = []
    both = nested_bests(
        makers, z, y, {"nll": nll, "brier": brier}, assignment=a, inner_folds=3, oof=oof
    )
    assert sum(e[1] == "fit" for e in Frequencies.log) == 3 * 3 * 8  # not twice that
    for name, one in single.items():
        assert both[name].picks == one.picks
        np.testing.assert_array_equal(both[name].probs, one.probs)
    excluded = nested_bests(
        makers, z, y, {"nll": nll}, assignment=a, inner_folds=3, exclude=["freq", "half"]
    )
    assert excluded["nll"].share() == {"uniform": 1.0}


def test_real_calibrators_cross_fit():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(120, 3)) * 3
    y = np.argmax(z + rng.normal(size=z.shape) * 2, axis=1)
    out = crossfit_predict(lambda: get_calibrator("hist", n_bins=5), z, y, folds=3, repeats=2)
    assert out.shape == (2, 120, 3)
    np.testing.assert_allclose(out.sum(axis=2), 1.0)
    best = nested_best(
        {"hist": lambda: get_calibrator("hist", n_bins=5), "raw": lambda: get_calibrator("uncalibrated")},
        z, y, nll, folds=3, repeats=1, inner_folds=3,
    )  # fmt: skip
    assert set(best.share()) <= {"hist", "raw"}


def test_shared_inner_fits_never_see_the_fold_they_serve_and_cost_f_fits():
    """inner_folds=None: the inner folds of outer fold k are its ring neighbours k - 1, k + 1
    (mod F), and the fit on every fold but {j, j + 1} serves outer fold j + 1 (predicting j) and
    outer fold j (predicting j + 1). Every fit is recorded: each inner fit trains on exactly the
    complement of two neighbouring folds of one partition and predicts only those two, each ring
    pair is fitted once per candidate (F fits, not F * inner_folds), and the scores equal an
    inner cross-fit over the two neighbours computed by hand."""
    z, y = _problem(n=100)
    a = fold_assignments(y, 5, 2, 1)
    makers = _makers()
    oof = {m: crossfit_predict(make, z, y, assignment=a) for m, make in makers.items()}
    Frequencies.log = []
    best = nested_bests(makers, z, y, {"nll": nll}, assignment=a, inner_folds=None, oof=oof)["nll"]
    log = Frequencies.log  # each fit is followed by its calibrator's one prediction
    fits = [[e[1:] for e in log[i : i + 2]] for i in range(0, len(log), 2)]
    assert all(log[i][0] == log[i + 1][0] for i in range(0, len(log), 2))
    folds = [[frozenset(np.flatnonzero(row == f).tolist()) for f in range(5)] for row in a]
    everything = frozenset(range(100))
    pairs = []
    for events in fits:
        (what, trained), (what2, predicted) = events
        assert (what, what2) == ("fit", "predict")
        left_out = everything - trained
        match = [
            (r, j, k)
            for r in range(2)
            for j in range(5)
            for k in range(j + 1, 5)
            if left_out == folds[r][j] | folds[r][k]
        ]
        assert len(match) == 1, "an inner fit trained on more than all folds but two"
        assert predicted == left_out  # it predicts the two folds it never saw, nothing else
        pairs.append(match[0])
    assert len(pairs) == 3 * 2 * 5 and len(set(pairs)) == 2 * 5  # the ring's 5 pairs per repeat
    assert {(j, k) for _, j, k in pairs} == {(0, 1), (1, 2), (2, 3), (3, 4), (0, 4)}
    assert best.inner_folds == 2
    # the picks are those of inner cross-fits with the two ring neighbours as inner folds
    for r in range(2):
        for k in range(5):
            scores = {}
            for m, make in makers.items():
                vals = []
                for j in ((k - 1) % 5, (k + 1) % 5):
                    train = (a[r] != j) & (a[r] != k)
                    cal = make().fit(z[train].copy(), y[train])
                    vals.append(nll(cal.predict_proba(z[a[r] == j].copy()), y[a[r] == j]))
                scores[m] = np.mean(vals)
            assert best.picks[r][k] == min(scores, key=scores.get)
            np.testing.assert_array_equal(
                best.probs[r, a[r] == k], oof[best.picks[r][k]][r, a[r] == k]
            )


def test_shared_inner_fits_exclude_a_failing_candidate_only_where_its_fit_served():
    z, y = _problem(n=100)
    a = fold_assignments(y, 4, 1, 0)
    held_out = frozenset(np.flatnonzero((a[0] == 0) | (a[0] == 1)).tolist())

    class Fails(Frequencies):
        def fit(self, z, y):
            if held_out.isdisjoint(z[:, 0].astype(int).tolist()):
                raise ValueError("no fit without folds 0 and 1")
            return super().fit(z, y)

    makers = {"fails": lambda: Fails(1.0, "fails"), "freq": lambda: Frequencies(0.0)}
    best = nested_best(makers, z, y, brier, assignment=a, inner_folds=None)
    assert best.picks[0][0] == best.picks[0][1] == "freq"  # the failed fit served folds 0, 1
    with pytest.raises(ValueError, match="needs >= 3 outer folds"):
        nested_best(makers, z, y, brier, folds=2, inner_folds=None)


def test_ring_pairs_put_every_fold_beside_its_two_neighbours():
    assert ring_pairs(3) == [(0, 1), (1, 2), (0, 2)]  # three folds: every pair
    for f in (4, 5, 10):
        pairs = ring_pairs(f)
        assert len(set(pairs)) == f
        for k in range(f):  # each fold is left out with exactly its two neighbours
            assert sorted(j for p in pairs if k in p for j in p if j != k) == sorted(
                {(k - 1) % f, (k + 1) % f}
            )
    with pytest.raises(ValueError, match="needs >= 3 folds"):
        ring_pairs(2)


def test_first_places_over_partitions_rank_the_unbiased_errors_signed():
    """Near-calibrated calibrators' unbiased ECE estimates fall below 0, where the reported
    ``sqrt(max(T, 0))`` ties them at 0: the partitions file's first places rank the signed
    estimate (as the report's ranks and robustness do), so no tie is split between them."""
    from calbench.functional import softmax
    from calbench.stats.resampled import winner_share
    from calbench.stats.robustness import VARIANTS
    from calbench.steps import crossfit_compare_rows, select_metrics

    rng = np.random.default_rng(3)  # a draw where most estimates fall below 0
    n, k, r = 400, 3, 3
    p_true = softmax(rng.normal(size=(n, k)))
    y = (p_true.cumsum(1) > rng.random((n, 1))).argmax(1)
    oof = {}
    for i, name in enumerate(("uncalibrated", "a", "b", "c", "d")):
        noise = np.random.default_rng(i).normal(scale=0.02, size=(r, n, k))
        oof[name] = np.stack([softmax(np.log(p_true) + e) for e in noise])
    a = fold_assignments(y, 3, r, 0)
    compared = select_metrics(["ece_ub"])
    rows, parts = crossfit_compare_rows(
        {"dataset": "d", "model": "m"}, y, oof, a, compared, ["uncalibrated"], 0.95,
        n_permutations=20,
    )  # fmt: skip
    names = list(oof)
    signed = np.array([[VARIANTS["ece_ub_w15"][1](oof[m][i], y) for m in names] for i in range(r)])
    clipped = np.maximum(signed, 0.0)
    assert np.all(np.sum(clipped == 0, axis=1) >= 3), "the case needs ties at 0"
    want = winner_share(signed, names)
    got = {p["method"]: p["first_share"] for p in parts if p["metric"] == "ece_ub"}
    for m, share in got.items():
        assert share == pytest.approx(want[m])
        assert share * r == pytest.approx(round(share * r))  # whole partitions: no split tie
