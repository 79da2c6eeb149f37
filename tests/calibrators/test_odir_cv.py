"""Kull et al. 2019's cross-validated, fold-averaged Dir-ODIR / MS-ODIR (``dir_odir_cv``,
``ms_odir_cv``) against a rebuild of their protocol: features (logits, or for Dir-ODIR
``ln clip(p, 2.2e-16, 1)`` of their float32 softmax with the array maximum subtracted),
KFold(5, shuffle, random_state=15) on the validation set, one fit per fold and grid pair with
their unnormalised penalty ``lambda sum_{i != j} W_ij^2 + mu sum b^2``, selection by mean
held-out log-loss (clip 1e-15, renormalise), test prediction = mean of the fold models."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.model_selection import KFold

from calbench.calibrators import Calibrator, MatrixScalingBias, get_calibrator
from calbench.calibrators.odir_cv import kull_grid, kull_log_probs


def data(n=300, k=4, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(0, 1, (n, k)) + rng.uniform(0.5, 4, (n, 1)) * np.eye(k)[y]
    return z.astype(np.float32), y


def log_loss_2019(p, y):
    q = np.clip(p, 1e-15, 1 - 1e-15)
    q = q / q.sum(axis=1, keepdims=True)
    return float(np.mean(-np.log(q[np.arange(len(y)), y])))


def their_log_probs(z):
    z = z.astype(np.float32)
    e = np.exp(z - np.max(z))  # the whole array's maximum
    p = e / e.sum(axis=1, keepdims=True)
    return np.log(np.clip(p, np.float32(2.220446049250313e-16), np.float32(1.0)))


def unnormalised_penalty_fit(x, y, lam, mu):
    """Matrix scaling on features x with lam * sum_{i != j} W_ij^2 + mu * sum b^2: calbench's ODIR
    divides by K (K - 1) and K, so it is given lam K (K - 1) and mu K."""
    k = x.shape[1]
    return MatrixScalingBias(
        odir=(lam * k * (k - 1), mu * k), line_search="strong_wolfe", device="cpu"
    ).fit(x, y, allow_probabilities=True)


def rebuild(features, zv, yv, zt, lambdas, mus):
    xv, xt = features(zv), features(zt)
    folds = list(KFold(n_splits=5, shuffle=True, random_state=15).split(xv))
    scores = []
    for lam in lambdas:
        for mu in mus:
            models = [unnormalised_penalty_fit(xv[tr], yv[tr], lam, mu) for tr, _ in folds]
            loss = np.mean([log_loss_2019(m.predict_proba(xv[te]), yv[te])
                            for m, (_, te) in zip(models, folds, strict=True)])
            scores.append((loss, (lam, mu), models))
    loss, pair, models = min(scores, key=lambda s: s[0])  # min keeps the first of equal losses
    return pair, [s[0] for s in scores], np.mean([m.predict_proba(xt) for m in models], axis=0)


def test_their_dirichlet_features():
    z, _ = data(k=10)
    z[0] = [-400.0] + [0.0] * 9  # a probability that underflows: clipped at 2.2e-16
    np.testing.assert_array_equal(kull_log_probs(z), their_log_probs(z))
    assert kull_log_probs(z).dtype == np.float32
    assert kull_log_probs(z)[0, 0] == np.float32(np.log(np.float32(2.220446049250313e-16)))


@pytest.mark.parametrize(("name", "features"), [("dir_odir_cv", their_log_probs),
                                                ("ms_odir_cv", lambda z: z)])
def test_selection_and_fold_average_equal_the_rebuild(name, features):
    z, y = data()
    zv, yv, zt = z[:200], y[:200], z[200:]
    lambdas, mus = [1e-4, 0.1], [1e-4, 0.1]
    cal = get_calibrator(name, lambdas=lambdas, mus=mus, device="cpu").fit(zv, yv)
    pair, losses, probs = rebuild(features, zv, yv, zt, lambdas, mus)
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


def test_fold_models_minimise_their_unnormalised_objective():
    """Each fold model is a stationary point of mean CE + lambda sum_{i != j} W_ij^2 + mu sum b^2
    (Kull et al.'s Keras regularisers), checked by autograd from that definition."""
    import torch

    z, y = data(n=250, k=5, seed=3)
    lam, mu = 0.05, 0.02
    cal = get_calibrator("ms_odir_cv", lambdas=[lam], mus=[mu], device="cpu", dtype="float64")
    cal.fit(z, y)
    train = next(iter(KFold(n_splits=5, shuffle=True, random_state=15).split(z)))[0]
    x = torch.tensor(z[train], dtype=torch.float64)
    t = torch.tensor(y[train])
    w = torch.tensor(cal.W_[0], dtype=torch.float64, requires_grad=True)
    b = torch.tensor(cal.b_[0], dtype=torch.float64, requires_grad=True)
    off = 1 - torch.eye(5, dtype=torch.float64)
    ce = torch.nn.functional.cross_entropy(x @ w + b, t)
    theirs = ce + lam * ((w * off) ** 2).sum() + mu * (b**2).sum()
    grads = torch.autograd.grad(theirs, [w, b], retain_graph=True)
    assert max(float(g.abs().max()) for g in grads) < 1e-5
    paper = ce + lam / 20 * ((w * off) ** 2).sum() + mu / 5 * (b**2).sum()  # other scale
    grads = torch.autograd.grad(paper, [w, b])
    assert max(float(g.abs().max()) for g in grads) > 1e-3


def test_dir_l2_cv_equals_a_rebuild_with_plain_weight_decay():
    """Dir-L2: mu tied to lambda, penalty lambda (sum W^2 + sum b^2) towards 0; each fold model
    is a stationary point of that objective (autograd from the definition)."""
    import torch

    z, y = data(n=250, k=5, seed=4)
    zv, yv, zt = z[:200], y[:200], z[200:]
    cal = get_calibrator("dir_l2_cv", lambdas=[1e-3, 0.05], device="cpu", dtype="float64")
    cal.fit(zv, yv)
    assert cal.odir_[0] == cal.odir_[1] and len(cal.cv_loss_) == 2
    xv, xt = their_log_probs(zv).astype(np.float64), their_log_probs(zt).astype(np.float64)
    folds = list(KFold(n_splits=5, shuffle=True, random_state=15).split(xv))
    lam = float(cal.odir_[0])
    off_scale = []
    for f, (train, _) in enumerate(folds):
        x = torch.tensor(xv[train])
        w = torch.tensor(cal.W_[f], requires_grad=True)
        b = torch.tensor(cal.b_[f], requires_grad=True)
        ce = torch.nn.functional.cross_entropy(x @ w + b, torch.tensor(yv[train]))
        obj = ce + lam * ((w**2).sum() + (b**2).sum())
        grads = torch.autograd.grad(obj, [w, b], retain_graph=True)
        assert max(float(g.abs().max()) for g in grads) < 1e-5
        towards_identity = ce + lam * (((w - torch.eye(5)) ** 2).sum() + (b**2).sum())
        grads = torch.autograd.grad(towards_identity, [w, b])
        off_scale.append(max(float(g.abs().max()) for g in grads))
    assert min(off_scale) > 1e-4  # the centre matters: not calbench's identity-centred l2
    # prediction = mean over the fold models; the selected lambda has the smallest CV loss
    want = np.mean([softmax_rows(xt @ w + b) for w, b in zip(cal.W_, cal.b_, strict=True)], 0)
    np.testing.assert_allclose(cal.predict_proba(zt), want, rtol=0, atol=1e-12)
    assert cal.cv_loss_[[1e-3, 0.05].index(lam)] == cal.cv_loss_.min()
    with pytest.raises(ValueError, match="no parameter"):
        get_calibrator("dir_l2_cv", mus=[1.0])


def softmax_rows(g):
    e = np.exp(g - g.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
