"""View models of the report's tables and figures: plain data the Jinja2 template draws.

Every table becomes a :func:`table_view` (sortable columns, constant label columns named in the
caption, the table's CSV as a ``data:`` URI so the single file works offline); numbers and
names print through :mod:`calbench.display`, CSVs through
:mod:`calbench.table_model`. Reliability diagrams (Guo et al. 2017, fig. 1) are embedded
as base64 PNG.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping, Sequence

from calbench import table_model as G
from calbench.display import (
    display_spec,
    format_value,
    higher_is_better,
    is_descriptive,
    spec_labels,
    without_repository_paths,
)
from calbench.report.overview import comparison_figures, numeric_compare_csv
from calbench.report.tables import Table
from calbench.stats.comparisons import direction


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "table"


def csv_data_uri(text: str) -> str:
    """``data:text/csv`` URI of ``text`` (UTF-8, base64): a download link that works offline."""
    return "data:text/csv;charset=utf-8;base64," + base64.b64encode(text.encode()).decode("ascii")


def _cell(text, sort=None, **extra) -> dict:
    """A table cell for the template: ``text``; ``sort`` (a number) orders a numeric column
    (NaN: a missing value, sorted last); without ``sort`` the column sorts by the text."""
    if sort is None:
        key = None
    else:
        key = repr(float(sort)) if math.isfinite(float(sort)) else ""
    out = {"text": str(text), "sort": key}
    out.update({"ci": "", "bold": False, "tie": False, "mark": "", "bad": False})
    out.update(extra)
    return out


def table_view(
    key: str,
    title: str,
    header: Sequence[str],
    rows: Sequence[Sequence[dict]],
    *,
    n_labels: int,
    caption: str = "",
    csv_text: str | None = None,
) -> dict:
    """Everything the template needs to draw one sortable, downloadable table.

    Label columns (the first ``n_labels``) holding one value in every row are dropped and named
    in the caption instead (no constant columns); ``csv_text`` (default: the printed cells,
    all columns) becomes the table's download link.
    """
    header = list(header)
    if csv_text is None:
        csv_text = G.to_csv(
            G.GridTable(
                title=title,
                row_header=header[:n_labels],
                col_labels=header[n_labels:],
                labels=[[c["text"] for c in r[:n_labels]] for r in rows],
                cells=[[G.Cell(c["text"]) for c in r[n_labels:]] for r in rows],
            )
        )
    keep = list(range(len(header)))
    notes = []
    if len(rows) > 1:
        for c in range(n_labels):
            values = {r[c]["text"] for r in rows}
            if len(values) == 1:
                keep.remove(c)
                notes.append(f"{header[c]}: {next(iter(values))}")
    n_kept_labels = sum(1 for c in keep if c < n_labels)
    return {
        "key": key,
        "id": f"t-{_slug(key)}",
        "title": title,
        "caption": caption,
        "constant": "; ".join(notes),
        "header": [header[c] for c in keep],
        "numeric": [c >= n_labels for c in keep],
        "n_labels": n_kept_labels,
        "rows": [[r[c] for c in keep] for r in rows],
        "csv": csv_data_uri(csv_text),
        "csv_name": f"{_slug(key)}.csv",
    }


def metric_view(table: Table, key: str, companion: Mapping | None = None) -> dict:
    """A metric table (models x calibrators) as a :func:`table_view`; estimates outside their
    interval are marked with a dagger. ``companion`` = ``(label, {(model, calibrator): text})``
    prints a second quantity under each value (a set size's coverage)."""
    scale = display_spec(table.metric)[0]
    extra_label, extra = companion if companion else ("", {})
    rows = []
    for i in range(len(table.row_keys)):
        cells = [_cell(x) for x in table.row_labels[i]]
        # several cells sharing the best printed value are all bold and each says "tie"
        tie = sum(bool(b) for b in table.bold[i]) > 1
        for j in range(len(table.col_keys)):
            v, lo, hi = (float(a[i, j]) for a in (table.values, table.ci_low, table.ci_high))
            outside = math.isfinite(lo) and math.isfinite(hi) and not lo <= v <= hi
            ci = table.ci(i, j)
            more = extra.get((table.row_keys[i], table.col_keys[j]))
            if more:
                ci = f"{ci} {extra_label} {more}".strip()
            cells.append(
                _cell(
                    table.cell(i, j),
                    v * scale,
                    ci=ci,
                    bold=bool(table.bold[i, j]),
                    tie=tie and bool(table.bold[i, j]),
                    mark="†" if outside else "",
                )
            )
        rows.append(cells)
    view = table_view(
        key,
        table.title,
        [*table.row_header, *table.col_labels],
        rows,
        n_labels=len(table.row_header),
        caption=interval_note(table.metric),
        csv_text=G.to_csv(table.grid()),
    )
    view["metric"] = table.metric
    view["descriptive"] = is_descriptive(table.metric)
    return view


def interval_note(metric: str) -> str:
    """One sentence on the metric's interval (``Metric.interval``), from the registry: why it
    has none, or that ``[0, U]`` is a one-sided upper bound."""
    from calbench import stats as S  # lazy: code inputs
    from calbench.metrics import METRICS  # lazy: code inputs

    if metric not in METRICS:
        return ""
    method = S.interval_method(metric)
    if method is None:
        reason = without_repository_paths(S.no_interval_reason(metric)).rstrip(".")
        return f"No interval: {reason}."
    if method == "upper":
        return (
            "Brackets give [0, U], a one-sided upper confidence bound: the error may be 0, and "
            "no two-sided bootstrap interval covered small errors as stated."
        )
    return ""


def study_view(t) -> dict:
    """A calibration-during-training table (:class:`calbench.report.studies.StudyTable`)."""
    rows = []
    for i, row in enumerate(t.rows()):
        cells = [_cell(x) for x in row["labels"]]
        for j, c in enumerate(row["cells"]):
            v = float(t.mean[i, j])
            scale = display_spec(t.columns[j].metric)[0]
            cells.append(_cell(c["text"], v * scale, bold=c["bold"]))
        rows.append(cells)
    return table_view(
        t.key,
        t.title,
        [*t.row_header, *t.col_labels],
        rows,
        n_labels=len(t.row_header),
        csv_text=G.to_csv(t.grid()),
    )


#: What a comparison row says when its test could not reject whatever the data.
CANNOT_REACH = "cannot reach significance: N too small / family too large"

#: Printed names of the paired tests (:data:`calbench.stats.PAIRED_TEST_NAMES`).
TEST_LABELS = {
    "mcnemar_exact": "McNemar exact",
    "paired_t": "paired t",
    "wilcoxon": "Wilcoxon signed-rank",
    "sign_flip": "sign-flip",
    "jackknife_z": "jackknife z",
    "bootstrap": "paired bootstrap",
}


def _float(value, default=math.nan) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def family_label(family: str, cl: Mapping[str, str]) -> str:
    """``vs:ts`` -> ``each vs Temperature scaling``; ``best`` -> ``best on validation vs rest``."""
    if family.startswith("vs:"):
        base = family[3:]
        return f"each vs {cl.get(base, base)}"
    if family == "best":
        return "best on validation vs rest"
    return family or "all"


def verdict(p_holm: float, min_p_holm: float, alpha: float) -> str:
    """``significant``, :data:`CANNOT_REACH` (the smallest attainable adjusted p-value is above
    ``alpha``) or ``not significant``."""
    if math.isfinite(p_holm) and p_holm < alpha:
        return "significant"
    if math.isfinite(min_p_holm) and min_p_holm > alpha:
        return CANNOT_REACH
    return "not significant"


def comparison_families(compare: Sequence[Mapping]) -> list[dict]:
    """The comparison rows with Holm's adjustment over each (dataset, model, metric)'s distinct
    pairs (:func:`calbench.stats.comparisons.holm_family`).

    Rows of ``calbench compare`` carry ``family`` (the question), ``family_size``, ``p_holm`` and
    ``min_p_holm``, adjusted that way. Rows without an adjustment (older files) or adjusted per
    question (older files, where a pair asked by two questions could carry two adjusted
    p-values and two verdicts) are adjusted here (Holm 1979) over the distinct pairs, each pair's
    first p-value standing for its rows; a bootstrap p-value without a recorded floor gets the
    smallest attainable adjusted p-value ``m 2 / (B + 1)``. Returns one dict per row with
    ``p_holm``, ``min_p_holm``, ``family`` and ``family_size`` filled in: every row of one pair
    on one model and metric carries the same ``p_value`` and ``p_holm``.
    """
    from calbench import stats as S  # lazy: code inputs

    out = [dict(r) for r in compare]
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(out):
        groups.setdefault((r.get("dataset"), r.get("model"), r.get("metric")), []).append(i)
    for idx in groups.values():
        pair_of = {i: frozenset((out[i].get("method"), out[i].get("baseline"))) for i in idx}
        first: dict[frozenset, int] = {}
        for i in idx:
            first.setdefault(pair_of[i], i)
        m = len(first)
        held: dict[frozenset, set] = {}
        for i in idx:
            held.setdefault(pair_of[i], set()).add(_float(out[i].get("p_holm")))
        need = any(not math.isfinite(_float(out[i].get("p_holm"))) for i in idx) or any(
            len(v) > 1 for v in held.values()
        )
        if need:
            adjusted = S.holm([_float(out[i]["p_value"]) for i in first.values()])
            by_pair = dict(zip(first, adjusted, strict=True))
        for i in idx:
            r = out[i]
            if need:
                lead = out[first[pair_of[i]]]
                r["p_value"] = _float(lead["p_value"])
                r["p_holm"] = float(by_pair[pair_of[i]])
                floor, size = _float(lead.get("min_p_holm")), _float(lead.get("family_size"))
                if math.isfinite(floor) and math.isfinite(size) and size > 0:
                    # the attainable floor scales with the family: m min_p
                    r["min_p_holm"] = min(1.0, floor * m / size)
                r["family_size"] = m
            r["family_size"] = int(_float(r.get("family_size"), m))
            r["p_holm"] = _float(r["p_holm"])
            if not math.isfinite(_float(r.get("min_p_holm"))):
                b = _float(r.get("n_resamples"))
                r["min_p_holm"] = (
                    min(1.0, r["family_size"] * 2.0 / (b + 1)) if math.isfinite(b) else math.nan
                )
                r.setdefault("test", "bootstrap")
            r["min_p_holm"] = _float(r["min_p_holm"])
            r["family"] = r.get("family") or ""
    return out


#: The most models the comparisons' heatmaps draw (one column per model): past it a heatmap
#: no longer reads as one figure and costs ~1 s of the report per metric and question (16
#: calibrators x 100 models: 1,600 printed cells each); "Verdicts over models" summarises such
#: a study, and the full table's CSV lists every comparison.
HEATMAP_MODELS = 30
#: The most rows of the comparisons' full table the page holds (the first ones, in the study's
#: model order); its CSV holds every row (100 models x 16 calibrators: 18,000 rows, 14 MB).
COMPARE_TABLE_ROWS = 2000

#: the proper scores whose paired difference against uncalibrated is a change in calibration
#: error when the calibrator's map is injective (Gruber & Buettner 2022)
PROPER_SCORES = ("nll", "brier")
#: the baseline of that reading: the model's own probabilities
UNCALIBRATED = "uncalibrated"


def proper_reading(row: Mapping, spec: Mapping) -> str:
    """How a comparison row of a proper score (:data:`PROPER_SCORES`) between a calibrator and
    uncalibrated reads: a proper score's difference between a recalibration and the
    probabilities it maps is the change in (proper) calibration error when the map is injective
    (it keeps the refinement part; Gruber & Buettner 2022), else a change in score that may
    include refinement. Injectivity is the calibrator class's registry fact
    (``Calibrator.injective``: every fitted instance injective); a class that does not promise
    it is not read as a calibration-error change, since the comparison rows do not record the
    fitted instance's own check (``is_injective()``). ``""`` for other rows."""
    from calbench.calibrators import REGISTRY  # lazy: code inputs

    pair = {row.get("method"), row.get("baseline")}
    if row.get("metric") not in PROPER_SCORES or UNCALIBRATED not in pair or len(pair) != 2:
        return ""
    (other,) = pair - {UNCALIBRATED}
    method = str(((spec.get("calibrators") or {}).get(other) or {}).get("method") or other)
    cls = REGISTRY.get(method)
    if cls is not None and getattr(cls, "injective", False) is True:
        return "calibration error change (injective)"
    if cls is None:
        return "score change only (unregistered)"
    return "score change only (not known injective)"


def compare_view(compare: Sequence[Mapping], spec: Mapping, level: float) -> dict | None:
    """Paired comparisons, Holm-adjusted per model and metric (:func:`comparison_families`),
    each with its test, family size and verdict (:func:`verdict`)."""
    from calbench.report.ranks import metric_name  # lazy: code inputs
    from calbench.report.summary import format_p  # lazy: code inputs

    if not compare:
        return None
    ml, cl, _, mdl = spec_labels(spec)
    alpha = 1.0 - level
    rows = []
    families: dict[str, set] = {}
    n_cannot = n_significant = n_proper = 0
    adjusted = comparison_families(compare)
    for r in adjusted:
        m = r["metric"]
        scale = display_spec(m)[0]
        d, lo, hi = float(r["difference"]), _float(r["ci_low"]), _float(r["ci_high"])
        p_adj, m_size = r["p_holm"], r["family_size"]
        said = verdict(p_adj, r["min_p_holm"], alpha)
        # older comparison files carry no direction: the sign of the difference gives it
        way = str(r.get("direction") or direction(d, higher_is_better(m)))
        floor = _float(r.get("p_floor"), 0.0)
        floor = floor if math.isfinite(floor) else 0.0
        shown = f"significant, {way}" if said == "significant" and way else said
        n_cannot += said == CANNOT_REACH
        n_significant += said == "significant"
        fam = family_label(r["family"], cl)
        families.setdefault(fam, set()).add(m_size)
        interval = (
            f"[{format_value(m, lo)}, {format_value(m, hi)}]"
            if math.isfinite(lo) and math.isfinite(hi)
            else "none"
        )
        reads = proper_reading(r, spec)
        n_proper += bool(reads)  # a proper score against uncalibrated
        rows.append(
            [
                _cell(mdl.get(r["model"], r["dataset"])),
                _cell(ml.get(r["model"], r["model"])),
                _cell(display_spec(m)[2]),
                _cell(fam),
                _cell(cl.get(r["method"], r["method"])),
                _cell(cl.get(r["baseline"], r["baseline"])),
                _cell(format_value(m, float(r["value"])), float(r["value"]) * scale),
                _cell(
                    format_value(m, float(r["baseline_value"])),
                    float(r["baseline_value"]) * scale,
                ),
                _cell(
                    format_value(m, d, signed=True),
                    d * scale,
                    bold=said == "significant" and way == "better",
                    bad=said == "significant" and way == "worse",
                ),
                _cell(interval, lo * scale),
                _cell(reads),
                _cell(TEST_LABELS.get(r.get("test", ""), r.get("test", ""))),
                _cell(format_p(float(r["p_value"]), floor), float(r["p_value"])),
                _cell(f"{format_p(p_adj, m_size * floor)} (m = {m_size})", p_adj),
                _cell(shown, bad=said == CANNOT_REACH),
            ]
        )
    header = [
        "Dataset",
        "Model",
        "Metric",
        "Question",
        "Calibrator",
        "Against",
        "Value",
        "Against: value",
        "Difference",
        f"{level * 100:g}% interval",
        "Reads as",
        "Test",
        "p",
        "p (Holm, model and metric)",
        "Verdict",
    ]
    view = table_view(
        "comparisons",
        "Paired comparisons on the test half",
        header,
        rows[:COMPARE_TABLE_ROWS],
        n_labels=6,
        csv_text=numeric_compare_csv(adjusted, spec, alpha),
    )
    n_models = len({(r["dataset"], r["model"]) for r in adjusted})
    drawn = n_models <= HEATMAP_MODELS
    view["figures"] = comparison_figures(adjusted, spec, alpha) if drawn else []
    view["n_models"] = n_models
    view["heatmap_models"] = HEATMAP_MODELS
    view["n_rows_shown"] = min(len(rows), COMPARE_TABLE_ROWS)
    view["n"] = len(rows)
    view["n_significant"] = n_significant
    view["n_proper"] = n_proper
    view["n_cannot"] = n_cannot
    view["alpha"] = f"{alpha:g}"
    view["cannot_reach"] = CANNOT_REACH
    view["families"] = [
        {"label": k, "sizes": ", ".join(str(x) for x in sorted(v))} for k, v in families.items()
    ]
    view["resamples"] = sorted({str(r.get("n_resamples", "")) for r in compare} - {""})
    view["permutations"] = sorted(
        {str(r.get("n_permutations", "")) for r in compare} - {"", "0"}, key=_float
    )
    view["tests"] = sorted({TEST_LABELS.get(r.get("test", ""), "") for r in compare} - {""})
    view["nulls"] = [
        {"test": TEST_LABELS.get(t, t), "null": h}
        for t, h in sorted({(r.get("test", ""), r.get("null_hypothesis", "")) for r in compare})
        if t and h
    ]
    view["n_floor"] = sum(
        1
        for r in compare
        if _float(r.get("p_floor"), 0.0) > 0
        and _float(r["p_value"]) <= _float(r.get("p_floor")) * (1 + 1e-9)
    )
    view["metrics"] = sorted({metric_name(r["metric"]) for r in compare})
    view["selected_on"] = sorted({str(r.get("selected_on", "")) for r in compare} - {""})
    return view


def temperature_view(temperatures: Mapping[str, float], spec: Mapping) -> dict | None:
    if not temperatures:
        return None
    ml, _, _, mdl = spec_labels(spec)
    order = [m for m in spec.get("models", {}) if m in temperatures] or list(temperatures)
    rows = [
        [
            _cell(mdl.get(m, "")),
            _cell(ml.get(m, m)),
            _cell(f"{temperatures[m]:.3f}", temperatures[m]),
        ]
        for m in order
    ]
    return table_view(
        "temperatures",
        "Fitted temperature per model",
        ["Dataset", "Model", "Temperature T"],
        rows,
        n_labels=2,
        caption="T > 1 softens over-confident predictions, T < 1 sharpens under-confident ones.",
    )


def reference_view(reference: Sequence[Mapping], spec: Mapping) -> dict | None:
    """Ours versus published numbers (rows of ``results/tables/reference.csv``, written by
    :func:`calbench.report.build.aggregate`), one row per published cell."""
    if not reference:
        return None
    ml, cl, dl, _ = spec_labels(spec)
    rows = []
    for r in reference:
        m = r["metric"]
        scale = display_spec(m)[0]
        within = "–" if r["within"] is None else ("yes" if r["within"] else "no")
        rows.append(
            [
                _cell(dl.get(r["dataset"], r["dataset"])),
                _cell(ml.get(r["model"], r["model"])),
                _cell(cl.get(r["method"], r["method"])),
                _cell(display_spec(m)[2]),
                _cell(format_value(m, r["ours"]), r["ours"] * scale),
                _cell(format_value(m, r["theirs"]), r["theirs"] * scale),
                _cell(format_value(m, r["difference"]), r["difference"] * scale),
                _cell("" if r["tolerance"] is None else format_value(m, r["tolerance"])),
                _cell(within, bad=within == "no"),
            ]
        )
    header = [
        "Dataset",
        "Model",
        "Calibrator",
        "Metric",
        "Ours",
        "Published",
        "Difference",
        "Tolerance",
        "Within",
    ]
    return table_view("published", "Ours versus published numbers", header, rows, n_labels=4)
