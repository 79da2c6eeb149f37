"""Reproduced vs published numbers in the coursework's table layout (Vasilev, MSU 2021, Tables 3-14).

One table per (metric, group): rows = models (group 1: dataset, model; group 2: dataset, model,
training loss), columns = calibrators; each cell holds our test-half value, the published one and
their difference, printed in the study's units (percent for ACC/ECE/cwECE/MCE, as in
:data:`calbench.display.DISPLAY`). A cell is *flagged* when ``|ours - published|`` exceeds
the metric's tolerance (a fraction), *expected* when it is flagged but its calibrator is one
the replication notes say cannot be reproduced to the digit (M-scaling-b: unregularised
LBFGS, section 0.6), *missing* when either value is absent.

:func:`accuracy_check` compares each model's full-test-set top-1 accuracy (from its cached
logits) with the accuracy the study measured (registry field ``expected_acc``): the first sign
of a wrong checkpoint, preprocessing or sample order.

The tables are written by the report's writers (:mod:`calbench.table_model`): one
:class:`~calbench.table_model.GridTable` per table (:func:`grid`), each cell's status as
its HTML class. Pure functions on plain rows (dicts); no pandas, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from calbench import table_model as G
from calbench.display import calibrator_labels, dataset_labels, display_spec, format_value
from calbench.results import REPLICATION_CELL_COLUMNS, long_csv_text

OK, FLAGGED, EXPECTED, MISSING = "ok", "differs", "expected to differ", "missing"
#: Calibrators whose published values are not expected to be reproducible (notes section 0.6).
EXPECTED_TO_DIFFER = ("ms_b",)


def cell_status(
    ours: float | None,
    published: float | None,
    tolerance: float | None,
    method: str,
    expected_to_differ: Iterable[str] = EXPECTED_TO_DIFFER,
) -> str:
    """``ok`` / ``differs`` / ``expected to differ`` / ``missing`` for one cell (values as fractions)."""
    if ours is None or published is None or not (math.isfinite(ours) and math.isfinite(published)):
        return MISSING
    if tolerance is None or abs(ours - published) <= tolerance:
        return OK
    return EXPECTED if method in set(expected_to_differ) else FLAGGED


def comparison_rows(
    metrics_rows: Sequence[Mapping],
    reference_rows: Sequence[Mapping],
    spec: Mapping,
    *,
    half: str = "test",
) -> list[dict]:
    """Long rows (:data:`calbench.results.REPLICATION_CELL_COLUMNS`) of every (metric, model,
    calibrator) cell of ``spec``.

    ``metrics_rows``: the aggregated metrics (``dataset, model, method, half, metric, value``,
    fractions). ``reference_rows``: published ``dataset, model, method, metric, value`` keyed like
    the config, in ``spec['reference']['units']`` (``display`` = printed scale, or ``fraction``).
    ``spec``: ``models`` {name: {dataset, group, display: {name, loss}}}, ``calibrators``
    {slug: {display}}, ``table_metrics``, ``reference`` {units, tolerances},
    optional ``expected_to_differ`` (calibrator slugs).
    """
    ref_spec = spec.get("reference") or {}
    units = ref_spec.get("units", "fraction")
    if units not in ("fraction", "display"):
        raise ValueError(f"reference units must be 'fraction' or 'display', got {units!r}")
    tolerances = ref_spec.get("tolerances") or {}
    differ = spec.get("expected_to_differ", EXPECTED_TO_DIFFER)
    ours = {
        (r["model"], r["method"], r["metric"]): float(r["value"])
        for r in metrics_rows
        if r.get("half", half) == half
    }
    theirs = {}
    for r in reference_rows:
        v = float(r["value"])
        if units == "display":
            v /= display_spec(r["metric"])[0]
        theirs[(r["model"], r["method"], r["metric"])] = v
    out = []
    for metric in spec.get("table_metrics") or []:
        for model, m in (spec.get("models") or {}).items():
            display = m.get("display") or {}
            for method in spec.get("calibrators") or {}:
                a = ours.get((model, method, metric))
                b = theirs.get((model, method, metric))
                tol = tolerances.get(metric)
                out.append(
                    {
                        "group": m.get("group") or 1,
                        "metric": metric,
                        "dataset": m["dataset"],
                        "model": model,
                        "loss": display.get("loss", m.get("loss", "")) or "",
                        "method": method,
                        "ours": a,
                        "published": b,
                        "difference": None if a is None or b is None else a - b,
                        "tolerance": tol,
                        "status": cell_status(a, b, tol, method, differ),
                    }
                )
    return out


def tables(rows: Sequence[Mapping], spec: Mapping) -> list[dict]:
    """Group :func:`comparison_rows` into the study's tables: one per (metric, group), rows in
    config order, columns = calibrators. Each table: ``metric, group, title, header, rows``;
    each row ``labels`` + ``cells`` (``ours, published, difference, status`` as printed text)."""
    dl = dataset_labels(spec)
    cl = calibrator_labels(spec)
    models = spec.get("models") or {}
    calibrators = spec.get("calibrators") or {}
    by_key: dict[tuple, dict] = {}
    for r in rows:
        by_key[(r["metric"], r["group"], r["model"], r["method"])] = r
    out = []
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    groups = sorted({r["group"] for r in rows})
    for metric in metrics:
        for group in groups:
            members = [m for m in models if (models[m].get("group") or 1) == group]
            members = [
                m for m in members if any((metric, group, m, c) in by_key for c in calibrators)
            ]
            if not members:
                continue
            with_loss = any(
                by_key[(metric, group, m, next(iter(calibrators)))]["loss"] for m in members
            )
            header = ["Dataset", "Model", *(["Loss"] if with_loss else [])]
            table_rows = []
            for m in members:
                d = models[m]
                dname = dl.get(d["dataset"]) or d["dataset"]
                name = (d.get("display") or {}).get("name") or m
                cells = []
                for c in calibrators:
                    r = by_key[(metric, group, m, c)]
                    cells.append(
                        {
                            "ours": format_value(metric, r["ours"]),
                            "published": format_value(metric, r["published"]),
                            "difference": format_value(metric, r["difference"], signed=True),
                            "status": r["status"],
                        }
                    )
                first = by_key[(metric, group, m, next(iter(calibrators)))]
                labels = [dname, name, *([first["loss"]] if with_loss else [])]
                table_rows.append({"key": m, "labels": labels, "cells": cells})
            out.append(
                {
                    "metric": metric,
                    "group": group,
                    "title": f"{display_spec(metric)[2]}, group {group}: ours / published / difference",
                    "header": header,
                    "columns": [cl.get(c, c) for c in calibrators],
                    "rows": table_rows,
                }
            )
    return out


def accuracy_check(
    accuracies: Mapping[str, tuple[int, float]],
    spec: Mapping,
    *,
    tolerance_pp: float = 0.1,
) -> list[dict]:
    """Each model's full-test-set top-1 accuracy (``accuracies[model] = (n, fraction)``) against
    ``spec['models'][model]['expected_acc']`` (percent): rows ``model, dataset, n, ours,
    expected, difference`` (percent / percentage points) and ``status``."""
    if not (isinstance(tolerance_pp, int | float) and tolerance_pp >= 0):
        raise ValueError(f"tolerance_pp must be a number >= 0, got {tolerance_pp!r}")
    out = []
    for model, m in (spec.get("models") or {}).items():
        n, acc = accuracies.get(model, (0, float("nan")))
        ours = 100.0 * acc
        expected = m.get("expected_acc")
        if expected is None or not math.isfinite(ours):
            status, diff = MISSING, float("nan")
        else:
            diff = ours - float(expected)
            status = OK if abs(diff) <= tolerance_pp + 1e-9 else FLAGGED
        out.append(
            {
                "model": model,
                "dataset": m["dataset"],
                "n": n,
                "ours": ours,
                "expected": float("nan") if expected is None else float(expected),
                "difference": diff,
                "tolerance": tolerance_pp,
                "status": status,
            }
        )
    return out


# --------------------------------------------------------------------------- output formats


def long_csv(rows: Sequence[Mapping], columns: Sequence[str] = REPLICATION_CELL_COLUMNS) -> str:
    """CSV text of ``rows`` (floats at full precision, None/NaN empty)."""
    return long_csv_text(rows, columns)


def _cell_text(cell: Mapping) -> str:
    mark = {OK: "", FLAGGED: " ⚠", EXPECTED: " (expected)", MISSING: ""}[cell["status"]]
    return f"{cell['ours']} / {cell['published']} / {cell['difference']}{mark}"


def tolerance_text(spec: Mapping) -> str:
    """One sentence stating the tolerances (in printed units) and the expected differences."""
    tol = ((spec.get("reference") or {}).get("tolerances")) or {}
    parts = [f"{m} {format_value(m, t)}" for m, t in tol.items()]
    cl = calibrator_labels(spec)
    differ = ", ".join(
        cl.get(c, str(c)) for c in spec.get("expected_to_differ", EXPECTED_TO_DIFFER)
    )
    return (
        "Each cell: ours / published / difference (printed units: percent for accuracy, ECE, "
        f"cwECE, MCE). Tolerances: {', '.join(parts) or 'none'}; a difference beyond them is "
        f"flagged ⚠. {differ or 'No calibrator'} is expected to differ (unregularised LBFGS "
        "whose end point depends on where it stopped; replication notes section 0.6)."
    )


_CSS_CLASS = {OK: "ok", FLAGGED: "differs", EXPECTED: "expected", MISSING: "missing"}
ACCURACY_HEADER = ("Model", "Dataset", "N", "ours, %", "study, %", "difference, pp", "status")


def grid(t: Mapping) -> G.GridTable:
    """One table of :func:`tables` as a :class:`calbench.table_model.GridTable`: each
    cell ``ours / published / difference`` with its status as HTML class and tooltip."""
    return G.GridTable(
        title=t["title"],
        row_header=list(t["header"]),
        col_labels=list(t["columns"]),
        labels=[list(r["labels"]) for r in t["rows"]],
        cells=[
            [
                G.Cell(_cell_text(c), css=_CSS_CLASS[c["status"]], tooltip=c["status"])
                for c in r["cells"]
            ]
            for r in t["rows"]
        ],
        css_class="reference-table",
        data=(("metric", t["metric"]), ("group", str(t["group"]))),
    )


def accuracy_grid(accuracy: Sequence[Mapping]) -> G.GridTable:
    """The rows of :func:`accuracy_check` as a table (percent, percentage points)."""
    cells = []
    for a in accuracy:
        css = _CSS_CLASS[a["status"]]
        texts = (
            str(a["n"]),
            f"{a['ours']:.2f}",
            f"{a['expected']:.2f}",
            f"{a['difference']:+.2f}",
            a["status"],
        )
        cells.append([G.Cell(x, css=css) for x in texts])
    return G.GridTable(
        title="Full-test-set accuracy vs the study's (expected_acc)",
        row_header=list(ACCURACY_HEADER[:2]),
        col_labels=list(ACCURACY_HEADER[2:]),
        labels=[[a["model"], a["dataset"]] for a in accuracy],
        cells=cells,
        css_class="accuracy",
    )


def to_markdown(tabs: Sequence[Mapping], accuracy: Sequence[Mapping], spec: Mapping) -> str:
    """A Markdown document: the tolerances, then every table and the accuracy check."""
    title = G.md_escape(spec.get("title") or "Replication")
    lines = [f"# {title}", "", tolerance_text(spec), ""]
    for t in tabs:
        lines += [f"## {G.md_escape(t['title'])}", "", *G.markdown_lines(grid(t)), ""]
    if accuracy:
        g = accuracy_grid(accuracy)
        lines += [f"## {G.md_escape(g.title)}", "", *G.markdown_lines(g)]
    return "\n".join(lines) + "\n"


def to_html(tabs: Sequence[Mapping], accuracy: Sequence[Mapping], spec: Mapping) -> str:
    """A self-contained HTML page with every table; cells beyond tolerance highlighted
    (``templates/reference/replication.html.j2``; the tables are :mod:`calbench.table_model`'s
    HTML writer's, every text escaped)."""
    from markupsafe import Markup

    from calbench.pages import render  # lazy: code inputs

    css = (
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}td.num{text-align:right}"
        ".differs{background:#fdd}.expected{background:#ffd}.missing{color:#999}"
        "caption{font-weight:bold;text-align:left}"
    )
    tables = [
        {
            "n_flag": sum(c["status"] == FLAGGED for r in t["rows"] for c in r["cells"]),
            "html": Markup(G.to_html(grid(t)).rstrip("\n")),
        }
        for t in tabs
    ]
    acc = Markup(G.to_html(accuracy_grid(accuracy)).rstrip("\n")) if accuracy else ""
    return render(
        "reference/replication.html.j2",
        title=spec.get("title") or "Replication",
        css=css,
        tolerances=tolerance_text(spec),
        tables=tables,
        accuracy=acc,
    )
