"""Critical-difference diagram of average ranks (Demšar 2006; Kull et al. 2019)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from calbench.plots._base import _check_mapping, _check_title, _new_figure


def critical_difference_diagram(
    average_ranks: Mapping[str, float], cd: float, title=None, n_models: int | None = None
):
    """Critical-difference diagram of average ranks (Demšar 2006, fig. 1; Kull et al. 2019).

    Methods are placed on a rank axis (1 = best, at the left); a bar of length ``cd`` (the
    Nemenyi critical difference, :func:`calbench.stats.nemenyi_cd`) is drawn above the axis, and
    thick lines join groups of methods whose average ranks differ by less than ``cd`` (not
    significantly different). Returns the Figure.
    """
    _check_mapping(average_ranks, "average_ranks")
    title = _check_title(title)
    items = sorted(((float(r), str(m)) for m, r in average_ranks.items()), key=lambda t: t[0])
    if not items or not all(math.isfinite(r) for r, _ in items):
        raise ValueError("average_ranks must map method names to finite ranks")
    if not (isinstance(cd, int | float) and math.isfinite(cd) and cd > 0):
        raise ValueError(f"cd must be a positive number, got {cd!r}")
    k = len(items)
    lo, hi = 1, max(k, math.ceil(items[-1][0]))
    half = math.ceil(k / 2)
    height = 1.3 + 0.28 * half
    fig = _new_figure((7.0, height))
    ax = fig.add_subplot()
    ax.set_xlim(lo - 0.5, hi + 0.5)
    ax.set_ylim(-0.35 * (half + 1.5), 1.0)
    ax.axis("off")
    ax.plot([lo, hi], [0, 0], color="black", lw=1)
    for t in range(lo, hi + 1):
        ax.plot([t, t], [0, 0.08], color="black", lw=1)
        ax.text(t, 0.14, str(t), ha="center", va="bottom", fontsize=9)
    ax.plot([lo, lo + cd], [0.62, 0.62], color="black", lw=1.5)
    for x in (lo, lo + cd):
        ax.plot([x, x], [0.57, 0.67], color="black", lw=1.5)
    ax.text(lo + cd / 2, 0.7, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=9)
    # labels: best half on the left, worst half on the right
    for i, (r, name) in enumerate(items):
        if i < half:
            y, x_text, ha = -0.35 * (i + 1), lo - 0.45, "left"
        else:
            y, x_text, ha = -0.35 * (k - i), hi + 0.45, "right"
        ax.plot([r, r, x_text + (0.9 if ha == "left" else -0.9)], [0, y, y], color="0.3", lw=0.8)
        ax.text(x_text, y, f"{name} ({r:.2f})", ha=ha, va="center", fontsize=9)
    # cliques: maximal runs of methods within cd of each other
    cliques = []
    for i in range(k):
        j = i
        while j + 1 < k and items[j + 1][0] - items[i][0] < cd:
            j += 1
        if j > i and (not cliques or j > cliques[-1][1]):
            cliques.append((i, j))
    for j, (a, b) in enumerate(cliques):
        y = -0.12 - 0.08 * j
        ax.plot([items[a][0] - 0.03, items[b][0] + 0.03], [y, y], color="black", lw=3)
    if title is not None or n_models is not None:
        text = title or ""
        if n_models is not None:
            text += f" (average ranks over {n_models} models)"
        ax.set_title(text.strip(), fontsize=10)
    return fig
