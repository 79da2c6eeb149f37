"""The study's report: comparison cells as CSV, the tables as Markdown and as a self-contained
HTML page (text escaped, figures embedded as data URIs)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from calbench.io import png_data_uri
from calbench.reference.guo_kull.published import (
    EXPECTED,
    FLAGGED,
    MISSING,
    NO_LOGITS,
    OK,
    REFERENCE,
    SOURCES,
)
from calbench.results import long_csv_text
from calbench.table_model import md_escape


def csv_text(rows: Sequence[Mapping], columns: Sequence[str]) -> str:
    """CSV of ``rows`` (floats at full precision, None / NaN empty)."""
    return long_csv_text(rows, columns)


def _counts(rows: Sequence[Mapping]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        out[r["status"]] = out.get(r["status"], 0) + 1
    return out


def _md_cell(c: Mapping) -> str:
    if not c["status"]:
        return ""
    mark = " ⚠" if c["status"] == FLAGGED else (" (expected)" if c["status"] == EXPECTED else "")
    if c["status"] == REFERENCE:
        return f"{c['ours']} / {c['published']}"
    return f"{c['ours']} / {c['published']} / {c['difference']}{mark}"


def to_markdown(
    tables: Sequence[Mapping], rows: Sequence[Mapping], spec: Mapping, sweep: Sequence[Mapping] = ()
) -> str:
    """The tables as Markdown (the figures are in the HTML page)."""
    title = spec.get("title") or "Guo et al. 2017 / Kull et al. 2019 on Kängsepp's logits"
    counts = _counts(rows)
    lines = [f"# {md_escape(title)}", "", _summary_text(counts), ""]
    for t in tables:
        lines += [f"## {md_escape(t['title'])}", "", md_escape(t["note"]), ""]
        header = [*t["header"], *t["columns"]]
        lines.append("| " + " | ".join(map(md_escape, header)) + " |")
        lines.append("|" + "---|" * len(t["header"]) + "---:|" * len(t["columns"]))
        for r in t["rows"]:
            lines.append(
                "| " + " | ".join([*map(md_escape, r["labels"]), *map(_md_cell, r["cells"])]) + " |"
            )
        lines.append("")
    if sweep:
        lines += _sweep_md(sweep)
    return "\n".join(lines) + "\n"


def _summary_text(counts: Mapping[str, int]) -> str:
    parts = [f"{n} {s}" for s, n in sorted(counts.items())]
    return (
        "Each cell: ours / published / difference in the publication's units and digits "
        "(Guo et al. and the slides: ours / published, a reference band). A cell is flagged ⚠ "
        "when |difference| exceeds the base tolerance plus half a unit of the last printed digit. "
        "Cells: " + (", ".join(parts) or "none") + "."
    )


def _sweep_summary(sweep: Sequence[Mapping]) -> list[dict]:
    out: dict[str, dict] = {}
    for r in sweep:
        d = out.setdefault(
            r["model"], {"model": r["model"], "diagram": [], "best": None, "fitted": None}
        )
        if r["kind"] == "diagram":
            d["diagram"].append((r["temperature"], r["ece"]))
        elif r["kind"] == "curve":
            if d["best"] is None or r["ece"] < d["best"][1]:
                d["best"] = (r["temperature"], r["ece"])
        elif r["kind"] == "fitted":
            d["fitted"] = (r["temperature"], r["ece"])
    return list(out.values())


def _sweep_md(sweep: Sequence[Mapping]) -> list[str]:
    summ = _sweep_summary(sweep)
    temps = [t for t, _ in summ[0]["diagram"]] if summ else []
    lines = [
        "## Temperature sweep: ECE, % (15 bins, test part) of softmax(z / T)",
        "",
        "| Model | "
        + " | ".join(f"T = {t:g}" for t in temps)
        + " | best T on the curve | fitted T (TS) |",
        "|---|" + "---:|" * (len(temps) + 2),
    ]
    for d in summ:
        cells = [f"{100 * e:.2f}" for _, e in d["diagram"]]
        best = f"{d['best'][0]:.2f} ({100 * d['best'][1]:.2f})" if d["best"] else "–"
        fit = f"{d['fitted'][0]:.3f} ({100 * d['fitted'][1]:.2f})" if d["fitted"] else "–"
        lines.append(f"| {md_escape(d['model'])} | " + " | ".join([*cells, best, fit]) + " |")
    return [*lines, ""]


_CSS = (
    "body{font-family:sans-serif;margin:2em;max-width:90em}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}td.num{text-align:right}"
    ".differs{background:#fdd}.expected{background:#ffd}.missing,.no-logits{color:#999}"
    ".reference-band{background:#f4f4ff}small{color:#555}img{max-width:100%}p.note{color:#333}"
)
_CLASSES = {
    OK: "ok",
    FLAGGED: "differs",
    EXPECTED: "expected",
    MISSING: "missing",
    REFERENCE: "reference-band",
    NO_LOGITS: "no-logits",
    "": "",
}


def _html_table(t: Mapping) -> dict:
    """One table's view for ``templates/reference/guo_kull.html.j2``."""
    rows = []
    for r in t["rows"]:
        cells = []
        for c in r["cells"]:
            if not c["status"]:
                cells.append(None)
                continue
            small = (
                c["published"]
                if c["status"] == REFERENCE
                else f"{c['published']} ({c['difference']})"
            )
            cls = _CLASSES.get(c["status"], "")
            cells.append({"cls": cls, "status": c["status"], "ours": c["ours"], "small": small})
        rows.append({"labels": [str(x) for x in r["labels"]], "cells": cells})
    return {"title": t["title"], "note": t["note"], "head": [*t["header"], *t["columns"]],
            "rows": rows}  # fmt: skip


def to_html(
    tables: Sequence[Mapping],
    rows: Sequence[Mapping],
    spec: Mapping,
    *,
    sweep: Sequence[Mapping] = (),
    figures: Mapping[str, Sequence[str | os.PathLike]] | None = None,
) -> str:
    """A self-contained HTML page (``templates/reference/guo_kull.html.j2``): every table (text
    escaped), the sweep summary and, per model, the figures in ``figures[model]`` (PNG files,
    embedded as data URIs)."""
    from calbench.pages import render  # lazy: code inputs

    sweep_view = None
    if sweep:
        summ = _sweep_summary(sweep)
        sweep_view = {
            "temps": [f"{t:g}" for t, _ in summ[0]["diagram"]] if summ else [],
            "rows": [
                {
                    "model": d["model"],
                    "cells": [f"{100 * v:.2f}" for _, v in d["diagram"]],
                    "best": f"{d['best'][0]:.2f} ({100 * d['best'][1]:.2f})" if d["best"] else "–",
                    "fit": f"{d['fitted'][0]:.3f} ({100 * d['fitted'][1]:.2f})"
                    if d["fitted"]
                    else "–",
                }
                for d in summ
            ],
        }
    figs = [
        {
            "model": model,
            "images": [{"alt": f"{Path(p).stem}: {model}", "src": png_data_uri(p)} for p in paths],
        }
        for model, paths in (figures or {}).items()
    ]
    return render(
        "reference/guo_kull.html.j2",
        title=spec.get("title") or "Guo et al. 2017 / Kull et al. 2019 on Kängsepp's logits",
        css=_CSS,
        description=spec.get("description") or "",
        summary=_summary_text(_counts(rows)),
        sources=list(SOURCES.items()),
        tables=[_html_table(t) for t in tables],
        sweep=sweep_view,
        figures=figs,
    )
