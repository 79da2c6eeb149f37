"""calbench.stats.selection: the "best" calibrator by K-fold cross-fitting inside the validation half.
An instrumented calibrator records every row it is fitted on and scores: no row is scored by a
calibrator fitted on it, and no test-half row is ever seen."""

from __future__ import annotations

import csv
import itertools
import json

import numpy as np
import pytest

from calbench.functional import softmax
from calbench.metrics import METRICS
from calbench.stats.selection import (
    CrossFit,
    candidate_result,
    check_folds,
    crossfit_scores,
    fold_ids,
    out_of_fold,
)


class Spy:
    """A calibrator that records the row ids (column 0 of the logits) it fits and predicts,
    per instance (numbered as created); it predicts softmax of the remaining columns."""

    log: list[tuple[int, str, frozenset]] = []
    made = itertools.count()

    def __init__(self):
        self.tag = next(Spy.made)

    def fit(self, z, y):
        Spy.log.append((self.tag, "fit", frozenset(z[:, 0].astype(int).tolist())))
        return self

    def predict_proba(self, z):
        Spy.log.append((self.tag, "predict", frozenset(z[:, 0].astype(int).tolist())))
        return softmax(z[:, 1:])


def _data(n=60, k=3, seed=0):
    rng = np.random.default_rng(seed)
    z = np.column_stack([np.arange(n), rng.normal(size=(n, k)) * 2])
    y = rng.integers(0, k, size=n)
    return z, y


def test_folds_are_seeded_balanced_and_cover_every_sample():
    f = fold_ids(23, 5, seed=7)
    assert sorted(np.bincount(f).tolist()) == [4, 4, 5, 5, 5]
    np.testing.assert_array_equal(f, fold_ids(23, 5, seed=7))
    assert not np.array_equal(f, fold_ids(23, 5, seed=8))
    # the permutation's position i goes to fold i mod k
    perm = np.random.default_rng(7).permutation(23)
    np.testing.assert_array_equal(f[perm], np.arange(23) % 5)


def test_no_row_is_scored_by_a_calibrator_fitted_on_it():
    z, y = _data()
    Spy.log = []
    folds = fold_ids(len(y), 4, seed=0)
    probs = out_of_fold(Spy, z, y, folds)
    fits = {i: rows for i, what, rows in Spy.log if what == "fit"}
    preds = [(i, rows) for i, what, rows in Spy.log if what == "predict"]
    assert len(fits) == 4 and len(preds) == 4
    for inst, rows in preds:
        assert not rows & fits[inst]  # scored only on rows it was not fitted on
        assert rows | fits[inst] == frozenset(range(len(y)))
    assert frozenset().union(*(r for _, r in preds)) == frozenset(range(len(y)))
    np.testing.assert_allclose(probs, softmax(z[:, 1:]))  # every row predicted once, in place


def test_scores_are_fold_means_and_the_best_has_the_lowest_mean():
    z, y = _data(n=90, seed=1)

    class Scaled(Spy):
        def __init__(self, t):
            super().__init__()
            self.t = t

        def predict_proba(self, zz):
            return softmax(zz[:, 1:] / self.t)

    makers = {"t1": lambda: Scaled(1.0), "t3": lambda: Scaled(3.0), "t9": lambda: Scaled(9.0)}
    fit = crossfit_scores(makers, z, y, {"nll": METRICS["nll"]}, k=3, seed=2)
    folds = fold_ids(90, 3, seed=2)
    for name, t in (("t1", 1.0), ("t3", 3.0), ("t9", 9.0)):
        p = softmax(z[:, 1:] / t)
        want = np.mean([METRICS["nll"](p[folds == f], y[folds == f]) for f in range(3)])
        assert fit.scores["nll"][name] == pytest.approx(want, rel=1e-12)
    assert fit.best("nll") == min(fit.scores["nll"], key=fit.scores["nll"].get)
    assert fit.candidates == ["t1", "t3", "t9"]


def test_excluded_and_failing_calibrators_are_not_candidates_and_say_why():
    z, y = _data()

    class Fails(Spy):
        def fit(self, zz, yy):
            raise ValueError("needs two classes")

    makers = {"a": Spy, "cv": Spy, "bad": Fails}
    fit = crossfit_scores(makers, z, y, {"nll": METRICS["nll"]}, k=3, exclude=["cv"])
    assert fit.candidates == ["a"]
    assert fit.excluded == {
        "cv": "excluded by compare.select_exclude (cost)",
        "bad": "its fit failed on a fold (needs two classes)",
    }
    empty = CrossFit(k=3, seed=0, scores={"nll": {}})
    with pytest.raises(ValueError, match="no calibrator is a candidate"):
        empty.best("nll")


def test_known_results_are_taken_as_found_and_their_calibrators_never_fitted():
    """What a run found (candidate_result) given back as ``known``: the same scores and reasons,
    without a single fit of those candidates; a new candidate is fitted as usual."""
    z, y = _data()

    class Fails(Spy):
        def fit(self, zz, yy):
            raise ValueError("needs two classes")

    class Never(Spy):
        def fit(self, zz, yy):
            pytest.fail("a known candidate was refitted")  # BaseException: never a failed fold

    metrics = {"nll": METRICS["nll"], "brier": METRICS["brier"]}
    first = crossfit_scores({"a": Spy, "bad": Fails, "cv": Spy}, z, y, metrics, k=3, exclude=["cv"])
    known = {m: candidate_result(first, m) for m in ("a", "bad", "cv")}
    assert known["a"] == {"nll": first.scores["nll"]["a"], "brier": first.scores["brier"]["a"]}
    assert known["bad"] == "its fit failed on a fold (needs two classes)"
    assert known["cv"] is None  # the caller's exclusion is not a finding about the calibrator
    known = json.loads(json.dumps(known))  # kept as JSON between runs: floats round-trip exactly
    again = crossfit_scores(
        {"a": Never, "bad": Never, "cv": Spy, "new": Spy}, z, y, metrics, k=3, known=known
    )
    assert again.scores["nll"]["a"] == first.scores["nll"]["a"]
    assert again.excluded == {"bad": known["bad"]}
    assert again.candidates == ["a", "cv", "new"]
    fresh = crossfit_scores({"new": Spy}, z, y, metrics, k=3)
    assert again.scores["brier"]["new"] == fresh.scores["brier"]["new"]
    # scores for another set of metrics are not taken: the candidate is fitted again
    with pytest.raises(pytest.fail.Exception, match="refitted"):
        crossfit_scores({"a": Never}, z, y, {"nll": METRICS["nll"]}, k=3, known=known)


def test_best_follows_the_metric_direction_and_ranks_non_finite_last():
    fit = CrossFit(
        k=2, seed=0, scores={"accuracy": {"a": 0.8, "b": 0.9}, "nll": {"a": np.inf, "b": 0.5}}
    )
    assert fit.best("accuracy", higher_is_better=True) == "b"
    assert fit.best("nll") == "b"


@pytest.mark.parametrize("k", [1, 0, 21, 2.5, True])
def test_bad_folds(k):
    with pytest.raises(ValueError, match="select_folds must be an integer"):
        check_folds(k)


def test_too_few_samples_for_the_folds():
    with pytest.raises(ValueError, match="needs >= 10 validation samples, got 9"):
        fold_ids(9, 5)


def test_calibrate_cross_fits_inside_the_validation_half_only(tmp_path, monkeypatch):
    """The workflow's step: every fold fit sees validation rows only, every fold prediction is
    on held-out validation rows, no test row reaches the selection."""
    from calbench.calibrators import REGISTRY
    from calbench.protocol import CalibrateSpec
    from calbench.split import save_split, study_split

    n, k = 200, 3
    rng = np.random.default_rng(5)
    z = (rng.normal(size=(n, k)) * 3).astype(np.float32)
    y = np.array([rng.choice(k, p=row) for row in softmax(z / 2.0)], dtype=np.int64)
    np.savez(tmp_path / "l.npz", logits=z, labels=y, order_hash="h", model="m", dataset="d")
    val, test = study_split(n)
    save_split(tmp_path / "s.npz", val, test)
    ids = {z[i].tobytes(): i for i in range(n)}
    log = []
    counter = itertools.count()
    tag = lambda obj: obj.__dict__.setdefault("_spy_tag", next(counter))  # noqa: E731
    for method in ("uncalibrated", "ts"):
        cls = REGISTRY[method]
        real_fit, real_pred = cls._fit, cls._predict_proba

        def _fit(self, zz, yy, _f=real_fit):
            log.append(
                (tag(self), "fit", frozenset(ids[r.astype(np.float32).tobytes()] for r in zz))
            )
            return _f(self, zz, yy)

        def _pred(self, zz, _f=real_pred):
            rows = frozenset(ids[r.astype(np.float32).tobytes()] for r in zz)
            log.append((tag(self), "predict", rows))
            return _f(self, zz)

        monkeypatch.setattr(cls, "_fit", _fit)
        monkeypatch.setattr(cls, "_predict_proba", _pred)
    spec = {
        "calibrators": {
            "uncalibrated": {"method": "uncalibrated", "params": {}, "display": "U"},
            "ts": {"method": "ts", "params": {}, "display": "TS"},
        },
        "evaluation": {"metrics": ["nll", "ece_ub"], "halves": ["test"], "n_bootstrap": 0,
                       "level": 0.95, "seed": 0, "ci_halves": None, "ci_metrics": None},
        "compare": {"metrics": ["nll", "ece_ub"], "baselines": ["uncalibrated"],
                    "n_bootstrap": 10, "select_folds": 4, "select_exclude": []},
        "plots": {"n_bins": 10, "style": "guo"},
    }  # fmt: skip
    CalibrateSpec.from_dict(json.loads(json.dumps(spec))).run(
              tmp_path / "l.npz", tmp_path / "s.npz", calibrators_dir=tmp_path / "c", metrics_dir=tmp_path / "x", plots_dir=tmp_path / "p",
              compare_out=tmp_path / "cmp.csv")  # fmt: skip
    val_rows, test_rows = frozenset(val.tolist()), frozenset(test.tolist())
    fits = {i: rows for i, what, rows in log if what == "fit"}
    fold_fits = {i: rows for i, rows in fits.items() if rows != val_rows}
    assert len(fold_fits) == 2 * 4  # two calibrators, four folds each
    for inst, rows in fold_fits.items():
        assert rows < val_rows and not rows & test_rows
        scored = [r for i, what, r in log if i == inst and what == "predict"]
        assert len(scored) == 1 and scored[0] < val_rows and not scored[0] & rows
        assert scored[0] | rows == val_rows
    with open(tmp_path / "cmp.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    best = [r for r in rows if r["family"] == "best"]
    assert {r["selected_on"] for r in best} == {"val:4-fold cross-fit"}
    assert {r["direction"] for r in rows} <= {"better", "worse", "equal"}
