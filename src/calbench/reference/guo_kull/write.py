"""File-level entry points of the verbs ``temperature-sweep`` (:func:`write_sweep`) and
``guo-kull-tables`` (:func:`write_tables`): read logits, splits, metrics and calibrators,
write every output atomically."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence

import numpy as np

from calbench.calibrators import load_calibrator
from calbench.calibrators.scaling import fitted_temperature
from calbench.io import atomic_write_bytes, atomic_write_text, read_npz
from calbench.logits import load_logits
from calbench.metrics.binning import ECE_BINS
from calbench.reference.guo_kull.cells import comparison_rows
from calbench.reference.guo_kull.render import csv_text, to_html, to_markdown
from calbench.reference.guo_kull.sweep import temperature_sweep
from calbench.reference.guo_kull.tables import (
    study_tables,
    summary_rows,
    summary_table,
)
from calbench.results import (
    GUO_KULL_CELL_COLUMNS,
    GUO_KULL_SUMMARY_COLUMNS,
    METRIC_COLUMNS,
    SWEEP_COLUMNS,
    read_long_csv,
)


def load_halves(logits_path, split_path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{"val": (logits, labels), "test": (...)}`` of a logits file and its split ``.npz``
    (``val_idx``, ``test_idx``: a partition of the rows; for a pre-split source, its own parts)."""
    data = load_logits(logits_path)
    n = len(data["labels"])
    if not os.path.isfile(split_path):
        raise FileNotFoundError(f"split file {split_path} does not exist; run calbench split first")
    s = read_npz(split_path, "split file", "rebuild it with calbench split")
    if "val_idx" not in s or "test_idx" not in s:
        raise ValueError(f"{split_path} lacks val_idx/test_idx; regenerate the split")
    val, test = s["val_idx"].astype(np.int64), s["test_idx"].astype(np.int64)
    both = np.concatenate([val, test])
    if len(both) != n or not np.array_equal(np.sort(both), np.arange(n)):
        raise ValueError(
            f"split {split_path} is not a partition of the {n} rows of {logits_path}; "
            "rebuild the split from these logits"
        )
    z, y = data["logits"], data["labels"]
    return {"val": (z[val], y[val]), "test": (z[test], y[test])}


def _png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    return buf.getvalue()


def write_sweep(
    logits_path,
    split_path,
    *,
    model: str,
    out_grid,
    out_curve,
    out_csv,
    temperatures: Sequence[float] = (0.5, 1.0, 1.5, 2.0),
    curve: Sequence[float] | None = None,
    ts_calibrator=None,
    n_bins: int = ECE_BINS,
) -> list[dict]:
    """:func:`temperature_sweep` on the test part of ``logits_path``; writes the diagram grid and
    the curve (PNG) and the ECE values (CSV, :data:`SWEEP_COLUMNS`), atomically. The fitted
    temperature is read from ``ts_calibrator`` (a fitted ``ts`` JSON) when given."""
    fitted = None
    if ts_calibrator:
        fitted = fitted_temperature(ts_calibrator)
    z, y = load_halves(logits_path, split_path)["test"]
    grid, fig, rows = temperature_sweep(
        z,
        y,
        model=model,
        temperatures=temperatures,
        curve=curve,
        fitted_temperature=fitted,
        n_bins=n_bins,
    )
    png_grid, png_curve = _png_bytes(grid), _png_bytes(fig)
    text = csv_text(rows, SWEEP_COLUMNS)
    atomic_write_bytes(out_grid, png_grid)
    atomic_write_bytes(out_curve, png_curve)
    atomic_write_text(out_csv, text)
    return rows


def write_tables(
    metrics_csv,
    spec: Mapping,
    *,
    out_html,
    out_md,
    out_csv,
    out_summary,
    summary_logits=None,
    summary_split=None,
    summary_calibrators: Mapping[str, str | os.PathLike] | None = None,
    sweep_csvs: Sequence[str | os.PathLike] = (),
    sweep_figures: Mapping[str, Sequence[str | os.PathLike]] | None = None,
) -> list[dict]:
    """Every output of the study: the comparison cells (CSV), the publications' tables
    (Markdown, HTML), the summary table (CSV) of ``spec['summary_model']`` from its logits, split
    and fitted calibrator JSONs, and the temperature-sweep figures and values. Returns the cells.

    ``spec``: ``title, description, models`` ({name: {num_classes, ...}}), ``calibrators``,
    ``metric_map``, ``tolerances``, ``expected_to_differ`` (see :func:`comparison_rows`).
    """
    metrics = read_long_csv([metrics_csv], required=METRIC_COLUMNS)
    n_classes = {
        m: int(v["num_classes"])
        for m, v in (spec.get("models") or {}).items()
        if v.get("num_classes")
    }
    cells = comparison_rows(metrics, n_classes, spec)
    tabs = study_tables(cells, spec)
    summary: list[dict] = []
    if summary_logits:
        if not summary_split:
            raise ValueError("summary_logits needs summary_split (the model's split .npz)")
        cals = {m: load_calibrator(p) for m, p in (summary_calibrators or {}).items()}
        if not cals:
            raise ValueError("the summary table needs at least one fitted calibrator JSON")
        halves = load_halves(summary_logits, summary_split)
        summary = summary_rows(halves, cals, model=spec.get("summary_model") or "")
        tabs.append(summary_table(summary, spec))
    sweep: list[dict] = []
    for path in sweep_csvs:
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                sweep.append(
                    {
                        "model": r["model"],
                        "kind": r["kind"],
                        "temperature": float(r["temperature"]),
                        "ece": float(r["ece"]),
                    }
                )
    cell_text = csv_text(cells, GUO_KULL_CELL_COLUMNS)
    md = to_markdown(tabs, cells, spec, sweep)
    page = to_html(tabs, cells, spec, sweep=sweep, figures=sweep_figures)
    atomic_write_text(out_csv, cell_text)
    atomic_write_text(out_summary, csv_text(summary, GUO_KULL_SUMMARY_COLUMNS))
    atomic_write_text(out_md, md)
    atomic_write_text(out_html, page)
    return cells
