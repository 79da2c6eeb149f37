"""Monotonic-sweep calibration error (Roelofs et al. 2020; Karandikar et al. 2021 "mean-sweep CE")."""

from __future__ import annotations

import numpy as np
import pytest

from calbench.metrics.sweep import ece_sweep, ece_sweep_from_values, sweep_n_bins


def _probs_from_top(conf, pred, k=2):
    """(N, k) probabilities whose top class is ``pred`` with confidence ``conf``."""
    conf = np.asarray(conf, dtype=np.float64)
    p = np.tile(((1 - conf) / (k - 1))[:, None], (1, k))
    p[np.arange(len(conf)), pred] = conf
    return p


def _brute_force(conf, correct, p):
    """Independent reading of the definition: np.array_split of the sorted samples."""
    order = np.argsort(conf, kind="stable")
    c, t = conf[order], correct[order]
    best = 1
    for b in range(1, len(c) + 1):
        accs = [g.mean() for g in np.array_split(t, b)]
        if any(a2 < a1 for a1, a2 in zip(accs, accs[1:], strict=False)):
            break
        best = b
    gaps = [
        (len(gt) / len(c), abs(gt.mean() - gc.mean()))
        for gc, gt in zip(np.array_split(c, best), np.array_split(t, best), strict=False)
    ]
    if p == 1:
        return best, sum(w * g for w, g in gaps)
    return best, np.sqrt(sum(w * g * g for w, g in gaps))


def test_hand_computed_violation_at_three_bins():
    # sorted conf .1 .2 .3 .4, correct 0 1 0 1: b=2 -> accs (.5, .5) monotone; b=3 -> (.5, 0, 1)
    conf = np.array([0.3, 0.1, 0.4, 0.2])
    correct = np.array([0.0, 0.0, 1.0, 1.0])
    assert sweep_n_bins(conf, correct) == 2
    # bins {.1,.2} acc .5 conf .15 and {.3,.4} acc .5 conf .35
    assert ece_sweep_from_values(conf, correct, "l1") == pytest.approx(0.5 * 0.35 + 0.5 * 0.15)
    assert ece_sweep_from_values(conf, correct) == pytest.approx(np.sqrt(0.0725))


def test_hand_computed_monotone_to_n():
    conf = np.array([0.1, 0.2, 0.3, 0.4])
    correct = np.array([0.0, 0.0, 1.0, 1.0])
    assert sweep_n_bins(conf, correct) == 4
    assert ece_sweep_from_values(conf, correct, "l1") == pytest.approx((0.1 + 0.2 + 0.7 + 0.6) / 4)


def test_single_bin_when_two_bins_break():
    # sorted correct 1 0: two bins give accs (1, 0)
    conf = np.array([0.6, 0.9])
    correct = np.array([1.0, 0.0])
    assert sweep_n_bins(conf, correct) == 1
    assert ece_sweep_from_values(conf, correct) == pytest.approx(abs(0.5 - 0.75))


def test_probabilities_api_uses_top_label():
    conf = np.array([0.8, 0.6, 0.9, 0.7])
    pred = np.array([0, 1, 0, 1])
    labels = np.array([1, 1, 1, 1])  # correct: 0 1 0 1 -> sorted by conf .6 .7 .8 .9: 1 1 0 0
    p = _probs_from_top(conf, pred)
    # b=2: accs (1, 0) -> b* = 1: acc .5, conf .75
    assert ece_sweep(p, labels) == pytest.approx(0.25)
    assert ece_sweep(p, labels, norm="l1") == pytest.approx(0.25)


@pytest.mark.parametrize("seed", range(6))
def test_agrees_with_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    conf = rng.uniform(0.1, 1.0, n)
    correct = (rng.uniform(size=n) < conf ** (0.5 + seed / 4)).astype(np.float64)
    for p, norm in ((1, "l1"), (2, "l2")):
        b, want = _brute_force(conf, correct, p)
        assert sweep_n_bins(conf, correct) == b
        assert ece_sweep_from_values(conf, correct, norm) == pytest.approx(want, abs=1e-12)


def test_perfectly_calibrated_large_sample_is_small():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.5, 1.0, 20000)
    correct = (rng.uniform(size=conf.size) < conf).astype(np.float64)
    assert ece_sweep_from_values(conf, correct) < 0.02
    over = np.clip(conf + 0.2, 0, 1)  # over-confident by ~0.2
    assert ece_sweep_from_values(over, correct) > 0.15


def test_bad_input_is_one_value_error():
    p = np.array([[0.6, 0.4], [0.3, 0.7]])
    with pytest.raises(ValueError, match="norm"):
        ece_sweep(p, np.array([0, 1]), norm="l3")
    with pytest.raises(ValueError):
        ece_sweep(p, np.array([0, 2]))
