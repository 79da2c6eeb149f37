"""The self-contained HTML report: findings first, tables, figures and provenance.

The report opens on a summary computed from the results (:mod:`calbench.report.summary`:
winner counts, average ranks with the Friedman test and a critical-difference diagram after
Demšar 2006, headline findings and anomalies), then the result tables (rows = models, columns =
calibrators; :mod:`calbench.report.tables`), the fitted temperatures, the paired comparisons
(Holm-adjusted p-values), the reliability diagrams (Guo et al. 2017, fig. 1; uncalibrated,
temperature scaling and the model's best calibrator shown, the rest one click away) and the
provenance of the run. Every figure is embedded (base64 PNG or SVG) and every table carries its
CSV as a ``data:`` URI, so the single file works offline. The Jinja2 environment autoescapes
every value: names from the configuration are shown as text, never interpreted as HTML.

The context is built in :mod:`calbench.report.context` (single tables and figures:
:mod:`calbench.report.views`; provenance: :mod:`calbench.report.provenance`); this module
renders it and keeps the names other code imports.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from calbench.report.context import (  # noqa: F401  (re-exported)
    BIBLIOGRAPHY,
    build_context,
    build_tables,
    fitted_temperature,
    study_sections,
)
from calbench.report.display import model_label  # noqa: F401  (re-exported)
from calbench.report.provenance import (  # noqa: F401  (re-exported)
    MANIFEST_FIELDS,
    PACKAGES,
    package_versions,
)
from calbench.report.views import (  # noqa: F401  (re-exported)
    compare_view,
    csv_data_uri,
    metric_view,
    png_data_uri,
    reliability_figures,
    study_view,
    table_view,
    temperature_view,
)


def render_html(template_path: str | os.PathLike, context: Mapping) -> str:
    """Render ``template_path`` with Jinja2 (autoescape on, undefined names are errors)."""
    import jinja2

    path = Path(template_path)
    if not path.is_file():
        raise FileNotFoundError(f"report template {path} does not exist; pass --template PATH")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(path.parent)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    try:
        return env.get_template(path.name).render(**context)
    except jinja2.TemplateError as exc:
        raise ValueError(f"report template {path} failed to render: {exc}") from exc
