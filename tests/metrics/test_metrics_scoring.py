"""Known-answer tests for accuracy, NLL (study and modern rules) and the Brier score."""

import numpy as np
import pytest

from calbench.metrics import accuracy, brier, nll


def random_probs(n, k, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, k)) * 4
    p = np.exp(z - z.max(axis=1, keepdims=True)).astype(dtype)
    return p / p.sum(axis=1, keepdims=True), rng.integers(0, k, n)


def test_accuracy_hand_computed():
    probs = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4], [0.1, 0.9]])
    assert accuracy(probs, np.array([0, 1, 1, 0])) == 0.5
    # ties take the first maximal class
    assert accuracy(np.array([[0.5, 0.5]]), np.array([0])) == 1.0


def test_nll_study_rule_with_exact_zeros():
    # row 1: true class has probability 0 -> clipped to 1e-15, row sum 1 + 1e-15 after clipping
    #        (1 - 1e-15 + 1e-15 + 1e-15): loss = -log(1e-15 / (1 + 1e-15)) = 15 ln 10 + log(1 + 1e-15)
    # row 2: [.5 .5 0] -> [.5 .5 1e-15], loss = -log(.5 / (1 + 1e-15)) = ln 2 + log(1 + 1e-15)
    probs = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    labels = np.array([1, 0])
    expected = (15 * np.log(10) + np.log(2)) / 2 + np.log1p(1e-15)
    assert nll(probs, labels) == pytest.approx(expected, rel=1e-14)
    assert nll(probs, labels, rule="study") == nll(probs, labels)


def test_nll_modern_rule_caps_by_dtype_eps():
    probs = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    labels = np.array([1, 0])
    eps64 = np.finfo(np.float64).eps
    assert nll(probs, labels, rule="modern") == pytest.approx(
        (-np.log(eps64) + np.log(2)) / 2, rel=1e-14
    )
    eps32 = float(np.finfo(np.float32).eps)  # 1.19e-7 -> cap of ~15.94 nats
    assert nll(probs.astype(np.float32), labels, rule="modern") == pytest.approx(
        (-np.log(eps32) + np.log(2)) / 2, rel=1e-14
    )


def test_nll_perfect_prediction_is_tiny():
    probs = np.eye(3)
    labels = np.arange(3)
    # study: 1 - 1e-15 renormalised by 1 + 1e-15 -> about 3e-15 nats
    assert 0 < nll(probs, labels) < 1e-14


def test_nll_modern_matches_installed_sklearn():
    from sklearn.metrics import log_loss

    for dtype, rtol in ((np.float64, 1e-12), (np.float32, 1e-6)):
        probs, labels = random_probs(2000, 7, 0, dtype)
        probs[:10, :] = np.eye(7, dtype=dtype)[(labels[:10] + 1) % 7]  # confident mistakes
        ref = log_loss(labels, probs, labels=np.arange(7))
        assert nll(probs, labels, rule="modern") == pytest.approx(ref, rel=rtol)


def test_nll_study_matches_explicit_clip_renormalise():
    rng = np.random.default_rng(4)
    probs = rng.dirichlet(np.full(10, 0.05), 1000)
    probs[probs < 1e-9] = 0.0
    probs /= probs.sum(axis=1, keepdims=True)
    probs[:3] = np.eye(10)[:3]  # entries of exactly 1 are clipped from above
    labels = rng.integers(0, 10, 1000)
    q = np.clip(probs, 1e-15, 1 - 1e-15)
    q /= q.sum(axis=1, keepdims=True)
    expected = -np.mean(np.log(q[np.arange(1000), labels]))
    assert nll(probs, labels) == pytest.approx(expected, rel=1e-13)


def test_brier_hand_computed():
    probs = np.array([[0.7, 0.2, 0.1], [0.7, 0.2, 0.1]])
    # label 0: .3^2 + .2^2 + .1^2 = .14 ; label 2: .7^2 + .2^2 + .9^2 = 1.34
    assert brier(probs, np.array([0, 2])) == pytest.approx((0.14 + 1.34) / 2, abs=1e-15)
    # the maximum, 2, for a confident mistake; 0 for a confident hit
    assert brier(np.array([[1.0, 0.0, 0.0]]), np.array([1])) == 2.0
    assert brier(np.array([[1.0, 0.0, 0.0]]), np.array([0])) == 0.0


def test_brier_matches_one_hot_definition():
    probs, labels = random_probs(3000, 9, 2)
    onehot = np.eye(9)[labels]
    expected = np.mean(np.sum((probs - onehot) ** 2, axis=1))
    assert brier(probs, labels) == pytest.approx(expected, abs=1e-13)


def test_nll_bad_rule():
    with pytest.raises(ValueError, match="rule"):
        nll(np.eye(2), np.arange(2), rule="sklearn")
