"""The report's sections: one ordered list, from which both the page and its contents are drawn.

:func:`report_sections` turns the report's context (:func:`calbench.report.context.build_context`)
into the list of the sections present, in page order; the page template
(``calbench/templates/report/report.html.j2``) renders each by its partial
(``templates/report/sections/<template>``)
and :func:`contents` makes the table of contents from the same list, so a section can never be on
the page and missing from the contents, or the reverse. A new section is one entry here and one
partial there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Section:
    """One section of the report: its anchor ``id`` and contents ``title``, the partial that
    renders it (a file of ``templates/sections/``), its contents entries below it
    (``children``: ``{"id", "title"}``) and, for a section another step computed (the shift
    section), its view ``data`` (the built-in sections read the report's context)."""

    id: str
    title: str
    template: str
    children: tuple[Mapping[str, str], ...] = ()
    data: Any = None


def contents(sections: Sequence[Section]) -> list[dict]:
    """The table of contents: one entry per section, in page order, with its children."""
    return [
        {"id": s.id, "title": s.title, "children": [dict(c) for c in s.children]} for s in sections
    ]


def report_sections(
    ctx: Mapping, tables: Mapping, cl: Mapping, extra: Sequence[Section] = ()
) -> list[Section]:
    """The sections of the report present in ``ctx``, in page order; ``tables`` are
    :func:`calbench.report.context.build_tables`' (titles of the tables' contents entries),
    ``cl`` the calibrators' labels, ``extra`` the sections other steps computed (placed after
    the study's own results, before the implementations side by side and the protocol)."""
    from calbench.report.ranks import metric_name  # lazy: code inputs

    out = [Section("findings", "Findings", "findings.html.j2")]
    if ctx.get("partitions"):  # a cross-fitted study of several partitions
        out.append(Section("partitions", "Spread over partitions", "partitions.html.j2"))
    if ctx["compare"]:
        out.append(Section("compare", "Comparisons", "compare.html.j2"))
    if ctx["ranks"]:
        out.append(Section("ranks", "Ranks", "ranks.html.j2"))
    if ctx.get("over_models"):
        out.append(Section("over-models", "Over models", "over_models.html.j2"))
    if ctx.get("verdicts"):
        out.append(Section("verdicts", "Calibrated within δ?", "verdicts.html.j2"))
    if ctx.get("robustness"):
        out.append(Section("robustness", "Robustness", "robustness.html.j2"))
    # the models whose diagrams the page embeds, then one entry for the linked rest
    embedded = [f for f in ctx["figures"] if not f.get("files")]
    linked = len(ctx["figures"]) - len(embedded)
    figures = tuple({"id": f["id"], "title": f["model"]} for f in embedded) + (
        ({"id": "rd-files", "title": f"{linked} more models"},) if linked else ()
    )
    out.append(Section("diagrams", "Reliability diagrams", "diagrams.html.j2", figures))
    results = tuple(
        {"id": v["id"], "title": metric_name(t.metric)}
        for v, t in zip(ctx["metric_tables"], tables["metrics"], strict=True)
    )
    out.append(Section("tables", "Results", "tables.html.j2", results))
    if ctx["temperatures"]:
        out.append(Section("temperatures", "Temperatures", "temperatures.html.j2"))
    if ctx["losses_tables"]:
        methods = [(t, cl.get("uncalibrated", "uncalibrated")) for t in tables["losses"]]
        methods += [(t, cl.get("ts", "ts")) for t in tables["losses_ts"]]
        losses = tuple(
            {"id": v["id"], "title": f"{metric_name(t.metric)}, {method}"}
            for v, (t, method) in zip(ctx["losses_tables"], methods, strict=True)
        )
        out.append(Section("losses", "By training loss", "losses.html.j2", losses))
    if ctx["reference"]:
        out.append(Section("reference", "Published numbers", "reference.html.j2"))
    studies = ctx["studies"]
    if studies["tables"] or studies["dece"] or studies["reliability"]:
        out.append(Section("objectives", "Calibration during training", "objectives.html.j2"))
    out += extra
    if ctx.get("arena"):
        out.append(Section("arena", "Implementations side by side", "arena.html.j2"))
    out.append(Section("protocol", "Protocol", "protocol.html.j2"))
    out.append(Section("provenance", "Provenance", "provenance.html.j2"))
    out.append(Section("bibliography", "References", "bibliography.html.j2"))
    ids = [s.id for s in out]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"report sections share the id(s) {twice}; give each section its own id")
    return out
