"""Tests of calbench.plots.ranks: the critical-difference diagram (Demšar 2006, fig. 1), its
groups, its sides and its SVG bytes. The layout for 2 to 20 methods: test_ranks_layout.py."""

from __future__ import annotations

import pytest

matplotlib = pytest.importorskip("matplotlib")

from calbench import plots  # noqa: E402
from calbench.plots import ranks as R  # noqa: E402


def _rank_of_x(ax):
    """Map a data x back to a rank from the tick labels "1" and "2"."""
    ticks = {t.get_text(): t.get_position()[0] for t in ax.texts if t.get_text().isdigit()}
    x1, unit = ticks["1"], ticks["2"] - ticks["1"]
    return lambda x: 1 + (x - x1) / unit


def test_cliques_known_answers():
    # maximal runs within cd, subsets dropped: A..D (3.0 - 1.9 < 1.2), then D..E
    assert R.cliques([1.9, 2.1, 2.4, 3.0, 3.6], 1.2) == [(0, 3), (3, 4)]
    # a difference equal to cd is significant (Demšar: "differ by at least the CD")
    assert R.cliques([1.0, 2.0, 3.0], 1.0) == []
    assert R.cliques([1.0, 2.0, 3.0], 1.01) == [(0, 1), (1, 2)]
    assert R.cliques([1.0, 2.0, 3.0], 2.5) == [(0, 2)]
    assert R.cliques([1.5], 1.0) == []


def test_critical_difference_diagram_groups_sides_and_svg():
    ranks = {"A": 1.9, "B": 2.1, "C": 2.4, "D": 3.0, "E": 3.6}
    fig = plots.critical_difference_diagram(ranks, 1.2, "ECE", n_models=14)
    (ax,) = fig.axes
    texts = {t.get_text(): t for t in ax.texts}
    assert {"A", "E", "CD = 1.20", "ECE (average ranks over 14 models)"} <= set(texts)
    assert {str(t) for t in range(1, 6)} <= set(texts)  # axis 1..k
    rank = _rank_of_x(ax)
    # best half (A, B, C) named on the left of the axis, worst half (D, E) on the right
    for name in "ABC":
        assert texts[name].get_ha() == "right" and rank(texts[name].get_position()[0]) < 1
    for name in "DE":
        assert texts[name].get_ha() == "left" and rank(texts[name].get_position()[0]) > 5
    # rows: the best at the top on the left, the worst at the top on the right (y grows down)
    y = {n: texts[n].get_position()[1] for n in "ABCDE"}
    assert y["A"] < y["B"] < y["C"] and y["E"] < y["D"] and y["A"] == y["E"]
    # leader lines end at the method's rank on the axis
    leaders = [ln for ln in ax.lines if len(ln.get_xdata()) == 3]
    assert sorted(round(rank(ln.get_xdata()[0]), 6) for ln in leaders) == [1.9, 2.1, 2.4, 3.0, 3.6]
    # thick bars join the maximal groups within CD: A..D and D..E (bars overhang by 0.04 in)
    thick = [ln for ln in ax.lines if ln.get_linewidth() == 3]
    unit = texts["2"].get_position()[0] - texts["1"].get_position()[0]
    spans = sorted(
        (round(rank(ln.get_xdata()[0] + 0.04), 6), round(rank(ln.get_xdata()[1] - 0.04), 6))
        for ln in thick
    )
    assert spans == [(1.9, 3.0), (3.0, 3.6)] and unit > 0.25
    # the CD bar is cd long, from rank 1
    cd_bar = [
        ln
        for ln in ax.lines
        if ln.get_linewidth() == 1.5 and ln.get_ydata()[0] == ln.get_ydata()[1]
    ]
    (bar,) = cd_bar
    assert [round(rank(v), 6) for v in bar.get_xdata()] == [1.0, 2.2]
    svg = plots.figure_svg(fig)
    again = plots.figure_svg(plots.critical_difference_diagram(ranks, 1.2, "ECE", n_models=14))
    assert svg.startswith(b"<?xml") and svg == again  # deterministic bytes


def test_axis_grows_to_hold_a_long_critical_difference():
    fig = plots.critical_difference_diagram({"A": 1.2, "B": 1.8}, 2.5)
    (ax,) = fig.axes
    digits = sorted(int(t.get_text()) for t in ax.texts if t.get_text().isdigit())
    assert digits == [1, 2, 3, 4]  # 1 + 2.5 -> the axis reaches 4
    assert not any("average ranks" in t.get_text() for t in ax.texts)  # no title asked for


def test_names_are_text_not_mathtext():
    fig = plots.critical_difference_diagram({"$x$ cal": 1.0, "b_2^3": 2.0}, 1.0)
    (ax,) = fig.axes
    names = {t.get_text() for t in ax.texts}
    assert {"$x$ cal", "b_2^3"} <= names
    plots.figure_svg(fig)  # draws without a mathtext parse error


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"average_ranks": {"A": 1.0, "B": 2.0}, "cd": 0.0}, "cd must be a positive"),
        ({"average_ranks": {"A": 1.0, "B": 2.0}, "cd": True}, "cd must be a positive"),
        ({"average_ranks": {"A": float("nan")}, "cd": 1.0}, "finite"),
        ({"average_ranks": {}, "cd": 1.0}, "non-empty"),
        ({"average_ranks": {"A": 1.0}, "cd": 1.0, "n_models": 0}, "n_models"),
    ],
)
def test_bad_input_is_one_line_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match) as exc:
        plots.critical_difference_diagram(**kwargs)
    assert "\n" not in str(exc.value)


def test_no_clique_bars_when_the_omnibus_test_does_not_reject():
    """``bars=False`` (the Friedman / Iman-Davenport test did not reject): no Nemenyi groups."""
    ranks = {"a": 1.2, "b": 1.5, "c": 2.9, "d": 3.1}

    def thick(fig):
        return [ln for ln in fig.axes[0].lines if ln.get_linewidth() == 3]

    assert len(thick(plots.critical_difference_diagram(ranks, 1.0))) >= 1
    assert thick(plots.critical_difference_diagram(ranks, 1.0, bars=False)) == []
