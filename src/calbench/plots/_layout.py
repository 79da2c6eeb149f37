"""Fixed layout of the reliability figures: axes placed from the figure's shape, in inches.

matplotlib's constrained layout measures every artist's extent and solves for the margins
anew at each draw; for a grid of reliability diagrams that alone cost about 0.85 CPU-s per
figure, more than drawing it. These figures have a known shape (unit axes with the same tick
labels, axis labels of known length, titles above, legends inside the axes), so the margins
are fixed in inches (:data:`MARGINS`) and only the titles are measured: a title wider than
its axes is broken at spaces (the ECE part kept on one line) and the space above the axes
grows with the measured height of the tallest title.
"""

from __future__ import annotations

from collections.abc import Sequence

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
