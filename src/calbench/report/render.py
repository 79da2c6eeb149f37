"""The report page: rendered through calbench's one Jinja2 environment (:mod:`calbench.pages`)
from the templates of ``calbench/templates/report/`` (the page, ``report.html.j2``, and one
partial per section, ``sections/``: :mod:`calbench.report.sections`), its context from
:mod:`calbench.report.context`. The bibliography is derived from what the rendered text cites.
Every figure is embedded (base64 PNG or SVG) and every table carries its CSV as a ``data:`` URI,
so the single file works offline.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from calbench.pages import render

#: The report's page template (under ``calbench/templates/``).
REPORT_TEMPLATE = "report/report.html.j2"


def render_partial(name: str, **data) -> str:
    """Render the report's partial ``name`` (under ``calbench/templates/report/``, e.g.
    ``sections/shift.html.j2``) with ``data``."""
    return render(f"report/{name}", **data)


def render_html(context: Mapping, template: str = REPORT_TEMPLATE) -> str:
    """Render the report page ``template`` with ``context``
    (:func:`calbench.report.context.build_context`); the bibliography is then derived from what
    the rendered text cites (:func:`cited_bibliography`)."""
    html = render(template, **context)
    if "bibliography" in context:
        context = {**context, **cited_bibliography(html, context.get("cited_for") or {})}
        html = render(template, **context)
    return html


#: Where the bibliography of a rendered report starts (its text is not searched for citations).
BIBLIOGRAPHY_ANCHOR = '<h2 id="bibliography"'


def visible_text(html: str) -> str:
    """The text of an HTML page a reader sees: no tags (so no attribute, no data URI), no
    script or style, entities decoded."""
    import html as _html

    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S | re.I)
    return _html.unescape(re.sub(r"<[^>]+>", " ", html))


def cited_bibliography(html: str, cited_for: Mapping) -> dict:
    """``{"bibliography": {key: reference}, "cited_for": {...}}`` of the works the rendered
    ``html`` cites before its bibliography (:func:`calbench.report.references.cited_in`): every
    work cited is listed, and only those."""
    from calbench.report.references import REFERENCES, cited_in  # lazy: code inputs

    body = html.split(BIBLIOGRAPHY_ANCHOR, 1)[0]
    keys = cited_in(visible_text(body))
    return {
        "bibliography": {k: REFERENCES[k] for k in keys},
        "cited_for": {k: list(dict.fromkeys(cited_for.get(k, []))) for k in keys},
    }
