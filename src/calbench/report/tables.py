"""Result tables in the study's layout: rows = models, columns = calibrators, one table per metric.

The layout and number formats follow the coursework's tables 3-14 (Vasilev 2021, §5; see
docs/workflow.md): accuracy, ECE and MCE are printed in percent with two decimals, classwise ECE
in percent with three, NLL and Brier score as plain numbers with three decimals. The best value of
each row is bold: the maximum for accuracy, the minimum for every other metric. The best value is
chosen on the *printed* (rounded) numbers, so ties are all bold, as in the study's tables.
Tables 1-2 of the coursework (uncalibrated ECE / cwECE by training loss) are built by
:func:`losses_table`. Numbers and names print through :mod:`calbench.display`; every
format is written by :mod:`calbench.table_model` (:meth:`Table.grid`).

Everything here works on plain rows (``dict`` per CSV line) and numpy; no pandas.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from calbench import table_model as G
from calbench.display import best_mask, display_spec, format_value


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

    def grid(self) -> G.GridTable:
        """The printed table (:class:`calbench.table_model.GridTable`); its CSV holds
        each value with its interval bounds."""
        cells = [
            [
                G.Cell(
                    self.cell(i, j),
                    ci=self.ci(i, j),
                    bold=bool(self.bold[i, j]),
                    csv=(
                        self.cell(i, j),
                        format_value(self.metric, float(self.ci_low[i, j])),
                        format_value(self.metric, float(self.ci_high[i, j])),
                    ),
                )
                for j in range(len(self.col_keys))
            ]
            for i in range(len(self.row_keys))
        ]
        return G.GridTable(
            title=self.title,
            row_header=list(self.row_header),
            col_labels=list(self.col_labels),
            labels=[list(x) for x in self.row_labels],
            cells=cells,
            css_class="metric-table",
            data=(("metric", self.metric),),
            csv_suffixes=("ci_low", "ci_high"),
        )


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
# output formats (one writer per format: calbench.table_model)
# --------------------------------------------------------------------------------------------
def to_csv(table: Table) -> str:
    """Wide CSV of the printed values (study scale), one column per calibrator plus CI columns."""
    return G.to_csv(table.grid())


def to_markdown(table: Table) -> str:
    """GitHub Markdown table; best values in ``**bold**``, 95% CI in brackets after the value."""
    return G.to_markdown(table.grid())


def to_html(table: Table) -> str:
    """A metric table as a standalone ``<table class="metric-table" data-metric=...>``."""
    return G.to_html(table.grid())


def to_latex(table: Table) -> str:
    """A ``tabular`` in the study's style (booktabs rules, best value ``\\textbf``)."""
    return G.to_latex(table.grid())


FORMATS = {"html": to_html, "md": to_markdown, "csv": to_csv, "tex": to_latex}


def write_table(table: Table, stem: str | os.PathLike) -> list[str]:
    """Write ``table`` as ``stem.html``, ``stem.md``, ``stem.csv`` and ``stem.tex`` (atomically)."""
    return G.write_grid(table.grid(), stem)
