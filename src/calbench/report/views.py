"""View models of the report's tables and figures: plain data the Jinja2 template draws.

Every table becomes a :func:`table_view` (sortable columns, constant label columns named in the
caption, the table's CSV as a ``data:`` URI so the single file works offline); numbers and
names print through :mod:`calbench.report.display`, CSVs through
:mod:`calbench.report.table_model`. Reliability diagrams (Guo et al. 2017, fig. 1) are embedded
as base64 PNG.
"""

from __future__ import annotations

import base64
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from calbench.report import table_model as G
from calbench.report.display import display_spec, format_value, spec_labels
from calbench.report.tables import Table


def png_data_uri(path: str | os.PathLike) -> str:
    """``data:image/png;base64,...`` for a PNG file (refuses anything that is not a PNG)."""
    data = Path(path).read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError(f"{path} is not a PNG file; regenerate it with calbench plot-reliability")
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "table"


def csv_data_uri(text: str) -> str:
    """``data:text/csv`` URI of ``text`` (UTF-8, base64): a download link that works offline."""
    return "data:text/csv;charset=utf-8;base64," + base64.b64encode(text.encode()).decode("ascii")


def _cell(text, sort=None, **extra) -> dict:
    """A table cell for the template: ``text``; ``sort`` (number) orders numeric columns."""
    out = {"text": str(text), "sort": "" if sort is None else repr(float(sort))}
    out.update({"ci": "", "bold": False, "mark": "", "bad": False})
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


def metric_view(table: Table, key: str) -> dict:
    """A metric table (models x calibrators) as a :func:`table_view`; estimates outside their
    interval are marked with a dagger."""
    scale = display_spec(table.metric)[0]
    rows = []
    for i in range(len(table.row_keys)):
        cells = [_cell(x) for x in table.row_labels[i]]
        for j in range(len(table.col_keys)):
            v, lo, hi = (float(a[i, j]) for a in (table.values, table.ci_low, table.ci_high))
            outside = math.isfinite(lo) and math.isfinite(hi) and not lo <= v <= hi
            cells.append(
                _cell(
                    table.cell(i, j),
                    v * scale if math.isfinite(v) else None,
                    ci=table.ci(i, j),
                    bold=bool(table.bold[i, j]),
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
        csv_text=G.to_csv(table.grid()),
    )
    view["metric"] = table.metric
    return view


def study_view(t) -> dict:
    """A calibration-during-training table (:class:`calbench.report.studies.StudyTable`)."""
    rows = []
    for i, row in enumerate(t.rows()):
        cells = [_cell(x) for x in row["labels"]]
        for j, c in enumerate(row["cells"]):
            v = float(t.mean[i, j])
            scale = display_spec(t.columns[j].metric)[0]
            cells.append(_cell(c["text"], v * scale if math.isfinite(v) else None, bold=c["bold"]))
        rows.append(cells)
    return table_view(
        t.key,
        t.title,
        [*t.row_header, *t.col_labels],
        rows,
        n_labels=len(t.row_header),
        csv_text=G.to_csv(t.grid()),
    )


def compare_view(compare: Sequence[Mapping], spec: Mapping, level: float) -> dict | None:
    """Paired comparisons with Holm-adjusted p-values over all rows of the report."""
    from calbench import stats as S
    from calbench.report.summary import format_p, metric_name

    if not compare:
        return None
    ml, cl, _, mdl = spec_labels(spec)
    holm = S.holm([float(r["p_value"]) for r in compare])
    rows = []
    for r, p_adj in zip(compare, holm, strict=True):
        m = r["metric"]
        scale = display_spec(m)[0]
        d, lo, hi = float(r["difference"]), float(r["ci_low"]), float(r["ci_high"])
        rows.append(
            [
                _cell(mdl.get(r["model"], r["dataset"])),
                _cell(ml.get(r["model"], r["model"])),
                _cell(display_spec(m)[2]),
                _cell(cl.get(r["method"], r["method"])),
                _cell(cl.get(r["baseline"], r["baseline"])),
                _cell(format_value(m, float(r["value"])), float(r["value"]) * scale),
                _cell(
                    format_value(m, float(r["baseline_value"])),
                    float(r["baseline_value"]) * scale,
                ),
                _cell(format_value(m, d), d * scale, bold=bool(p_adj < 1 - level)),
                _cell(f"[{format_value(m, lo)}, {format_value(m, hi)}]", lo * scale),
                _cell(format_p(float(r["p_value"])), float(r["p_value"])),
                _cell(format_p(float(p_adj)), float(p_adj)),
            ]
        )
    header = [
        "Dataset",
        "Model",
        "Metric",
        "Best on validation",
        "Baseline",
        "Best",
        "Baseline value",
        "Difference",
        f"{level * 100:g}% interval",
        "p",
        "p (Holm)",
    ]
    view = table_view("comparisons", "Best calibrator versus baselines", header, rows, n_labels=5)
    view["n"] = len(rows)
    view["resamples"] = sorted({str(r.get("n_resamples", "")) for r in compare} - {""})
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


def reliability_figures(plots: Mapping, grids: Mapping, rows, spec) -> list[dict]:
    """Per model: the default panels (uncalibrated, temperature scaling and the calibrator with
    the lowest validation ECE) and the others; falls back to the per-model grid."""
    ml, cl, _, _ = spec_labels(spec)
    order = list(spec.get("calibrators", {}))
    val_ece = {
        (r["model"], r["method"]): float(r["value"])
        for r in rows
        if r["metric"] == "ece" and r.get("half") == "val"
    }
    out = []
    keys = list(plots) or list(grids)
    for key in keys:
        model = key.split("/", 1)[-1]
        entry = {"id": f"rd-{_slug(key)}", "model": ml.get(model, model), "shown": [], "more": []}
        per = plots.get(key) or {}
        if per:
            methods = [c for c in order if c in per] + [c for c in per if c not in order]
            scored = [c for c in methods if (model, c) in val_ece]
            best = min(scored, key=lambda c: val_ece[(model, c)]) if scored else None
            default = [c for c in ("uncalibrated", "ts", best) if c in per]
            default = list(dict.fromkeys(default))
            for c in methods:
                fig = {
                    "label": cl.get(c, c) + (" (lowest validation ECE)" if c == best else ""),
                    "src": png_data_uri(per[c]),
                }
                (entry["shown"] if c in default else entry["more"]).append(fig)
        elif key in grids:
            entry["shown"].append({"label": "all calibrators", "src": png_data_uri(grids[key])})
        out.append(entry)
    return out


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
