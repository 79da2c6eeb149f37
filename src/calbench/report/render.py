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
:mod:`calbench.report.views`; provenance: :mod:`calbench.report.provenance`); this module adds
the verdicts, robustness and bibliography to it and renders it. Every name is imported from the
module that defines it (no re-exports here).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path

from calbench.display import (
    calibrator_labels,
    display_spec,
    format_value,
    spec_labels,
)
from calbench.report import context as _context
from calbench.report.overview import findings_view
from calbench.report.references import bibliography
from calbench.results import HEADLINE_HALVES


def build_context(**kwargs) -> dict:
    """:func:`calbench.report.context.build_context` with the robustness section (whose signed
    unbiased errors also rank them in the ranks section) and the bibliography of this report:
    the works its text cites and those of the calibrators and metrics in ``rows``
    (:func:`calbench.report.references.bibliography`), each with what it is cited for."""
    from calbench.report.ranks import metric_name  # lazy: code inputs

    robustness = kwargs.pop("robustness", None)
    if robustness:  # the unbiased errors rank on their signed values, as robustness does
        from calbench.stats.robustness import signed_estimates  # lazy: code inputs

        kwargs["signed_rows"] = signed_estimates(robustness)
    ctx = _context.build_context(**kwargs)
    rows, spec = kwargs["rows"], kwargs["spec"]
    ctx["robustness"] = robustness_view(robustness, spec) if robustness else None
    ctx["verdicts"] = verdict_view(rows, spec)
    if ctx["verdicts"]:
        at = next((i for i, e in enumerate(ctx["toc"]) if e["id"] == "diagrams"), len(ctx["toc"]))
        ctx["toc"].insert(at, {"id": "verdicts", "title": "Calibrated within δ?", "children": []})
    if ctx["verdicts"]:
        _add_finding(ctx["findings"], _within_item(ctx["verdicts"]))
    if ctx["robustness"]:
        at = next((i for i, e in enumerate(ctx["toc"]) if e["id"] == "diagrams"), len(ctx["toc"]))
        ctx["toc"].insert(at, {"id": "robustness", "title": "Robustness", "children": []})
        item = {
            "family": "robustness",
            "text": ctx["robustness"]["sentence"],
            "direction": "",
            "size": None,
            "support": "supported" if ctx["robustness"]["robust"] else "to check",
            "pairs": [],
        }
        _add_finding(ctx["findings"], item)
    cal_spec = spec.get("calibrators") or {}
    keys = list(dict.fromkeys(r["method"] for r in rows))
    methods = {k: str((cal_spec.get(k) or {}).get("method") or k) for k in keys}
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    labels = {**{m: metric_name(m) for m in metrics}, **calibrator_labels(spec)}
    sections = ["dece_history"] if (ctx.get("studies") or {}).get("dece") else []
    sections += ["robustness"] if ctx["robustness"] else []
    sections += ["verdicts"] if ctx["verdicts"] else []
    sections += ["over_models"] if ctx.get("over_models") else []
    sections += ["proper_scores"] if (ctx["compare"] or {}).get("n_proper") else []
    ctx["bibliography"], ctx["cited_for"] = bibliography(methods, metrics, labels, sections)
    # what the first screen shows: the findings by family, "To check" apart
    ctx["findings_view"] = findings_view(ctx["findings"], calibrator_labels(spec))
    return ctx


def _add_finding(found: dict, item: dict) -> None:
    """Add one finding (:func:`calbench.report.summary.finding_items`' structure): a supported
    one after the other supported ones, one to check at the end."""
    items = found.setdefault("items", [])
    at = next((i for i, d in enumerate(items) if d["support"] != "supported"), len(items))
    items.insert(at if item["support"] == "supported" else len(items), item)
    found["headlines" if item["support"] == "supported" else "anomalies"].append(item["text"])


#: a finding names at most this many calibrator-model pairs; the rest are counted (a study of
#: many models would otherwise list hundreds in one sentence; the table lists every one)
LISTED_PAIRS = 8


def _listed(names: list[str]) -> str:
    """``names`` joined, the first :data:`LISTED_PAIRS` of them and a count of the rest."""
    if len(names) <= LISTED_PAIRS:
        return ", ".join(names)
    rest = len(names) - LISTED_PAIRS
    return ", ".join(names[:LISTED_PAIRS]) + f" and {rest} more, listed in the section's table"


def _within_item(v: dict) -> dict:
    """The finding of the "calibrated within delta" table: how many were shown, and the
    smallest error the test halves can show."""
    shown = [
        f"{h} on {r['label']}"
        for r in v["rows"]
        for h, c in zip(v["header"], r["cells"], strict=True)
        if c["ok"]
    ]
    detect = sorted(
        (r["detectable"] for r in v["rows"] if r["detectable"] != "–"),
        key=lambda t: float(t.rstrip("%")),
    )
    text = (
        f"Calibrated within {v['delta']} points (upper bound of the unbiased ECE below it): "
        f"{v['n_within']} of {v['n']} calibrator-model pairs"
        + (f" ({_listed(shown)})" if shown else "")
        + "."
    )
    if detect:
        text += (
            f" The smallest error these test halves can show is {detect[0]} to {detect[-1]}"
            " (per model); a smaller one cannot be shown at this sample size."
        )
    return {
        "family": "calibrated",
        "text": text,
        "direction": "",
        "size": None,
        "support": "supported" if v["n_within"] else "to check",
        "pairs": [],
    }


#: the calibration error behind the report's "calibrated within delta" table
VERDICT_METRIC = "ece_ub"


def detectable_error(value: float, high: float) -> float:
    """The smallest calibration error these samples can show, read off one calibrator's
    interval of the unbiased error: its interval's upper bound had its estimate been 0,
    ``sqrt(max(high^2 - value^2, 0))`` (``high^2 - value^2 = z se`` of the squared error
    ``T`` when ``T >= 0``, :func:`calbench.stats.ub_interval`); NaN without an interval."""
    if not (math.isfinite(value) and math.isfinite(high)):
        return math.nan
    return math.sqrt(max(high * high - value * value, 0.0))


def verdict_view(rows, spec: Mapping) -> dict | None:
    """ "Calibrated within delta?" per model and calibrator (test half).

    A calibrator is shown calibrated within ``delta`` (``protocol.calibrated_within``, a
    fraction; config ``evaluation.calibrated_within``) only when the upper bound of the
    interval of its unbiased top-label calibration error (:data:`VERDICT_METRIC`, ``ci_high``:
    the jackknife interval at the study's level, a one-sided bound at level ``(1 + level) / 2``)
    lies below ``delta``. No multiplicity adjustment: each claim stands at its own level, and
    an adjustment over the calibrators (Holm) would make the claim easier, not harder. A
    bound at or above ``delta`` says "not shown within delta" (never "miscalibrated": the
    data may simply be too few). Each model also gets the smallest error its test half can
    show (:func:`detectable_error`, the smallest over its calibrators: the one nearest to
    calibrated has the standard error of a calibrated predictor; a miscalibrated one's is
    larger). ``None`` when the rows
    have no interval of :data:`VERDICT_METRIC`.
    """
    delta = float((spec.get("protocol") or {}).get("calibrated_within", 0.01))
    level = float((spec.get("protocol") or {}).get("level", 0.95))
    if not 0.0 < delta < 1.0:
        raise ValueError(
            f"evaluation.calibrated_within must lie in (0, 1) (a fraction, e.g. 0.01), got {delta}"
        )
    rated = [
        r
        for r in rows
        if r["metric"] == VERDICT_METRIC
        and r.get("half", "test") in HEADLINE_HALVES
        and math.isfinite(float(r.get("ci_high", math.nan)))
    ]
    if not rated:
        return None
    cl = calibrator_labels(spec)
    ml = spec_labels(spec)[0]
    methods = list(dict.fromkeys(r["method"] for r in rated))
    models = list(dict.fromkeys((r["dataset"], r["model"]) for r in rated))
    pct = lambda x: format_value(VERDICT_METRIC, x)  # noqa: E731
    table, n_within, n = [], 0, 0
    for dataset, model in models:
        mine = {r["method"]: r for r in rated if (r["dataset"], r["model"]) == (dataset, model)}
        cells, detect = [], []
        for m in methods:
            r = mine.get(m)
            if r is None:
                cells.append({"text": "–", "ok": None})
                continue
            value, high = float(r["value"]), float(r["ci_high"])
            within = high < delta
            n_within += within
            n += 1
            detect.append(detectable_error(value, high))
            word = "within" if within else "not shown within"
            cells.append({"text": f"{word} (bound {pct(high)}%)", "ok": within})
        finite = [d for d in detect if math.isfinite(d)]
        table.append(
            {
                "label": ml.get(model, model),
                "cells": cells,
                "detectable": f"{pct(min(finite))}%" if finite else "–",
            }
        )
    return {
        "header": [cl.get(m, m) for m in methods],
        "rows": table,
        "delta": pct(delta),
        "metric": display_spec(VERDICT_METRIC)[2],
        "level": f"{(1 + level) / 2 * 100:g}",
        "n_within": n_within,
        "n": n,
        "m": len(methods),
    }


def robustness_view(rows, spec: Mapping) -> dict:
    """The robustness section (:func:`calbench.stats.robustness.summarise` of the per-model rows):
    one table row per evaluation choice with the calibrator of best average rank there, one
    row per model with its winner, runner-up and their test, and a findings sentence: robust
    only when the winner beats the runner-up (a paired test that rejects) and ranks first under
    every evaluation choice; otherwise which choices disagree, or that the data cannot separate
    the two."""
    from calbench.report.summary import format_p  # lazy: code inputs
    from calbench.stats.robustness import ALPHA, DEFAULT_VARIANT, summarise  # lazy: code inputs

    s = summarise(rows)
    cl = calibrator_labels(spec)
    ml = spec_labels(spec)[0]
    name = lambda keys: " = ".join(cl.get(k, k) for k in keys)  # noqa: E731
    head, up = name(s["headline"]), name(s["runner_up"])
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
    labels = {v["variant"]: v["label"] for v in s["variants"]}
    first = sorted(s["p_first"].items(), key=lambda kv: -kv[1])
    n_var = len(s["variants"])
    test = (
        "its paired test on the one model"
        if s["models"] == 1
        else f"signed-rank test over {s['models']} models, normal approximation with the tie "
        "correction"
        if s["p_method"] == "normal"
        else f"exact signed-rank test over {s['models']} models"
    )
    p_text = format_p(s["p"])  # exact (counted) or normal approximation: no resolution floor
    p_text = p_text if p_text[0] in "<≤" else f"= {p_text}"
    if s["robust"]:
        sentence = (
            f"Robust: {head} has the best average rank on the unbiased ECE under all {n_var} "
            f"evaluation choices (bin count, binning scheme, top-label and classwise) and is "
            f"better than the runner-up {up} ({test}, p {p_text})."
        )
    else:
        why = []
        if s["disagree"]:
            flips = [
                f"{labels[v]} ({name(next(x['best'] for x in s['variants'] if x['variant'] == v))})"
                for v in s["disagree"]
            ]
            why.append(f"other calibrators rank first under {'; '.join(flips)}")
        if not s["separated"]:
            floor = (
                f"; the smallest p-value {s['models']} models allow is {s['p_floor']:.3g}"
                if s["p_floor"] >= ALPHA
                else ""
            )
            why.append(
                f"its difference from the runner-up {up} is not significant ({test}, p "
                f"{p_text}{floor})"
            )
        sentence = (
            f"Not shown robust: {head} has the best average rank on the unbiased ECE under the "
            f"tables' choice, but {' and '.join(why)}: the data cannot separate these "
            "calibrators."
        )
    per_model = [
        {
            "label": ml.get(d["model"], d["model"]),
            "winner": cl.get(d["winner"], d["winner"]),
            "runner_up": cl.get(d["runner_up"], d["runner_up"]),
            "p": "tied" if d["tied"] else format_p(d["p"]),
            "disagree": ", ".join(labels.get(v, v) for v in d["disagree"]) or "none",
            "robust": d["robust"],
        }
        for d in s["per_model"]
    ]
    return {
        "sentence": sentence,
        "robust": s["robust"],
        "headline": head,
        "models": s["models"],
        "table": table,
        "per_model": per_model,
        "n_robust": sum(d["robust"] for d in s["per_model"]),
        "p_first": [{"label": cl.get(m, m), "p": p} for m, p in first],
        "over_models": "the Wilcoxon 1945 signed-rank test of the per-model differences, its "
        "normal approximation with the tie correction"
        if s["p_method"] == "normal"
        else "the exact Wilcoxon 1945 signed-rank test of the\nper-model differences",  # as before
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
