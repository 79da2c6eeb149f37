"""Critical-difference diagram of average ranks (Demšar 2006, fig. 1; Kull et al. 2019).

The diagram is laid out in inches from the measured width of its texts, so that nothing
overlaps whatever the number of methods and the length of their names: a rank axis (1 = best,
at the left) with the Nemenyi critical difference drawn above it; the better half of the methods
named on the left, the worse half on the right, each joined to its average rank by a leader line
that runs down from the axis and out to its name beside the axis (so a line never crosses a
name); thick bars under the axis join the groups of methods whose average ranks differ by less
than the critical difference (not significantly different, Demšar 2006, sec. 3.2.2).

Every text is :data:`FONT_PT` points: shown at its natural size (1 pt = 4/3 CSS px), as the
report does, that is 13.3 px on screen, and at least :data:`MIN_TEXT_PX` px down to 75 %.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from calbench.plots._base import check_mapping, check_title

#: Size of every text of the diagram, in points (13.3 CSS px at the figure's natural size).
FONT_PT = 10.0
#: The smallest text, in CSS px, the figure is meant to show at 100 % zoom.
MIN_TEXT_PX = 10.0

# Layout in inches: outer padding, gap between a line's end and its text, the stub of a leader
# line beyond the axis, the pitch of the label rows and of the clique bars, an axis unit.
_PAD = 0.08
_GAP = 0.06
_STUB = 0.18
_ROW = 0.25
_BAR_PITCH = 0.09
_BAR_OVERHANG = 0.04
_MIN_AXIS = 2.4


def text_size(text: str, size: float) -> tuple[float, float]:
    """Width and height (ascent plus descent) of ``text`` at ``size`` points, in inches."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    w, h, _ = TextToPath().get_text_width_height_descent(
        text, FontProperties(size=size), ismath=False
    )
    return w / 72.0, h / 72.0


def cliques(ranks: list[float], cd: float) -> list[tuple[int, int]]:
    """Groups of methods not significantly different (Demšar 2006, fig. 1): the maximal runs
    ``(i, j)`` of the sorted ``ranks`` with ``ranks[j] - ranks[i] < cd`` and ``j > i``, each not
    contained in a longer run."""
    out: list[tuple[int, int]] = []
    for i in range(len(ranks)):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] - ranks[i] < cd:
            j += 1
        if j > i and (not out or j > out[-1][1]):
            out.append((i, j))
    return out


def critical_difference_diagram(
    average_ranks: Mapping[str, float],
    cd: float,
    title=None,
    n_models: int | None = None,
    *,
    bars: bool = True,
):
    """Critical-difference diagram of average ranks (Demšar 2006, fig. 1; Kull et al. 2019).

    ``average_ranks`` maps method names to average ranks (1 = best); ``cd`` is the Nemenyi
    critical difference ``q_alpha sqrt(k (k + 1) / (6 N))`` (Demšar 2006, eq. after table 5;
    :func:`calbench.stats.nemenyi_cd`), drawn as a bar above the axis. The better half of the
    methods is named on the left, the worse half on the right; thick bars join groups whose
    ranks differ by less than ``cd`` (:func:`cliques`). The figure's size follows from its texts
    (every text :data:`FONT_PT` points). ``bars=False`` draws no clique bars: the Nemenyi
    post-hoc test is run only after the omnibus (Friedman / Iman-Davenport) test rejects
    (Demšar 2006, sec. 3.2.2), so a caller whose omnibus test did not reject passes False.
    Returns the Figure.
    """
    from matplotlib.figure import Figure

    check_mapping(average_ranks, "average_ranks")
    title = check_title(title)
    items = sorted(((float(r), str(m)) for m, r in average_ranks.items()), key=lambda t: t[0])
    if not all(math.isfinite(r) for r, _ in items):
        raise ValueError("average_ranks must map method names to finite ranks")
    if isinstance(cd, bool) or not (isinstance(cd, int | float) and math.isfinite(cd) and cd > 0):
        raise ValueError(
            f"cd must be a positive number (the Nemenyi critical difference), got {cd!r}"
        )
    if n_models is not None and (
        isinstance(n_models, bool) or not isinstance(n_models, int) or n_models < 1
    ):
        raise ValueError(f"n_models must be a positive integer or None, got {n_models!r}")
    k = len(items)
    ranks = [r for r, _ in items]
    lo = min(1, math.floor(ranks[0]))
    hi = max(k, math.ceil(ranks[-1]), math.ceil(lo + cd), lo + 1)
    half = math.ceil(k / 2)
    left = items[:half]  # best half: row i holds the i-th best
    right = items[half:]  # worst half: row 0 holds the worst

    size = FONT_PT
    tick_w = max(text_size(str(t), size)[0] for t in range(lo, hi + 1))
    unit = max(0.3 if hi - lo <= 10 else 0.26, tick_w + 0.1)
    axis_w = max(_MIN_AXIS, unit * (hi - lo))
    unit = axis_w / (hi - lo)
    text_h = text_size("Ag(", size)[1]
    left_w = max(text_size(n, size)[0] for _, n in left)
    right_w = max((text_size(n, size)[0] for _, n in right), default=0.0)
    x0 = _PAD + left_w + _GAP + _STUB  # axis start
    x1 = x0 + axis_w
    width = x1 + _STUB + _GAP + right_w + _PAD

    heading = None
    if title is not None or n_models is not None:
        heading = (title or "").strip()
        if n_models is not None:
            heading = f"{heading} (average ranks over {n_models} models)".strip()
    title_w = text_size(heading, size + 1)[0] if heading else 0.0
    cd_text = f"CD = {cd:.2f}"
    cd_w = text_size(cd_text, size)[0]
    width = max(width, title_w + 2 * _PAD, x0 + cd_w / 2 + _PAD)

    def x(r: float) -> float:
        return x0 + (r - lo) * unit

    # rows from the top, in inches (y grows downwards)
    y = _PAD
    texts = []  # (x, y, text, ha, va, size)
    if heading:
        texts.append((width / 2, y, heading, "center", "top", size + 1))
        y += text_size(heading, size + 1)[1] + 0.12
    cd_centre = min(max(x(lo + cd / 2), _PAD + cd_w / 2), width - _PAD - cd_w / 2)
    texts.append((cd_centre, y, cd_text, "center", "top", size))
    y += text_h + 0.06
    y_cd = y + 0.04
    y = y_cd + 0.04 + 0.1
    for t in range(lo, hi + 1):
        texts.append((x(t), y, str(t), "center", "top", size))
    y += text_h + 0.04
    y_axis = y + 0.07
    groups = cliques(ranks, cd) if bars else []
    lanes: list[float] = []  # right end (inches) of the last bar in each lane
    y_bars = []
    for a, b in groups:  # a bar goes in the first lane where it keeps clear of the last one
        start, end = x(ranks[a]) - _BAR_OVERHANG, x(ranks[b]) + _BAR_OVERHANG
        lane = next((j for j, e in enumerate(lanes) if e + 0.08 < start), len(lanes))
        lanes[lane : lane + 1] = [end]
        y_bars.append(y_axis + 0.12 + _BAR_PITCH * lane)
    y_rows = max(y_bars, default=y_axis) + 0.12 + text_h / 2
    n_rows = max(len(left), len(right))
    height = y_rows + _ROW * (n_rows - 1) + text_h / 2 + _PAD

    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.axis("off")
    black = "black"
    ax.plot([x(lo), x(hi)], [y_axis, y_axis], color=black, lw=1)
    for t in range(lo, hi + 1):
        ax.plot([x(t), x(t)], [y_axis - 0.07, y_axis], color=black, lw=1)
    ax.plot([x(lo), x(lo + cd)], [y_cd, y_cd], color=black, lw=1.5)
    for xx in (x(lo), x(lo + cd)):
        ax.plot([xx, xx], [y_cd - 0.04, y_cd + 0.04], color=black, lw=1.5)
    for i, (r, name) in enumerate(left):
        yr = y_rows + _ROW * i
        ax.plot([x(r), x(r), x0 - _STUB], [y_axis, yr, yr], color="0.3", lw=0.8)
        texts.append((x0 - _STUB - _GAP, yr, name, "right", "center", size))
    for i, (r, name) in enumerate(reversed(right)):
        yr = y_rows + _ROW * i
        ax.plot([x(r), x(r), x1 + _STUB], [y_axis, yr, yr], color="0.3", lw=0.8)
        texts.append((x1 + _STUB + _GAP, yr, name, "left", "center", size))
    for (a, b), yb in zip(groups, y_bars, strict=True):
        ax.plot(
            [x(ranks[a]) - _BAR_OVERHANG, x(ranks[b]) + _BAR_OVERHANG],
            [yb, yb],
            color=black,
            lw=3,
            solid_capstyle="butt",
        )
    for tx, ty, text, ha, va, fs in texts:
        ax.text(tx, ty, text, ha=ha, va=va, fontsize=fs, parse_math=False)
    return fig
