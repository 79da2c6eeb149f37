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
import re
from collections.abc import Mapping
from pathlib import Path

from calbench.report import context as _context
from calbench.report.context import (  # noqa: F401  (re-exported)
    build_tables,
    fitted_temperature,
    study_sections,
)
from calbench.report.display import (
    calibrator_labels,
    model_label,  # noqa: F401  (re-exported)
    spec_labels,
)
from calbench.report.overview import findings_view
from calbench.report.provenance import (  # noqa: F401  (re-exported)
    MANIFEST_FIELDS,
    PACKAGES,
    RUN_INFO_KEYS,
    package_versions,
    run_provenance,
)
from calbench.report.references import REFERENCES as BIBLIOGRAPHY  # noqa: F401
from calbench.report.references import bibliography
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


def build_context(**kwargs) -> dict:
    """:func:`calbench.report.context.build_context` with the bibliography of this report:
    the works its text cites and those of the calibrators and metrics in ``rows``
    (:func:`calbench.report.references.bibliography`), each with what it is cited for."""
    from calbench.report.summary import metric_name  # lazy: code inputs

    robustness = kwargs.pop("robustness", None)
    ctx = _context.build_context(**kwargs)
    rows, spec = kwargs["rows"], kwargs["spec"]
    ctx["robustness"] = robustness_view(robustness, spec) if robustness else None
    ctx["verdicts"] = verdict_view(rows, spec)
    if ctx["verdicts"]:
        at = next((i for i, e in enumerate(ctx["toc"]) if e["id"] == "diagrams"), len(ctx["toc"]))
        ctx["toc"].insert(at, {"id": "verdicts", "title": "Calibrated?", "children": []})
    if ctx["robustness"]:
        at = next((i for i, e in enumerate(ctx["toc"]) if e["id"] == "diagrams"), len(ctx["toc"]))
        ctx["toc"].insert(at, {"id": "robustness", "title": "Robustness", "children": []})
        ctx["findings"]["headlines"].append(ctx["robustness"]["sentence"])
    cal_spec = spec.get("calibrators") or {}
    keys = list(dict.fromkeys(r["method"] for r in rows))
    methods = {k: str((cal_spec.get(k) or {}).get("method") or k) for k in keys}
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    labels = {**{m: metric_name(m) for m in metrics}, **calibrator_labels(spec)}
    sections = ["dece_history"] if (ctx.get("studies") or {}).get("dece") else []
    sections += ["robustness"] if ctx["robustness"] else []
    sections += ["verdicts"] if ctx["verdicts"] else []
    ctx["bibliography"], ctx["cited_for"] = bibliography(methods, metrics, labels, sections)
    # what the first screen shows: the findings by family, "To check" apart
    ctx["findings_view"] = findings_view(ctx["findings"], calibrator_labels(spec))
    return ctx


#: the calibration test behind the report's "calibrated at the 5% level?" table
VERDICT_TEST = "ks_cal_p"


def verdict_view(rows, spec: Mapping, alpha: float = 0.05) -> dict | None:
    """ "Calibrated at the 5% level?" per model and calibrator (test half): the top-label
    Kolmogorov-Smirnov calibration test's p-values (:mod:`calbench.caltests`, analytic, so Holm
    has full resolution) adjusted with Holm within each model's family of calibrators
    (:func:`calbench.caltests.calibration_verdicts`). None when the rows have no such test."""
    from calbench.caltests import calibration_verdicts  # lazy: pulls scipy

    tests = [r for r in rows if r["metric"] == VERDICT_TEST and r.get("half", "test") == "test"]
    if not tests:
        return None
    cl = calibrator_labels(spec)
    methods = list(dict.fromkeys(r["method"] for r in tests))
    models = list(dict.fromkeys((r["dataset"], r["model"]) for r in tests))
    ml = spec_labels(spec)[0]
    table = []
    n_cal = 0
    for dataset, model in models:
        p = {
            r["method"]: float(r["value"])
            for r in tests
            if (r["dataset"], r["model"]) == (dataset, model)
        }
        verdicts = calibration_verdicts(p, alpha=alpha)
        cells = []
        for m in methods:
            v = verdicts.get(m)
            if v is None:
                cells.append({"text": "–", "ok": None})
                continue
            n_cal += v.calibrated
            cells.append(
                {
                    "text": ("yes" if v.calibrated else "no") + f" (p = {v.adjusted:.3g})",
                    "ok": v.calibrated,
                }
            )
        table.append({"label": ml.get(model, model), "cells": cells})
    n = sum(1 for row in table for c in row["cells"] if c["ok"] is not None)
    return {
        "header": [cl.get(m, m) for m in methods],
        "rows": table,
        "alpha": alpha,
        "n_calibrated": n_cal,
        "n": n,
        "m": len(methods),
    }


def robustness_view(rows, spec: Mapping) -> dict:
    """The robustness section (:func:`calbench.robustness.summarise` of the per-model rows):
    one table row per evaluation choice with the calibrator of best average rank there, and a
    findings sentence saying whether the default choice's winner survives all of them."""
    from calbench.robustness import DEFAULT_VARIANT, summarise  # lazy: code inputs

    s = summarise(rows)
    cl = calibrator_labels(spec)
    name = lambda keys: " = ".join(cl.get(k, k) for k in keys)  # noqa: E731
    head = name(s["headline"])
    table = [
        {
            "label": v["label"]
            + (" (the tables' choice)" if v["variant"] == DEFAULT_VARIANT else ""),
            "best": name(v["best"]),
            "rank": v["mean_ranks"].get(s["headline"][0], float("nan")),
            "same": v["best"] == s["headline"],
        }
        for v in s["variants"]
    ]
    first = sorted(s["p_first"].items(), key=lambda kv: -kv[1])
    n_var, n_same = len(s["variants"]), len(s["survives"])
    if s["robust"]:
        sentence = (
            f"Robust: {head} has the best average ECE rank under all {n_var} evaluation choices "
            f"(bin count, binning scheme, top-label, classwise and smooth ECE; Nixon et al. 2019)."
        )
    else:
        flips = [v["label"] for v in s["variants"] if v["best"] != s["headline"]]
        sentence = (
            f"Not robust: {head} has the best average ECE rank under {n_same} of {n_var} "
            f"evaluation choices; under {'; '.join(flips)} another calibrator ranks first."
        )
    return {
        "sentence": sentence,
        "headline": head,
        "models": s["models"],
        "table": table,
        "p_first": [{"label": cl.get(m, m), "p": p} for m, p in first],
    }


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
        template = env.get_template(path.name)
        html = template.render(**context)
        if "bibliography" in context:  # derived from what the rendered text cites
            context = {**context, **cited_bibliography(html, context.get("cited_for") or {})}
            html = template.render(**context)
        return html
    except jinja2.TemplateError as exc:
        raise ValueError(f"report template {path} failed to render: {exc}") from exc


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
