"""The replication tables of a study with packaged published numbers: step
``replication-tables``.

:func:`write_replication_tables` joins the aggregated metrics with the published numbers
(:mod:`calbench.reference.ours_vs_published`: every cell ours / published / difference,
flagged beyond the configured tolerances), lays them out as the study's tables, and checks every model's accuracy
on its logits against the accuracy the study states.
"""

from __future__ import annotations

from pathlib import Path

from calbench.io import atomic_write_text
from calbench.logits import load_logits
from calbench.reference import ours_vs_published as C
from calbench.results import ACCURACY_COLUMNS, METRIC_COLUMNS, REFERENCE_COLUMNS, read_long_csv


def write_replication_tables(
    metrics_csv,
    reference_csv,
    spec: dict,
    logits_paths=(),
    *,
    out_csv,
    out_accuracy,
    out_md,
    out_html,
    accuracy_tolerance: float = 0.1,
) -> dict:
    """Write the long comparison CSV, the accuracy check CSV and the tables as Markdown and HTML.

    Returns counts for a one-line summary: ``{"tables", "cells", "flagged", "models",
    "accuracy_flagged"}``."""
    rows = read_long_csv([metrics_csv], required=METRIC_COLUMNS)
    reference = read_long_csv([reference_csv], required=REFERENCE_COLUMNS)
    long = C.comparison_rows(rows, reference, spec)
    tabs = C.tables(long, spec)
    accuracies = {}
    for path in logits_paths:
        d = load_logits(path)
        acc = float((d["logits"].argmax(1) == d["labels"]).mean())
        accuracies[Path(path).stem] = (int(d["labels"].shape[0]), acc)
    acc_rows = C.accuracy_check(accuracies, spec, tolerance_pp=accuracy_tolerance)
    atomic_write_text(out_csv, C.long_csv(long))
    atomic_write_text(out_accuracy, C.long_csv(acc_rows, ACCURACY_COLUMNS))
    atomic_write_text(out_md, C.to_markdown(tabs, acc_rows, spec))
    atomic_write_text(out_html, C.to_html(tabs, acc_rows, spec))
    return {
        "tables": len(tabs),
        "cells": len(long),
        "flagged": sum(r["status"] == C.FLAGGED for r in long),
        "models": len(acc_rows),
        "accuracy_flagged": sum(r["status"] == C.FLAGGED for r in acc_rows),
    }
