"""The report's one renderer: every page and partial of the report from the templates of this
package (``calbench/report/templates``), through one Jinja2 environment.

The environment autoescapes every value (names from the configuration are shown as text, never
interpreted as HTML) and makes an undefined name an error. :func:`render_html` renders the
report page (its sections: :mod:`calbench.report.sections`, its context:
:mod:`calbench.report.context`), :func:`render_partial` a partial on its own (the shift
section's fragment, :mod:`calbench.report.shift`). Every figure is embedded (base64 PNG or SVG)
and every table carries its CSV as a ``data:`` URI, so the single file works offline.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

#: The page template (a file of ``calbench/report/templates``).
REPORT_TEMPLATE = "report.html.j2"


@functools.cache
def environment():
    """The Jinja2 environment of every report template (package data of calbench.report)."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("calbench.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def _template(name: str):
    import jinja2

    try:
        return environment().get_template(name)
    except jinja2.TemplateNotFound:
        raise FileNotFoundError(
            f"report template {name} is not among calbench.report's templates; reinstall calbench"
        ) from None


def render_partial(name: str, **data) -> str:
    """Render the template ``name`` (e.g. ``sections/shift.html.j2``) with ``data``."""
    import jinja2

    template = _template(name)
    try:
        return template.render(**data)
    except jinja2.TemplateError as exc:
        raise ValueError(f"report template {name} failed to render: {exc}") from exc


def render_html(context: Mapping, template: str = REPORT_TEMPLATE) -> str:
    """Render the report page ``template`` with ``context``
    (:func:`calbench.report.context.build_context`); the bibliography is then derived from what
    the rendered text cites (:func:`cited_bibliography`)."""
    html = render_partial(template, **context)
    if "bibliography" in context:
        context = {**context, **cited_bibliography(html, context.get("cited_for") or {})}
        html = render_partial(template, **context)
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
