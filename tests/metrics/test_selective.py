"""AURC and accuracy at coverage (Geifman & El-Yaniv 2017): known answers and brute force."""

import itertools

import numpy as np
import pytest

from calbench.metrics.selective import acc_at_90, accuracy_at_coverage, aurc


def _probs(conf, correct):
    """Two-class rows with top probability ``conf``; label = argmax when ``correct``."""
    conf = np.asarray(conf, dtype=float)
    p = np.stack([conf, 1 - conf], axis=1)
    return p, np.where(np.asarray(correct, bool), 0, 1)


def test_aurc_by_hand():
    p, y = _probs([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0])
    # risks 0/1, 1/2, 1/3, 2/4
    assert aurc(p, y) == pytest.approx((0 + 1 / 2 + 1 / 3 + 2 / 4) / 4, abs=1e-15)
    assert accuracy_at_coverage(p, y, 0.5) == pytest.approx(0.5, abs=1e-15)
    assert accuracy_at_coverage(p, y, 0.75) == pytest.approx(2 / 3, abs=1e-15)


def test_perfect_ranking_and_all_wrong():
    p, y = _probs([0.9, 0.8, 0.7, 0.6], [1, 1, 0, 0])
    assert aurc(p, y) == pytest.approx((0 + 0 + 1 / 3 + 2 / 4) / 4, abs=1e-15)
    p, y = _probs([0.9, 0.8, 0.7], [0, 0, 0])
    assert aurc(p, y) == 1.0


def test_ties_equal_the_average_over_all_orders():
    conf = [0.9, 0.7, 0.7, 0.7, 0.6, 0.6]
    correct = [1, 0, 1, 1, 0, 1]
    p, y = _probs(conf, correct)
    vals, accs = [], []
    tied = [[1, 2, 3], [4, 5]]
    for a in itertools.permutations(tied[0]):
        for b in itertools.permutations(tied[1]):
            order = [0, *a, *b]
            err = 1 - np.array(correct)[order]
            risks = np.cumsum(err) / np.arange(1, 7)
            vals.append(risks.mean())
            accs.append(1 - np.cumsum(err)[3] / 4)  # ceil(0.6 * 6) = 4 kept
    assert aurc(p, y) == pytest.approx(np.mean(vals), abs=1e-15)
    assert accuracy_at_coverage(p, y, 0.6) == pytest.approx(np.mean(accs), abs=1e-15)


def test_acc_at_90_keeps_ceil_of_90_percent():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.5, 1, 101)
    correct = rng.random(101) < conf
    p, y = _probs(conf, correct)
    keep = np.argsort(-conf)[:91]  # ceil(90.9)
    assert acc_at_90(p, y) == pytest.approx(correct[keep].mean(), abs=1e-15)


def test_bad_coverage():
    p, y = _probs([0.9, 0.8], [1, 0])
    with pytest.raises(ValueError, match="coverage must be"):
        accuracy_at_coverage(p, y, 1.5)
