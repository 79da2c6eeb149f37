"""One table model and one writer per format (HTML, Markdown, CSV, LaTeX) for every printed table.

A :class:`GridTable` is what a reader sees: a title, label columns (``row_header``) and value
columns (``col_labels``), and per row its label texts and :class:`Cell` s already printed
(:mod:`calbench.display`). The metric tables (:mod:`calbench.report.tables`), the
calibration-during-training tables (:mod:`calbench.report.studies`) and the
reproduced-vs-published tables (:mod:`calbench.reference.ours_vs_published`) build one and share
the writers below; the layout is the coursework's (Vasilev 2021, §5): best values bold, an
interval under the value.
"""

from __future__ import annotations

import csv
import html
import io
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from calbench.io import atomic_write_text


@dataclass(frozen=True)
class Cell:
    """One printed value: ``text``, an optional second line ``ci`` (interval), ``bold`` (best of
    its row or column), an HTML class ``css`` and tooltip ``tooltip``; ``csv`` are the values
    the wide CSV holds for it (default: ``text`` alone)."""

    text: str
    ci: str = ""
    bold: bool = False
    css: str = ""
    tooltip: str = ""
    csv: tuple | None = None

    def csv_values(self) -> tuple:
        return (self.text,) if self.csv is None else self.csv


@dataclass
class GridTable:
    """Rows of label texts and printed cells under a header.

    ``css_class`` and ``data`` (``(name, value)`` pairs) become the HTML table's ``class`` and
    ``data-*`` attributes; ``csv_suffixes`` name the extra CSV columns of every value column
    (``"{label} {suffix}"``, filled from :attr:`Cell.csv`).
    """

    title: str
    row_header: list[str]
    col_labels: list[str]
    labels: list[list[str]]
    cells: list[list[Cell]]
    css_class: str = "table"
    data: tuple[tuple[str, str], ...] = ()
    csv_suffixes: tuple[str, ...] = field(default=())

    def rows(self) -> list[dict]:
        """Rows as plain data: ``{"labels": [...], "cells": [{"text", "ci", "bold"}, ...]}``."""
        return [
            {
                "labels": labels,
                "cells": [{"text": c.text, "ci": c.ci, "bold": c.bold} for c in cells],
            }
            for labels, cells in zip(self.labels, self.cells, strict=True)
        ]


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------
def to_html(t: GridTable) -> str:
    """A standalone ``<table class=... data-NAME="VALUE">`` with a caption; all text
    HTML-escaped, best values in ``<b>``, the interval in ``<small class="ci">`` below."""
    esc = html.escape
    attrs = "".join(f' data-{name}="{esc(str(value))}"' for name, value in t.data)
    out = [f'<table class="{esc(t.css_class)}"{attrs}>']
    out.append(f"<caption>{esc(t.title)}</caption>")
    out.append(
        "<thead><tr>"
        + "".join(f"<th>{esc(h)}</th>" for h in [*t.row_header, *t.col_labels])
        + "</tr></thead><tbody>"
    )
    for labels, cells in zip(t.labels, t.cells, strict=True):
        tds = [f"<td>{esc(x)}</td>" for x in labels]
        for c in cells:
            text = esc(c.text)
            if c.bold:
                text = f"<b>{text}</b>"
            if c.ci:
                text += f'<br><small class="ci">{esc(c.ci)}</small>'
            cls = f"num {c.css}" if c.css else "num"
            tip = f' title="{esc(c.tooltip)}"' if c.tooltip else ""
            tds.append(f'<td class="{esc(cls)}"{tip}>{text}</td>')
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------
#: Escaped wherever they stand: the cell separator, backslash, emphasis ``*``, code span
#: backticks, raw HTML / autolink ``<`` ``>``, GitHub's math ``$`` and strikethrough ``~``.
_MD_ALWAYS = frozenset("\\|*`<>$~")
#: ``&`` that would start a character reference (``&amp;``, ``&#60;``).
_MD_ENTITY = re.compile(r"&(?=#?[0-9A-Za-z]+;)")


def md_escape(text: str) -> str:
    """``text`` as literal inline Markdown (CommonMark / GitHub), one table cell's worth.

    Backslash escapes (valid before any ASCII punctuation) for :data:`_MD_ALWAYS`; ``_`` unless
    it stands between two letters or digits (where it cannot start or end emphasis, so
    ``vs_b`` stays as it is); ``]`` before ``(`` or ``[`` (a link); ``&`` as ``&amp;`` where it
    would start a character reference; line breaks, which would end the table row, as spaces.
    Text that needs none of this (numbers, intervals, plain names) is returned unchanged."""
    s = " ".join(str(text).splitlines())
    out = []
    for i, ch in enumerate(s):
        if ch in _MD_ALWAYS:
            ch = "\\" + ch
        elif ch == "_":
            inner = 0 < i < len(s) - 1 and s[i - 1].isalnum() and s[i + 1].isalnum()
            ch = ch if inner else "\\_"
        elif ch == "]" and s[i + 1 : i + 2] in ("(", "["):
            ch = "\\]"
        elif ch == "&" and _MD_ENTITY.match(s, i):
            ch = "&amp;"
        out.append(ch)
    return "".join(out)


def markdown_lines(t: GridTable) -> list[str]:
    """The header, alignment and body lines of a GitHub Markdown table (no title)."""
    header = [*t.row_header, *t.col_labels]
    lines = [
        "| " + " | ".join(md_escape(h) for h in header) + " |",
        "|" + "---|" * len(t.row_header) + "---:|" * len(t.col_labels),
    ]
    for labels, cells in zip(t.labels, t.cells, strict=True):
        out = [md_escape(x) for x in labels]
        for c in cells:
            text = f"**{md_escape(c.text)}**" if c.bold else md_escape(c.text)
            out.append(f"{text} {md_escape(c.ci)}" if c.ci else text)
        lines.append("| " + " | ".join(out) + " |")
    return lines


def to_markdown(t: GridTable) -> str:
    """The bold title, a blank line and the table; best values ``**bold**``, interval after."""
    return "\n".join([f"**{md_escape(t.title)}**", "", *markdown_lines(t)]) + "\n"


# --------------------------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------------------------
#: How a table prints a missing value (the CSV leaves the cell empty instead).
MISSING = "–"


def to_csv(t: GridTable) -> str:
    """Wide CSV of the printed values: label columns, then per value column its value and the
    :attr:`GridTable.csv_suffixes` columns; numbers only (a missing one is an empty cell)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    header = list(t.row_header)
    for c in t.col_labels:
        header += [c, *(f"{c} {s}" for s in t.csv_suffixes)]
    w.writerow(header)
    for labels, cells in zip(t.labels, t.cells, strict=True):
        line = list(labels)
        for c in cells:  # a missing number is an empty cell, never the printed dash
            line += ["" if v == MISSING else v for v in c.csv_values()]
        w.writerow(line)
    return buf.getvalue()


# --------------------------------------------------------------------------------------------
# LaTeX
# --------------------------------------------------------------------------------------------
_TEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",  # OT1 fonts print < > | as other glyphs
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "\n": " ",  # a blank line would end the tabular's paragraph; a title's comment line
    "\r": " ",
}


def tex_escape(text: str) -> str:
    """``text`` as literal LaTeX: the special characters of :data:`_TEX_SPECIAL` escaped, line
    breaks as spaces, and a leading ``[`` or ``*`` braced (after a row's ``\\\\`` they would be
    read as its optional argument or star)."""
    out = "".join(_TEX_SPECIAL.get(ch, ch) for ch in str(text))
    return "{" + out[0] + "}" + out[1:] if out[:1] in ("[", "*") else out


def to_latex(t: GridTable) -> str:
    """A ``tabular`` in the study's style (booktabs rules, best value ``\\textbf``)."""
    spec = "l" * len(t.row_header) + "r" * len(t.col_labels)
    lines = [
        f"% {tex_escape(t.title)}",
        f"\\begin{{tabular}}{{{spec}}}",
        "\\toprule",
        " & ".join(tex_escape(h) for h in [*t.row_header, *t.col_labels]) + " \\\\",
        "\\midrule",
    ]
    for labels, cells in zip(t.labels, t.cells, strict=True):
        out = [tex_escape(x) for x in labels]
        for c in cells:
            text = tex_escape(c.text).replace("–", "--")
            out.append(f"\\textbf{{{text}}}" if c.bold else text)
        lines.append(" & ".join(out) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


#: file extension -> writer
WRITERS: dict[str, Callable[[GridTable], str]] = {
    "html": to_html,
    "md": to_markdown,
    "csv": to_csv,
    "tex": to_latex,
}


def write_grid(t: GridTable, stem: str | os.PathLike, formats: Sequence[str] = tuple(WRITERS)):
    """Write ``t`` as ``stem.<ext>`` for every format (atomically); returns the paths."""
    paths = []
    for ext in formats:
        path = f"{os.fspath(stem)}.{ext}"
        atomic_write_text(path, WRITERS[ext](t))
        paths.append(path)
    return paths
