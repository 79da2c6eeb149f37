"""Tests of calbench.plots.ranks: the critical-difference diagram and its SVG bytes."""

from __future__ import annotations

import pytest

matplotlib = pytest.importorskip("matplotlib")

from calbench import plots  # noqa: E402


def test_critical_difference_diagram_groups_and_svg():
    ranks = {"A": 1.9, "B": 2.1, "C": 2.4, "D": 3.0, "E": 3.6}
    fig = plots.critical_difference_diagram(ranks, 1.2, "ECE", n_models=14)
    (ax,) = fig.axes
    texts = {t.get_text() for t in ax.texts}
    assert {"A (1.90)", "E (3.60)", "CD = 1.20"} <= texts
    assert ax.get_title() == "ECE (average ranks over 14 models)"
    # thick lines join the maximal groups within CD: A..D (3.0 - 1.9 < 1.2) and D..E
    thick = sorted(
        (round(line.get_xdata()[0] + 0.03, 2), round(line.get_xdata()[1] - 0.03, 2))
        for line in ax.lines
        if line.get_linewidth() == 3
    )
    assert thick == [(1.9, 3.0), (3.0, 3.6)]
    svg = plots.figure_svg(fig)
    again = plots.figure_svg(plots.critical_difference_diagram(ranks, 1.2, "ECE", n_models=14))
    assert svg.startswith(b"<?xml") and svg == again  # deterministic bytes
    with pytest.raises(ValueError, match="cd"):
        plots.critical_difference_diagram(ranks, 0.0)
    with pytest.raises(ValueError, match="finite"):
        plots.critical_difference_diagram({"A": float("nan")}, 1.0)
