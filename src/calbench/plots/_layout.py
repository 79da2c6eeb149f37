"""Fixed layout of the reliability figures: axes placed from the figure's shape, in inches.

matplotlib's constrained layout measures every artist's extent and solves for the margins
anew at each draw; for a grid of reliability diagrams that alone cost about 0.85 CPU-s per
figure, more than drawing it. These figures have a known shape (unit axes with the same tick
labels, axis labels of known length, titles above, legends inside the axes), so the margins
are fixed in inches (:data:`MARGINS`) and only the titles are measured: a title wider than
its axes is broken at spaces (the ECE part kept on one line) and the space above the axes
grows with the measured height of the tallest title.

A single diagram in its own figure (:func:`place_single`) carries its ECE on the title's last
line and its legend below the axes (:func:`figure_legend`), so that nothing but the data and
the counts of sparse bins lies inside the axes; :func:`unstack_counts` lifts a count label
that would overlap its neighbour's.
"""

from __future__ import annotations

from collections.abc import Sequence

from calbench.plots._base import GAP_COLOR, root_figure

#: Margins and gaps in inches, for matplotlib's default 10-point tick and axis labels:
#: ``left`` holds a y label and the widest y tick label ("100" of the histograms), ``bottom`` an
#: x label under its tick labels, ``right`` half of the last x tick label ("1.0"), ``wspace``
#: (between panel columns) the next column's y tick labels plus half an x tick label, ``inner``
#: the gap between a diagram and its histogram (halves of two y tick labels), ``top`` the space
#: above axes without a title (half a y tick label).
MARGINS = {
    "left": 0.68,
    "right": 0.2,
    "bottom": 0.5,
    "top": 0.12,
    "wspace": 0.6,
    "inner": 0.22,
}


def margins() -> dict[str, float]:
    """:data:`MARGINS` grown with matplotlib's ``font.size`` above its default 10 points (a style
    with larger text gets wider margins; the axes keep their size)."""
    import matplotlib

    scale = max(1.0, float(matplotlib.rcParams["font.size"]) / 10.0)
    return {key: value * scale for key, value in MARGINS.items()}


#: How much wider than its axes a title may be (inches): half of it reaches out on each side,
#: less than the right margin and half of ``wspace``.
TITLE_OVERHANG = 0.35
#: Space between an axes' top and its title (matplotlib's ``axes.titlepad``, 6 points) plus the
#: room kept above the title, in inches.
_TITLE_PAD = 6.0 / 72.0
_TITLE_ROOM = 0.05


def new_figure(figsize: tuple[float, float]):
    """A Figure with the Agg canvas attached and no layout engine (positions are set here)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def _extent(text, renderer, s: str):
    text.set_text(s)
    return text.get_window_extent(renderer)


def fit_text(text, tokens: Sequence[str], max_width_in: float, renderer) -> float:
    """Set ``text`` to ``tokens`` joined by spaces, broken into lines no wider than
    ``max_width_in`` inches where a break helps (a token is never split); returns the height of
    the text in inches."""
    dpi = renderer.dpi
    limit = max_width_in * dpi
    whole = " ".join(tokens)
    box = _extent(text, renderer, whole)
    if box.width <= limit or len(tokens) < 2:
        return box.height / dpi
    lines: list[str] = []
    line = tokens[0]
    for token in tokens[1:]:
        wider = f"{line} {token}"
        if _extent(text, renderer, wider).width <= limit:
            line = wider
        else:
            lines.append(line)
            line = token
    lines.append(line)
    return _extent(text, renderer, "\n".join(lines)).height / dpi


def title_tokens(name: str, tail: str | None = None) -> list[str]:
    """Words of a title ``name`` (split at spaces) then ``tail`` kept whole (the ECE part)."""
    words = name.split(" ")
    return [*words, tail] if tail is not None else words


def title_space(title_height_in: float | None) -> float:
    """Inches above an axes that hold its title (or only the top margin without one)."""
    if title_height_in is None:
        return margins()["top"]
    return _TITLE_PAD + title_height_in + _TITLE_ROOM


def place(fig, rects_in: Sequence[tuple], size_in: tuple[float, float]) -> None:
    """Resize ``fig`` to ``size_in`` and put each ``(ax, x0, y0, w, h)`` (inches from the lower
    left corner) at that place."""
    width, height = size_in
    fig.set_size_inches(width, height)
    for ax, x0, y0, w, h in rects_in:
        ax.set_position((x0 / width, y0 / height, w / width, h / height))


# --------------------------------------------------------------------------------------------
# a single reliability diagram in its own figure
# --------------------------------------------------------------------------------------------
#: Figure sizes (inches) of a single diagram per style, before the legend below it: 370 px wide
#: at 100 dpi, so that a diagram fits a phone's screen at its natural size (text >= 10 px) and
#: three fit side by side at 1400 px.
SINGLE_SIZE = {"guo": (3.7, 5.0), "coursework": (3.7, 3.6)}


def place_single(fig, ax, hist_ax, title, tail: str) -> None:
    """Fixed layout of a single diagram (:mod:`calbench.plots._layout`): the ``title`` broken
    into lines as wide as the axes, ``tail`` (the ECE) on a line of its own under it; the
    histogram a third of the diagram's height; the figure legend in rows below the x label
    (the figure grows by their height)."""
    m = margins()
    width, height = SINGLE_SIZE["guo" if hist_ax is not None else "coursework"]
    axes_w = width - m["left"] - m["right"]
    text, renderer = ax.title, fig.canvas.get_renderer()
    if title:
        # no wider than the axes: the title's box (all its lines) stays clear of the tick labels
        fit_text(text, title_tokens(title), axes_w, renderer)
        text.set_text(f"{text.get_text()}\n{tail}")
    else:
        text.set_text(tail)
    title_h = text.get_window_extent(renderer).height / renderer.dpi
    legend_h = 0.0
    if fig.legends:
        legend_h = fig.legends[0].get_window_extent(renderer).height / fig.dpi + 0.1
    height += legend_h
    bottom = m["bottom"] + legend_h
    axes_h = height - title_space(title_h) - bottom
    if hist_ax is None:
        place(fig, [(ax, m["left"], bottom, axes_w, axes_h)], (width, height))
        return
    hist_h = (axes_h - m["inner"]) / 4.0
    rects = [
        (hist_ax, m["left"], bottom, axes_w, hist_h),
        (ax, m["left"], bottom + hist_h + m["inner"], axes_w, 3.0 * hist_h),
    ]
    place(fig, rects, (width, height))


#: Font size (points) of the legend below a single diagram, and its columns.
LEGEND_FONT = 8
LEGEND_COLUMNS = 2


def figure_legend(ax, mean_acc, mean_conf) -> None:
    """The legend of a single diagram, below its axes (outside them: it covers no bar, label
    or curve), built before sparse bins are faded so that its keys keep their full colour; the
    histogram's accuracy and average-confidence lines are named in it too."""
    from matplotlib.lines import Line2D

    handles, labels = ax.get_legend_handles_labels()
    if mean_acc is not None:
        handles += [
            Line2D([], [], color="black", ls="--", lw=1.5),
            Line2D([], [], color=GAP_COLOR, ls=":", lw=2.0),
        ]
        labels += ["Accuracy (histogram)", "Avg. confidence"]
    fig = root_figure(ax)
    fig.legend(
        handles,
        labels,
        loc="lower center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=LEGEND_COLUMNS,
        fontsize=LEGEND_FONT,
        frameon=False,
        borderaxespad=0.8,
        handlelength=1.6,
        columnspacing=1.0,
    )


#: gid of the count labels over sparse bins (:func:`unstack_counts` moves overlapping ones).
COUNT_GID = "sparse-count"


def unstack_counts(ax, renderer) -> None:
    """Move a sparse bin's count label up, above its left neighbour's, wherever the two would
    overlap once the axes has its final size (narrow bins side by side)."""
    texts = sorted(
        (t for t in ax.texts if t.get_gid() == COUNT_GID), key=lambda t: t.get_position()[0]
    )
    placed = []
    height_px = max(ax.get_window_extent(renderer).height, 1.0)
    for t in texts:
        for _ in range(len(texts)):
            box = t.get_window_extent(renderer)
            hit = [p for p in placed if p.padded(2.0).overlaps(box)]
            if not hit:
                break
            top = max(p.y1 for p in hit)
            x, y = t.get_position()
            t.set_y(y + (top - box.y0 + 3.0) / height_px)
        placed.append(t.get_window_extent(renderer))
