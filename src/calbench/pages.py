"""The one renderer of calbench's HTML: every page and partial from the templates of the package
(``calbench/templates/``, package data), through one Jinja2 environment.

The environment autoescapes every value (names from the configuration or from result files are
shown as text, never interpreted as HTML) and makes an undefined name an error. The report
(``templates/report/``: :mod:`calbench.report.render`), the replication pages
(``templates/reference/``: :mod:`calbench.reference.ours_vs_published`,
:mod:`calbench.reference.guo_kull.render`) and the implementations table
(``templates/arena/``: :mod:`calbench.arena`) all render here. It sits in the library
layer so that the steps writing those pages, which may not import the report, use the same
environment (docs/architecture.md).
"""

from __future__ import annotations

import functools


@functools.cache
def environment():
    """The Jinja2 environment of every calbench template."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("calbench", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def render(name: str, **data) -> str:
    """Render the template ``name`` (a path under ``calbench/templates/``, e.g.
    ``report/report.html.j2``) with ``data``; a missing template is a :class:`FileNotFoundError`,
    a template that fails (an undefined name) a :class:`ValueError`, each one line."""
    import jinja2

    try:
        template = environment().get_template(name)
    except jinja2.TemplateNotFound:
        raise FileNotFoundError(
            f"template {name} is not among calbench's templates (calbench/templates/); "
            "reinstall calbench"
        ) from None
    try:
        return template.render(**data)
    except jinja2.TemplateError as exc:
        raise ValueError(f"template {name} failed to render: {exc}") from exc
