"""calbench.stats.ranks: rank_comparison (the report's average ranks, Friedman test and critical
difference in one result) and spearman, against their parts and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calbench.stats import (
    friedman_test,
    nemenyi_cd,
    rank_comparison,
    rank_rows,
    ranks_nan_last,
    spearman,
)


def test_rank_comparison_is_its_parts():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 4)) + np.array([0.0, 0.4, 0.8, 2.0])
    x[3, 1] = np.nan  # an incomplete model is left out
    comp = rank_comparison(x)
    xc = np.delete(x, 3, axis=0)
    assert comp.n == 29
    assert comp.average_ranks == tuple(rank_rows(xc).mean(axis=0).tolist())
    assert comp.friedman == friedman_test(xc) and comp.cd == nemenyi_cd(4, 29)
    assert comp.rejects == (comp.friedman.p_f < 0.05) and comp.rejects
    best = min(comp.average_ranks)
    assert comp.worse_than_best == tuple(
        j for j, r in enumerate(comp.average_ranks) if r - best > comp.cd
    )
    assert 3 in comp.worse_than_best and 0 not in comp.worse_than_best
    # higher is better reverses the ranks
    assert rank_comparison(-xc, higher_is_better=True).average_ranks == comp.average_ranks


def test_rank_comparison_of_one_row_and_of_many_models():
    one = rank_comparison([[0.1, 0.2, 0.3]])
    assert one.n == 1 and one.friedman is None and one.cd is None and not one.rejects
    assert one.worse_than_best == ()
    many = rank_comparison(np.random.default_rng(1).normal(size=(800, 3)))
    assert many.n == 800 and many.cd == nemenyi_cd(3, 800)


def test_rank_comparison_bad_input():
    with pytest.raises(ValueError, match=r">= 1 complete row and >= 2 methods, got 0 x 2"):
        rank_comparison([[np.nan, 1.0]])
    with pytest.raises(ValueError, match="2-D array"):
        rank_comparison([1.0, 2.0])


def test_ranks_nan_last():
    assert ranks_nan_last([0.3, 0.1, 0.2]).tolist() == [3.0, 1.0, 2.0]
    assert ranks_nan_last([0.1, 0.1, 0.2]).tolist() == [1.5, 1.5, 3.0]
    assert ranks_nan_last([float("nan"), 0.1]).tolist() == [2.0, 1.0]


def test_spearman_is_scipys_to_the_bit():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(2)
    for _ in range(200):
        n = int(rng.integers(3, 9))
        x = np.arange(n, dtype=float)
        y = np.round(rng.normal(size=n), int(rng.integers(0, 3)))  # ties
        if np.allclose(y, y[0]):
            continue
        assert spearman(x, y) == float(stats.spearmanr(x, y).statistic)
    assert math.isnan(spearman([1.0, 2.0], [2.0, 1.0]))
    assert math.isnan(spearman([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]))
    with pytest.raises(ValueError, match="1-D of one length"):
        spearman([1.0, 2.0, 3.0], [1.0, 2.0])
