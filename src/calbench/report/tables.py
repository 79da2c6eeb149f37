"""Result tables in the study's layout: rows = models, columns = calibrators, one table per metric.

The layout and number formats follow the coursework's tables 3-14 (Vasilev 2021, §5; see
docs/workflow.md): accuracy, ECE and MCE are printed in percent with two decimals, classwise ECE
in percent with three, NLL and Brier score as plain numbers with three decimals. The best value of
each row is bold: the maximum for accuracy, the minimum for every other metric. The best value is
chosen on the *printed* (rounded) numbers, so ties are all bold, as in the study's tables.
Tables 1-2 of the coursework (uncalibrated ECE / cwECE by training loss) are built by
:func:`losses_table`.

Everything here works on plain rows (``dict`` per CSV line) and numpy; no pandas.
"""

from __future__ import annotations

import csv
import html
import io
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

#: Columns of the long-format metrics CSV written by ``calbench evaluate``.
METRIC_COLUMNS = ("dataset", "model", "method", "half", "metric", "value", "ci_low", "ci_high")

#: Metrics for which a larger value is better; every other metric is an error (smaller is better).
HIGHER_IS_BETTER = frozenset({"accuracy"})

#: metric -> (scale, decimals, label) used when printing; unknown metrics print x1 with 4 decimals.
DISPLAY: dict[str, tuple[float, int, str]] = {
    "accuracy": (100.0, 2, "Accuracy, %"),
    "ece": (100.0, 2, "ECE, % (15 bins)"),
    "mce": (100.0, 2, "MCE, % (15 bins)"),
    "cwece": (100.0, 3, "Classwise ECE, % (15 bins)"),
    "ace": (100.0, 2, "Adaptive ECE, % (15 equal-mass bins)"),
    "ece_l2_mass": (100.0, 2, "L2 ECE, % (equal-mass bins)"),
    "nll": (1.0, 3, "NLL"),
    "nll_modern": (1.0, 3, "NLL (unclipped)"),
    "brier": (1.0, 3, "Brier score"),
    "ks": (100.0, 2, "KS error, %"),
    "sbece": (100.0, 2, "SB-ECE, %"),
    "dece": (100.0, 2, "DECE, %"),
    "debiased_ece": (100.0, 2, "Debiased ECE, %"),
    "marginal_ce": (100.0, 2, "Marginal CE, %"),
    "ece_sweep": (100.0, 2, "Mean-sweep CE, % (l2, equal-mass)"),
}


def display_spec(metric: str) -> tuple[float, int, str]:
    """(scale, decimals, label) for ``metric``."""
    return DISPLAY.get(metric, (1.0, 4, metric))


def format_value(metric: str, value: float) -> str:
    """The printed form of a metric value (study scale and decimals); NaN prints as an en dash."""
    if value is None or not math.isfinite(value):
        return "–"
    scale, decimals, _ = display_spec(metric)
    return f"{value * scale:.{decimals}f}"


# --------------------------------------------------------------------------------------------
# reading and writing long-format rows
# --------------------------------------------------------------------------------------------
def _to_float(text) -> float:
    if text is None or text == "":
        return float("nan")
    return float(text)


def read_long_csv(paths: Iterable[str | os.PathLike], required=METRIC_COLUMNS) -> list[dict]:
    """Read and concatenate long-format CSVs; numeric columns become floats (blank -> NaN)."""
    rows: list[dict] = []
    for path in paths:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                raise ValueError(
                    f"{path} lacks columns {missing}; expected a long-format CSV with {list(required)}"
                )
            for row in reader:
                for key in ("value", "ci_low", "ci_high"):
                    if key in row:
                        row[key] = _to_float(row[key])
                rows.append(row)
    return rows


def write_long_csv(path, rows: Sequence[Mapping], columns: Sequence[str]) -> None:
    """Write ``rows`` (dicts) with ``columns`` to ``path`` atomically; floats keep full precision."""
    from calbench.io import atomic_write_text

    atomic_write_text(path, long_csv_text(rows, columns))


def long_csv_text(rows: Sequence[Mapping], columns: Sequence[str]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        out = []
        for c in columns:
            v = row.get(c, "")
            if isinstance(v, float):
                v = "" if math.isnan(v) else repr(v)
            out.append(v)
        writer.writerow(out)
    return buf.getvalue()


# --------------------------------------------------------------------------------------------
# the table object
# --------------------------------------------------------------------------------------------
@dataclass
class Table:
    """A rows x columns table of one metric, with optional confidence intervals.

    ``values``/``ci_low``/``ci_high`` are float arrays (NaN = missing). ``bold[i, j]`` marks the
    best printed value of row ``i``. ``row_labels`` are lists of strings (one per leading label
    column, named by ``row_header``).
    """

    metric: str
    title: str
    row_keys: list[str]
    row_labels: list[list[str]]
    row_header: list[str]
    col_keys: list[str]
    col_labels: list[str]
    values: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    bold: np.ndarray = field(default=None)  # type: ignore[assignment]
    #: sample standard deviation over replicates (seeds) where a cell averages several models
    std: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.bold is None:
            self.bold = best_mask(self.values, self.metric)

    def cell(self, i: int, j: int) -> str:
        return format_value(self.metric, float(self.values[i, j]))

    def ci(self, i: int, j: int) -> str:
        lo, hi = float(self.ci_low[i, j]), float(self.ci_high[i, j])
        if not (math.isfinite(lo) and math.isfinite(hi)):
            if self.std is not None and math.isfinite(float(self.std[i, j])):
                return f"± {format_value(self.metric, float(self.std[i, j]))}"
            return ""
        return f"[{format_value(self.metric, lo)}, {format_value(self.metric, hi)}]"

    def rows(self) -> list[dict]:
        """Rows for templates: ``{"labels": [...], "cells": [{"text", "ci", "bold"}, ...]}``."""
        out = []
        for i in range(len(self.row_keys)):
            cells = [
                {"text": self.cell(i, j), "ci": self.ci(i, j), "bold": bool(self.bold[i, j])}
                for j in range(len(self.col_keys))
            ]
            out.append({"key": self.row_keys[i], "labels": self.row_labels[i], "cells": cells})
        return out


def best_mask(values: np.ndarray, metric: str) -> np.ndarray:
    """Boolean mask of the best printed value in each row (max for accuracy, else min); ties all win.

    The comparison is made on the values rounded as printed (:func:`format_value`), the rule of the
    study's tables (bold = best value in the row, ties all bold). Rows without values get no bold.
    """
    values = np.asarray(values, dtype=np.float64)
    scale, decimals, _ = display_spec(metric)
    shown = np.round(values * scale, decimals)
    mask = np.zeros(values.shape, dtype=bool)
    for i, row in enumerate(shown):
        finite = np.isfinite(row)
        if not finite.any():
            continue
        best = row[finite].max() if metric in HIGHER_IS_BETTER else row[finite].min()
        mask[i] = finite & (row == best)
    return mask


def _select(rows, **where) -> list[dict]:
    return [r for r in rows if all(r.get(k) == v for k, v in where.items())]


def metric_table(
    rows: Sequence[Mapping],
    metric: str,
    *,
    half: str = "test",
    models: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    model_labels: Mapping[str, Sequence[str]] | None = None,
    row_header: Sequence[str] = ("Dataset", "Model"),
    method_labels: Mapping[str, str] | None = None,
) -> Table:
    """The study's table for one metric: rows = models, columns = calibrators (methods).

    ``models``/``methods`` fix the order (default: order of first appearance); ``model_labels``
    maps a model to its label cells (default ``[dataset, model]``).
    """
    sel = _select(rows, metric=metric, half=half)
    if not sel:
        raise ValueError(f"no rows for metric {metric!r} on the {half} half; check the metric name")
    if models is None:
        models = list(dict.fromkeys(r["model"] for r in sel))
    if methods is None:
        methods = list(dict.fromkeys(r["method"] for r in sel))
    mi = {m: i for i, m in enumerate(models)}
    ci = {m: j for j, m in enumerate(methods)}
    shape = (len(models), len(methods))
    vals, lo, hi = (np.full(shape, np.nan) for _ in range(3))
    datasets: dict[str, str] = {}
    for r in sel:
        i, j = mi.get(r["model"]), ci.get(r["method"])
        if i is None or j is None:
            continue
        vals[i, j], lo[i, j], hi[i, j] = (
            r["value"],
            r.get("ci_low", np.nan),
            r.get("ci_high", np.nan),
        )
        datasets[r["model"]] = r["dataset"]
    labels = [
        list(model_labels[m]) if model_labels and m in model_labels else [datasets.get(m, ""), m]
        for m in models
    ]
    col_labels = [method_labels.get(m, m) if method_labels else m for m in methods]
    return Table(
        metric=metric,
        title=f"{display_spec(metric)[2]} on the {half} half",
        row_keys=list(models),
        row_labels=labels,
        row_header=list(row_header),
        col_keys=list(methods),
        col_labels=col_labels,
        values=vals,
        ci_low=lo,
        ci_high=hi,
    )


def losses_table(
    rows: Sequence[Mapping],
    metric: str,
    displays: Mapping[str, Mapping],
    *,
    method: str = "uncalibrated",
    half: str = "test",
    dataset_labels: Mapping[str, str] | None = None,
    method_label: str | None = None,
) -> Table:
    """Coursework tables 1-2: one metric of one method pivoted by training loss.

    Rows = (dataset, architecture display name), columns = the ``loss`` display labels in order of
    appearance. Several models in one cell (seeds of one objective) print their mean with the
    sample standard deviation (``± std``) instead of a bootstrap interval. ``displays`` maps model -> ``{"name": ..., "loss": ...}``; models without a
    ``loss`` are left out.
    """
    members = {m: d for m, d in displays.items() if d.get("loss")}
    if not members:
        raise ValueError(
            "no model has a display.loss entry; add display: {name, loss} to the models"
        )
    sel = [
        r for r in _select(rows, metric=metric, half=half, method=method) if r["model"] in members
    ]
    if not sel:
        raise ValueError(f"no {method} rows for metric {metric!r} among the losses study's models")
    row_ids: dict[tuple[str, str], int] = {}
    losses: dict[str, int] = {}
    for m in members:  # config order
        d = members[m]
        dataset = next((r["dataset"] for r in sel if r["model"] == m), None)
        if dataset is None:
            continue
        row_ids.setdefault((dataset, str(d.get("name", m))), len(row_ids))
        losses.setdefault(str(d["loss"]), len(losses))
    shape = (len(row_ids), len(losses))
    vals, lo, hi, sd = (np.full(shape, np.nan) for _ in range(4))
    cells: dict[tuple[int, int], list] = {}
    for r in sel:
        d = members[r["model"]]
        i = row_ids[(r["dataset"], str(d.get("name", r["model"])))]
        j = losses[str(d["loss"])]
        cells.setdefault((i, j), []).append(r)
    for (i, j), group in cells.items():
        if len(group) == 1:  # one model: its value and bootstrap interval
            r = group[0]
            vals[i, j], lo[i, j], hi[i, j] = (
                r["value"],
                r.get("ci_low", np.nan),
                r.get("ci_high", np.nan),
            )
        else:  # replicates (seeds): mean and sample standard deviation
            x = np.array([float(r["value"]) for r in group])
            vals[i, j], sd[i, j] = x.mean(), x.std(ddof=1)
    keys = list(row_ids)
    dl = dataset_labels or {}
    return Table(
        metric=metric,
        title=f"{display_spec(metric)[2]}, {method_label or method}, by training loss ({half} half)",
        row_keys=[f"{d}/{n}" for d, n in keys],
        row_labels=[[dl.get(d, d), n] for d, n in keys],
        row_header=["Dataset", "Model"],
        col_keys=list(losses),
        col_labels=list(losses),
        values=vals,
        ci_low=lo,
        ci_high=hi,
        std=sd,
    )


# --------------------------------------------------------------------------------------------
# output formats
# --------------------------------------------------------------------------------------------
def to_csv(table: Table) -> str:
    """Wide CSV of the printed values (study scale), one column per calibrator plus CI columns."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    header = list(table.row_header)
    for c in table.col_labels:
        header += [c, f"{c} ci_low", f"{c} ci_high"]
    w.writerow(header)
    for i in range(len(table.row_keys)):
        line = list(table.row_labels[i])
        for j in range(len(table.col_keys)):
            line += [
                table.cell(i, j),
                format_value(table.metric, float(table.ci_low[i, j])),
                format_value(table.metric, float(table.ci_high[i, j])),
            ]
        w.writerow(line)
    return buf.getvalue()


def _md_escape(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*")


def to_markdown(table: Table) -> str:
    """GitHub Markdown table; best values in ``**bold**``, 95% CI in brackets under the value."""
    header = [*table.row_header, *table.col_labels]
    lines = [
        f"**{_md_escape(table.title)}**",
        "",
        "| " + " | ".join(_md_escape(h) for h in header) + " |",
        "|" + "---|" * len(table.row_header) + "---:|" * len(table.col_labels),
    ]
    for i in range(len(table.row_keys)):
        cells = [_md_escape(x) for x in table.row_labels[i]]
        for j in range(len(table.col_keys)):
            text = table.cell(i, j)
            if table.bold[i, j]:
                text = f"**{text}**"
            ci = table.ci(i, j)
            cells.append(f"{text} {ci}" if ci else text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def html_table(css_class: str, data: tuple[str, str], table) -> str:
    """A standalone ``<table class=css_class data-NAME="VALUE">`` of any table with ``title``,
    ``row_header``, ``col_labels`` and ``rows()`` (labels + cells with ``text``, ``bold`` and an
    optional ``ci``); all text HTML-escaped, best values in ``<b>``."""
    esc = html.escape
    out = [f'<table class="{esc(css_class)}" data-{data[0]}="{esc(data[1])}">']
    out.append(f"<caption>{esc(table.title)}</caption>")
    out.append(
        "<thead><tr>"
        + "".join(f"<th>{esc(h)}</th>" for h in [*table.row_header, *table.col_labels])
        + "</tr></thead><tbody>"
    )
    for row in table.rows():
        tds = [f"<td>{esc(x)}</td>" for x in row["labels"]]
        for cell in row["cells"]:
            text = esc(cell["text"])
            if cell["bold"]:
                text = f"<b>{text}</b>"
            if cell.get("ci"):
                text += f'<br><small class="ci">{esc(cell["ci"])}</small>'
            tds.append(f'<td class="num">{text}</td>')
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out) + "\n"


def to_html(table: Table) -> str:
    """A metric table as a standalone ``<table>`` (see :func:`html_table`)."""
    return html_table("metric-table", ("metric", table.metric), table)


_TEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def tex_escape(text: str) -> str:
    """Escape LaTeX special characters."""
    return "".join(_TEX_SPECIAL.get(ch, ch) for ch in str(text))


def to_latex(table: Table) -> str:
    """A ``tabular`` in the study's style (booktabs rules, best value ``\\textbf``)."""
    spec = "l" * len(table.row_header) + "r" * len(table.col_labels)
    lines = [
        f"% {tex_escape(table.title)}",
        f"\\begin{{tabular}}{{{spec}}}",
        "\\toprule",
        " & ".join(tex_escape(h) for h in [*table.row_header, *table.col_labels]) + " \\\\",
        "\\midrule",
    ]
    for i in range(len(table.row_keys)):
        cells = [tex_escape(x) for x in table.row_labels[i]]
        for j in range(len(table.col_keys)):
            text = table.cell(i, j).replace("–", "--")
            cells.append(f"\\textbf{{{text}}}" if table.bold[i, j] else text)
        lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


FORMATS = {"html": to_html, "md": to_markdown, "csv": to_csv, "tex": to_latex}


def write_table(table: Table, stem: str | os.PathLike) -> list[str]:
    """Write ``table`` as ``stem.html``, ``stem.md``, ``stem.csv`` and ``stem.tex`` (atomically)."""
    from calbench.io import atomic_write_text

    paths = []
    for ext, fn in FORMATS.items():
        path = f"{os.fspath(stem)}.{ext}"
        atomic_write_text(path, fn(table))
        paths.append(path)
    return paths


# --------------------------------------------------------------------------------------------
# comparison with published numbers
# --------------------------------------------------------------------------------------------
REFERENCE_COLUMNS = ("dataset", "model", "method", "metric", "value")


def reference_comparison(
    rows: Sequence[Mapping],
    reference: Sequence[Mapping],
    *,
    tolerances: Mapping[str, float] | None = None,
    half: str = "test",
    units: str = "fraction",
) -> list[dict]:
    """Pair our test-half values with published ones: ours, theirs, difference, within tolerance.

    ``reference`` rows have ``dataset, model, method, metric, value`` keyed like ours (config
    names). ``units="display"`` means published values are in the printed scale of
    :data:`DISPLAY` (e.g. percent for ECE) and are divided by that scale first. ``tolerances``
    maps metric -> largest allowed ``|ours - theirs|`` (as a fraction); rows without a
    tolerance get ``within = None``.
    """
    if units not in ("fraction", "display"):
        raise ValueError(f"reference units must be 'fraction' or 'display', got {units!r}")
    ours = {
        (r["dataset"], r["model"], r["method"], r["metric"]): r for r in rows if r["half"] == half
    }
    out = []
    for ref in reference:
        key = (ref["dataset"], ref["model"], ref["method"], ref["metric"])
        if key not in ours:
            continue
        theirs = float(ref["value"])
        if units == "display":
            theirs /= display_spec(ref["metric"])[0]
        mine = ours[key]["value"]
        diff = mine - theirs
        tol = (tolerances or {}).get(ref["metric"])
        out.append(
            {
                "dataset": key[0],
                "model": key[1],
                "method": key[2],
                "metric": key[3],
                "ours": mine,
                "ci_low": ours[key].get("ci_low", float("nan")),
                "ci_high": ours[key].get("ci_high", float("nan")),
                "theirs": theirs,
                "difference": diff,
                "tolerance": tol,
                "within": None if tol is None else bool(abs(diff) <= tol),
            }
        )
    return out
