"""Kull et al. 2019's cross-validated, fold-averaged Dir-ODIR / MS-ODIR (``dir_odir_cv``,
``ms_odir_cv``) against a rebuild of their protocol: KFold(5, shuffle, random_state=15) on the
validation set, one fit per fold and grid pair, selection by mean held-out log-loss (clip
1e-15, renormalise), test prediction = mean of the selected pair's fold models."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.model_selection import KFold

from calbench.calibrators import Calibrator, DirichletCalibration, MatrixScalingBias, get_calibrator
from calbench.calibrators.odir_cv import kull_grid


def data(n=300, k=4, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(0, 1, (n, k)) + rng.uniform(0.5, 4, (n, 1)) * np.eye(k)[y]
    return z.astype(np.float32), y


def log_loss_2019(p, y):
    q = np.clip(p, 1e-15, 1 - 1e-15)
    q = q / q.sum(axis=1, keepdims=True)
    return float(np.mean(-np.log(q[np.arange(len(y)), y])))


def rebuild(base, zv, yv, zt, lambdas, mus):
    folds = list(KFold(n_splits=5, shuffle=True, random_state=15).split(zv))
    scores = []
    for lam in lambdas:
        for mu in mus:
            models = [base(odir=(lam, mu), line_search="strong_wolfe", device="cpu").fit(zv[tr], yv[tr])
                      for tr, _ in folds]
            loss = np.mean([log_loss_2019(m.predict_proba(zv[te]), yv[te])
                            for m, (_, te) in zip(models, folds, strict=True)])
            scores.append((loss, (lam, mu), models))
    loss, pair, models = min(scores, key=lambda s: s[0])  # min keeps the first of equal losses
    return pair, [s[0] for s in scores], np.mean([m.predict_proba(zt) for m in models], axis=0)


@pytest.mark.parametrize(("name", "base"), [("dir_odir_cv", DirichletCalibration),
                                            ("ms_odir_cv", MatrixScalingBias)])
def test_selection_and_fold_average_equal_the_rebuild(name, base):
    z, y = data()
    zv, yv, zt = z[:200], y[:200], z[200:]
    lambdas, mus = [1e-4, 10.0], [1e-4, 10.0]
    cal = get_calibrator(name, lambdas=lambdas, mus=mus, device="cpu").fit(zv, yv)
    pair, losses, probs = rebuild(base, zv, yv, zt, lambdas, mus)
    assert tuple(cal.odir_) == pair
    np.testing.assert_allclose(cal.cv_loss_, losses, rtol=1e-12)
    np.testing.assert_allclose(cal.predict_proba(zt), probs, rtol=0, atol=1e-12)
    assert len(cal.W_) == 5  # five fold models, no refit on the whole validation set
    back = Calibrator.from_dict(cal.to_dict())
    np.testing.assert_array_equal(back.predict_proba(zt), cal.predict_proba(zt))


def test_kull_grid():
    lam10, mu10 = kull_grid(10)
    assert len(lam10) == 36 and len(mu10) == 12 and min(lam10) == 2.5e-6 and max(mu10) == 1e6
    lam100, mu100 = kull_grid(100)
    assert len(lam100) == 27 and min(mu100) == 1e-2
    cal = get_calibrator("ms_odir_cv")
    assert cal.grid(10) == [(a, b) for a in lam10 for b in mu10]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"lambdas": []}, "lambdas must be"), ({"mus": [-1.0]}, "mus must be"),
     ({"n_folds": 1}, "n_folds"), ({"random_state": -1}, "random_state"),
     ({"precision": "half"}, "precision")],
)
def test_bad_params(kwargs, match):
    with pytest.raises(ValueError, match=match):
        get_calibrator("dir_odir_cv", **kwargs)
