"""The report's first screen and its figures of many numbers at once.

* :func:`findings_view`: the findings as the template shows them, per metric family with their
  direction and size, and a separate "To check" list. It adapts what
  :func:`calbench.report.summary.findings` returns: a list of dicts ``{family, text, direction,
  size, support}`` (``support`` "supported" or "to check"), or the older
  ``{"headlines": [...], "anomalies": [...]}`` of sentences.
* :func:`comparison_figures`: one heatmap per compared metric and family of the paired
  comparisons (calibrator x model, difference against the baseline, significance after Holm's
  correction; :func:`calbench.plots.compare.difference_heatmap`), instead of a row per test.
* :func:`rank_overview`: the average ranks of every calibrator on every ranked metric in one
  figure (:func:`calbench.plots.compare.rank_heatmap`).
* :func:`glossary`: one line per printed metric from its registry entry (name, direction,
  source, whether its differences are verdicts or descriptive only).
* :func:`numeric_compare_csv`: the full comparison table as numbers (no display strings).

Figures are embedded as deterministic SVG (:func:`calbench.plots.figure_svg`).
"""

from __future__ import annotations

import base64
import csv
import io
import math
from collections.abc import Mapping, Sequence

from calbench.display import display_spec, higher_is_better, is_descriptive, spec_labels
from calbench.results import NUMERIC_COMPARE_COLUMNS


def svg_data_uri(fig) -> str:
    """``data:image/svg+xml;base64,...`` of a figure (byte-identical for the same figure)."""
    from calbench import plots  # lazy: code inputs

    return "data:image/svg+xml;base64," + base64.b64encode(plots.figure_svg(fig)).decode("ascii")


# --------------------------------------------------------------------------------------------
# findings
# --------------------------------------------------------------------------------------------
#: Arrows the template prints for a finding's direction.
ARROWS = {"better": "▲", "worse": "▼", "mixed": "±", "same": "=", "": ""}


def findings_view(found, labels: Mapping[str, str] | None = None) -> dict:
    """``{"families": [{"family", "found": [{"text", "direction", "arrow", "size"}]}],
    "to_check": [text, ...]}`` from the findings of :mod:`calbench.report.summary` in any of
    its forms (see the module docstring; a dict with ``items`` holds the list); ``labels``
    name the calibrators of ``vs:<baseline>`` families."""
    items: list[dict] = []
    if isinstance(found, Mapping) and "items" in found:  # {"items": [...], ...}
        items = [dict(f) for f in found["items"]]
    elif isinstance(found, Mapping):  # {"headlines": [...], "anomalies": [...]}
        items += [
            {"family": "", "text": t, "direction": "", "size": "", "support": "supported"}
            for t in found.get("headlines", [])
        ]
        items += [
            {"family": "", "text": t, "direction": "", "size": "", "support": "to check"}
            for t in found.get("anomalies", [])
        ]
    else:
        items = [dict(f) for f in found]
    families: dict[str, list[dict]] = {}
    to_check = []
    for f in items:
        if str(f.get("support", "supported")) != "supported":
            to_check.append(str(f.get("text", "")))
            continue
        direction = str(f.get("direction") or "")
        size = f.get("size")  # a number is already in the sentence; a string is printed
        families.setdefault(str(f.get("family") or ""), []).append(
            {
                "text": str(f.get("text", "")),
                "direction": direction,
                "arrow": ARROWS.get(direction, ""),
                "size": size if isinstance(size, str) else "",
            }
        )
    return {
        "families": [
            {"family": family_title(k, labels or {}), "found": v} for k, v in families.items()
        ],
        "to_check": to_check,
    }


#: Headings of the findings' families (``vs:<baseline>`` is "Against <baseline>").
FAMILY_TITLES = {
    "partitions": "Over partitions",
    "ranks": "Ranks",
    "best": "The best pick (chosen without the samples it is tested on), tested",
    "accuracy": "Accuracy",
    "calibrated": "Calibrated within δ",
    "precision": "Precision",
    "robustness": "Robustness",
}


def family_title(family: str, labels: Mapping[str, str]) -> str:
    """The heading of a findings family (empty for findings without one)."""
    if family.startswith("vs:"):
        base = family[3:]
        return f"Against {labels.get(base, base)}"
    return FAMILY_TITLES.get(family, family)


# --------------------------------------------------------------------------------------------
# comparisons
# --------------------------------------------------------------------------------------------
def _unit(metric: str) -> str:
    scale, _, label = display_spec(metric)
    return "percentage points" if scale == 100.0 or label.endswith("%") else "units"


def comparison_figures(rows: Sequence[Mapping], spec: Mapping, alpha: float) -> list[dict]:
    """One heatmap per (family, metric) of the comparison rows (already Holm-adjusted,
    :func:`calbench.report.views.comparison_families`): rows are the calibrators compared,
    columns the models, cells the difference in the metric's printed unit, starred and in full
    colour when significant (adjusted p < ``alpha``). In a ``vs:<baseline>`` family the cell is
    ``calibrator - baseline``; in the ``best`` family (the calibrator best on the validation
    half against each other one) it is ``calibrator - best``, so in both a blue cell means the
    row's calibrator is better. Returns ``[{"family", "metric", "label", "title", "figure",
    "alt", "descriptive"}]`` in the order the families and metrics first appear;
    ``descriptive`` marks a metric whose registry fact ``verdicts`` is False (comparison files
    written before plug-in errors were refused as compared metrics)."""
    from calbench.plots.compare import difference_heatmap  # lazy: code inputs

    ml, cl, _, _ = spec_labels(spec)
    model_order = list(spec.get("models", {}))
    method_order = list(spec.get("calibrators", {}))
    groups: dict[tuple[str, str], list[Mapping]] = {}
    for r in rows:
        groups.setdefault((r["family"], r["metric"]), []).append(r)
    out = []
    for (family, metric), members in groups.items():
        best = family == "best"
        key = "baseline" if best else "method"
        models = [m for m in model_order if any(r["model"] == m for r in members)]
        models += sorted({r["model"] for r in members} - set(models))
        methods = [c for c in method_order if any(r[key] == c for r in members)]
        methods += sorted({r[key] for r in members} - set(methods))
        scale, decimals, _ = display_spec(metric)
        d = [[math.nan] * len(models) for _ in methods]
        sig = [[False] * len(models) for _ in methods]
        chosen: dict[str, str] = {}
        for r in members:
            i, j = methods.index(r[key]), models.index(r["model"])
            diff = float(r["difference"]) * scale
            d[i][j] = -diff if best else diff
            sig[i][j] = math.isfinite(r["p_holm"]) and r["p_holm"] < alpha
            chosen[r["model"]] = r["method"]
        cols = [ml.get(m, m) for m in models]
        label = display_spec(metric)[2].split(",")[0]
        if best:
            cols = [
                f"{c} (best: {cl.get(chosen[m], chosen[m])})"
                for c, m in zip(cols, models, strict=True)
            ]
            what = "calibrator − the one best on the validation half"
            title = f"{label}: each calibrator against the best on validation"
        else:
            base = family[3:] if family.startswith("vs:") else family
            what = f"calibrator − {cl.get(base, base)}"
            title = f"{label}: difference against {cl.get(base, base)}"
        fig = difference_heatmap(
            d,
            sig,
            [cl.get(c, c) for c in methods],
            cols,
            higher_is_better=higher_is_better(metric),
            decimals=max(1, min(decimals, 3)),
            title=title,
            note=f"{what}, {_unit(metric)}\n* significant (Holm, α = {alpha:g})",
        )
        out.append(
            {
                "family": family,
                "metric": metric,
                "label": label,
                "title": title,
                "figure": svg_data_uri(fig),
                "alt": f"Heatmap of {title}",
                "descriptive": is_descriptive(metric),
            }
        )
    return out


def _num(x) -> str:
    """A number as CSV text: ``repr`` of the float (exact, round-trips); empty when missing."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return ""
    return repr(v) if math.isfinite(v) else ""


def numeric_compare_csv(rows: Sequence[Mapping], spec: Mapping, alpha: float) -> str:
    """The comparison table as numbers: values as fractions (the metric CSVs' unit), p-values
    unrounded, ``min_p_holm`` the smallest adjusted p-value the test could reach (the floor a
    permutation p-value cannot go below), ``significant`` and ``can_reach_significance`` as
    0/1; a missing number is an empty cell. Names are the report's display names."""
    ml, cl, _, mdl = spec_labels(spec)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(NUMERIC_COMPARE_COLUMNS)
    for r in rows:
        p_holm, floor = float(r["p_holm"]), float(r["min_p_holm"])
        w.writerow(
            [
                mdl.get(r["model"], r["dataset"]),
                ml.get(r["model"], r["model"]),
                r["metric"],
                r["family"],
                cl.get(r["method"], r["method"]),
                cl.get(r["baseline"], r["baseline"]),
                _num(r["value"]),
                _num(r["baseline_value"]),
                _num(r["difference"]),
                _num(r.get("ci_low")),
                _num(r.get("ci_high")),
                r.get("test", ""),
                _num(r["p_value"]),
                _num(p_holm),
                int(r["family_size"]),
                _num(floor),
                int(math.isfinite(p_holm) and p_holm < alpha),
                "" if not math.isfinite(floor) else int(floor <= alpha),
            ]
        )
    return buf.getvalue()


# --------------------------------------------------------------------------------------------
# ranks
# --------------------------------------------------------------------------------------------
def rank_overview(ranks: Sequence[Mapping]) -> str:
    """The average ranks of :func:`calbench.report.summary.rank_summaries` as one heatmap
    (calibrators ordered by their mean of average ranks over the metrics; columns the ranked
    metrics), as an SVG data URI; empty without ranks."""
    from calbench.plots.compare import rank_heatmap  # lazy: code inputs

    if not ranks:
        return ""
    labels: dict[str, str] = {}
    table: dict[str, dict[str, float]] = {}
    for entry in ranks:
        for m in entry["methods"]:
            labels[m["key"]] = m["label"]
            table.setdefault(m["key"], {})[entry["metric"]] = m["rank"]
    metrics = [e["metric"] for e in ranks]
    mean = {k: sum(v.values()) / len(v) for k, v in table.items()}
    order = sorted(table, key=lambda k: (mean[k], labels[k]))
    values = [[table[k].get(m, math.nan) for m in metrics] for k in order]
    n = max(e["n"] for e in ranks)
    fig = rank_heatmap(
        values,
        [labels[k] for k in order],
        [e["label"] for e in ranks],
        title=f"Average rank per metric over {n} models (1 = best)",
        note="Rows ordered by the mean of their average ranks; blue = better ranks.",
    )
    return svg_data_uri(fig)


# --------------------------------------------------------------------------------------------
# glossary
# --------------------------------------------------------------------------------------------
def glossary(metrics: Sequence[str]) -> list[dict]:
    """One line per printed metric from its registry entry (:data:`calbench.metrics.METRICS`):
    its printed name, which direction is better, its source, and whether it is
    ``descriptive`` (the registry's ``verdicts`` fact False: no better/worse verdict is drawn
    from it; a registry without the fact counts as True)."""
    from calbench.metrics import METRICS  # lazy: code inputs

    out = []
    for name in dict.fromkeys(metrics):
        m = METRICS.get(name)
        if m is None:
            continue
        out.append(
            {
                "metric": name,
                "label": display_spec(name)[2],
                "direction": "higher is better" if m.higher_is_better else "lower is better",
                "reference": str(m.reference or ""),
                "descriptive": is_descriptive(name),
            }
        )
    return out
