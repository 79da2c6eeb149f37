"""Tests of calbench.plots.grid: one panel per calibrator, ECE in each title."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.figure import Figure  # noqa: E402

from calbench import plots  # noqa: E402
from calbench.functional import softmax  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from plot_checks import (  # noqa: E402
    HAND_LABELS,
    HAND_PROBS,
    _container,
    _heights,
    _nonempty,
    _random_problem,
    _texts,
)

metrics = pytest.importorskip("calbench.metrics")


# --------------------------------------------------------------------------------------------
# reliability_grid
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("style,per_panel", [("guo", 2), ("coursework", 1)])
def test_reliability_grid(style, per_panel):
    logits, probs, labels = _random_problem(seed=2)
    by_method = {f"T={t}": softmax(logits / t) for t in (0.5, 1.0, 1.5, 2.0, 3.0)}
    fig = plots.reliability_grid(by_method, labels, n_bins=10, style=style)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == per_panel * len(by_method)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == len(by_method)
    acc_label = "Outputs" if style == "guo" else "Accuracy"
    for ax, (name, p) in zip(panels, by_method.items(), strict=True):
        assert (
            ax.get_title()
            == f"{name}: {plots.format_ece(metrics.ece(p, labels, n_bins=10))} (10 bins)"
        )
        _, _, acc, _ = _nonempty(metrics.reliability_bins(p, labels, n_bins=10))
        np.testing.assert_allclose(_heights(_container(ax, acc_label)), acc, atol=1e-12)
        assert _texts(ax) == []  # ECE in the title, not repeated in the corner or legend
        legend = ax.get_legend()
        assert legend is None or legend.get_title().get_text() == ""
    # 5 panels in 4 columns -> two rows of panels
    fig.draw_without_rendering()
    rows = {round(ax.get_position().y0, 3) for ax in panels}
    assert len(rows) == 2


def test_reliability_grid_ncols():
    fig = plots.reliability_grid(
        {"a": HAND_PROBS, "b": HAND_PROBS, "c": HAND_PROBS},
        HAND_LABELS,
        ncols=1,
        style="coursework",
    )
    fig.draw_without_rendering()
    xs = {round(ax.get_position().x0, 3) for ax in fig.axes}
    assert len(xs) == 1 and len(fig.axes) == 3
