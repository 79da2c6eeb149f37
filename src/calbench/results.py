"""The result files' schema: every result CSV's columns and the long-format readers and writers,
defined once, on the side of the steps that write them.

The producers (``calibrate`` and the single steps, the shift study, the robustness rows, the
reference tables, ``compare-implementations``) import their columns from here, and so do the
steps that read the files back (``aggregate``, ``render-report``, ``shift-report``, the
replication tables); none of them imports another's module for a file's layout. Paths follow
docs/architecture.md ("One name across layers").

Everything here is plain text and the standard library: no numpy, no pandas.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Mapping, Sequence

from calbench.io import atomic_write_text

# --------------------------------------------------------------------------------------------
# the calibrate step (calbench.protocol, calbench.steps)
# --------------------------------------------------------------------------------------------
#: Columns of the long-format metrics CSV (``results/metrics/{dataset}/{model}/{calibrator}.csv``,
#: ``results/aggregate/metrics.csv``): one row per (calibrator, half, metric).
METRIC_COLUMNS = ("dataset", "model", "method", "half", "metric", "value", "ci_low", "ci_high")
#: Columns of a comparison CSV (``results/compare/{dataset}/{model}.csv``,
#: ``results/aggregate/compare.csv``; :func:`calbench.stats.comparisons.compare_rows`): one row per
#: paired test.
COMPARE_COLUMNS = (
    "dataset",
    "model",
    "half",
    "metric",
    "method",
    "baseline",
    "value",
    "baseline_value",
    "difference",
    "ci_low",
    "ci_high",
    "p_value",
    "n_resamples",
    "interval",
    "selected_on",
    "family",
    "family_size",
    "test",
    "n_permutations",
    "p_holm",
    "min_p_holm",
    "alpha",
    "direction",
    "p_floor",
    "null_hypothesis",
)
#: The ``half`` of the rows of a cross-fitted study (``evaluation.scheme: crossfit``): the pooled
#: out-of-fold predictions of every labelled sample; such a study has no test or val rows.
OOF_HALF = "oof"
#: The halves whose rows are a study's headline results: the test half (``holdout``) or the
#: out-of-fold predictions (``crossfit``); a model's rows hold one of them, never both.
HEADLINE_HALVES = ("test", OOF_HALF)


def headline_half(rows: Iterable[Mapping]) -> str:
    """The headline half of a study's metric rows: :data:`OOF_HALF` when any row has it (a
    cross-fitted study), else ``test``."""
    return OOF_HALF if any(r.get("half") == OOF_HALF for r in rows) else "test"


#: Columns of ``results/partitions/{dataset}/{model}.csv`` (cross-fitted studies;
#: :func:`calbench.steps.crossfit_compare_rows`): per comparison row, its spread over the
#: ``n_partitions`` repeated partitions into ``folds`` folds: the share of partitions in which
#: the difference is significant (the holdout scheme's paired test of the metric on that
#: partition's out-of-fold predictions of all samples, Holm over the family),
#: the between- and within-partition variance of the difference
#: (:func:`calbench.stats.resampled.variance_split`; ``within`` blank for metrics that are not
#: means of per-sample values), and the first-place shares over partitions of ``method`` and of
#: the metric's ``winner`` (:func:`calbench.stats.resampled.winner_share`).
PARTITION_COLUMNS = (
    "dataset",
    "model",
    "metric",
    "family",
    "method",
    "baseline",
    "difference",
    "n_partitions",
    "folds",
    "significant_share",
    "between",
    "within",
    "between_share",
    "first_share",
    "winner",
    "winner_share",
)
#: the numeric columns of the partitions file (the rest are names)
PARTITION_NUMERIC = tuple(
    c for c in PARTITION_COLUMNS[PARTITION_COLUMNS.index("difference") :] if c != "winner"
)
#: Columns of ``results/robustness/{dataset}/{model}.csv``
#: (:func:`calbench.stats.robustness.robustness_rows`).
ROBUSTNESS_COLUMNS = (
    "dataset",
    "model",
    "method",
    "variant",
    "value",
    "rank",
    "p_first",
    "p_runner_up",
)

# --------------------------------------------------------------------------------------------
# dataset shift (calbench.shift.evaluate; calbench.report.shift)
# --------------------------------------------------------------------------------------------
#: Columns of ``results/shift/{dataset}/{model}/metrics.csv`` and ``results/shift/metrics.csv``.
SHIFT_METRIC_COLUMNS = (
    "dataset",
    "model",
    "method",
    "half",
    "corruption",
    "severity",
    "metric",
    "value",
)
#: Columns of ``results/shift/{dataset}/{model}/compare.csv`` and ``results/shift/compare.csv``.
SHIFT_COMPARE_COLUMNS = (
    "dataset",
    "model",
    "severity",
    "metric",
    "comparison",
    "method",
    "baseline",
    "value",
    "baseline_value",
    "difference",
    "ci_low",
    "ci_high",
    "p_value",
    "n_resamples",
)
#: The severities of the shift tables: 0 is the clean test half, 1-5 the corrupted copies.
SHIFT_SEVERITY_LEVELS = (0, 1, 2, 3, 4, 5)
#: Columns of ``results/shift/mean_ece.csv``: the mean ECE over corruptions per severity.
SHIFT_SUMMARY_COLUMNS = ("dataset", "method", *(f"severity_{s}" for s in SHIFT_SEVERITY_LEVELS))

# --------------------------------------------------------------------------------------------
# published numbers (calbench.reference; calbench.report.published)
# --------------------------------------------------------------------------------------------
#: Columns of a published-numbers CSV (``report.reference.csv`` of the config), keyed like
#: the config.
REFERENCE_COLUMNS = ("dataset", "model", "method", "metric", "value")
#: Columns of ``resources/reference/{name}.csv`` (:func:`calbench.reference.reference_csv_text`):
#: :data:`REFERENCE_COLUMNS` plus the table they come from.
REFERENCE_CSV_COLUMNS = (*REFERENCE_COLUMNS, "group", "table")
#: Columns of ``results/tables/reference.csv``
#: (:func:`calbench.report.published.reference_comparison`, full precision).
REFERENCE_TABLE_COLUMNS = (
    "dataset",
    "model",
    "method",
    "metric",
    "ours",
    "ci_low",
    "ci_high",
    "theirs",
    "difference",
    "tolerance",
    "within",
)
#: Columns of ``results/replication/cells.csv``
#: (:func:`calbench.reference.ours_vs_published.comparison_rows`).
REPLICATION_CELL_COLUMNS = (
    "group",
    "metric",
    "dataset",
    "model",
    "loss",
    "method",
    "ours",
    "published",
    "difference",
    "tolerance",
    "status",
)
#: Columns of ``results/replication/accuracy_check.csv``.
ACCURACY_COLUMNS = (
    "model",
    "dataset",
    "n",
    "ours",
    "expected",
    "difference",
    "tolerance",
    "status",
)
#: Columns of ``results/guo_kull/cells.csv``: every published cell of Guo et al. 2017 and
#: Kull et al. 2019 beside ours (:func:`calbench.reference.guo_kull.comparison_rows`).
GUO_KULL_CELL_COLUMNS = (
    "source",
    "table",
    "dataset",
    "published_model",
    "model",
    "published_method",
    "method",
    "published_metric",
    "quantity",
    "ours",
    "published",
    "printed",
    "difference",
    "tolerance",
    "status",
)
#: Columns of ``results/guo_kull/summary.csv`` (the DenseNet-40 summary table).
GUO_KULL_SUMMARY_COLUMNS = ("model", "half", "method", "accuracy", "confidence", "ece", "mce")
#: Columns of ``results/guo_kull/sweep/{dataset}/{model}/sweep.csv`` (ECE against temperature).
SWEEP_COLUMNS = ("model", "kind", "temperature", "ece")

# --------------------------------------------------------------------------------------------
# implementations side by side (calbench.arena; calbench.report.arena)
# --------------------------------------------------------------------------------------------
#: Columns of ``results/arena/{dataset}/{model}.csv``: per pair of implementations of a method,
#: the largest difference in calibrated probability and in each metric.
ARENA_COLUMNS = ("method", "a", "b", "quantity", "max_abs_diff", "value_a", "value_b")

# --------------------------------------------------------------------------------------------
# the report's numeric comparison (calbench.report.overview)
# --------------------------------------------------------------------------------------------
#: Columns of the report's numeric comparison CSV (display names, fractions, unrounded p).
NUMERIC_COMPARE_COLUMNS = (
    "dataset",
    "model",
    "metric",
    "family",
    "calibrator",
    "against",
    "value",
    "against_value",
    "difference",
    "ci_low",
    "ci_high",
    "test",
    "p_value",
    "p_holm",
    "family_size",
    "min_p_holm",
    "significant",
    "can_reach_significance",
)


# --------------------------------------------------------------------------------------------
# verdicts over models (calbench.report.over_models; the aggregate step writes them)
# --------------------------------------------------------------------------------------------
#: Columns of ``results/tables/win_rates.csv`` (studies of 5 models or more): the share of models
#: on which ``calibrator`` is better than ``against`` on ``metric`` (ties one half), with its
#: bootstrap interval over models.
WIN_RATE_COLUMNS = (
    "metric",
    "calibrator",
    "against",
    "win_rate",
    "ci_low",
    "ci_high",
    "n_models",
    "level",
    "interval",
)
#: Columns of ``results/tables/improvement.csv`` (studies of 5 models or more): the mean over
#: models of ``baseline - calibrator`` on ``metric`` (positive: better), with its bootstrap
#: interval over models.
IMPROVEMENT_COLUMNS = (
    "metric",
    "calibrator",
    "baseline",
    "improvement",
    "ci_low",
    "ci_high",
    "n_models",
    "level",
    "interval",
)


# --------------------------------------------------------------------------------------------
# reading and writing long-format rows
# --------------------------------------------------------------------------------------------
def read_long_csv(
    paths: Iterable[str | os.PathLike],
    required=METRIC_COLUMNS,
    *,
    numeric: Sequence[str] = ("value", "ci_low", "ci_high"),
    blank_ok: Sequence[str] = ("ci_low", "ci_high"),
    empty_ok: bool = True,
) -> list[dict]:
    """Read and concatenate long-format CSVs; the ``numeric`` columns become floats.

    Strict, so that a table's "–" means only "not computed by design": a missing file, a
    directory, a row with too few or too many fields (a truncated or garbled file), a number
    that does not parse, a ``nan``/``inf`` and a blank numeric cell are one-line ``ValueError``s
    naming the file and line. Blank is allowed only in the ``blank_ok`` columns (a metric
    without an interval: ``ci_low`` and ``ci_high``), where it becomes NaN. With ``empty_ok``
    false, a file with a header and no rows is an error too.
    """
    rows: list[dict] = []
    for path in paths:
        if os.path.isdir(path):
            raise ValueError(f"{path} is a directory, not a CSV file; pass the CSV files")
        if not os.path.isfile(path):
            raise ValueError(f"{path} does not exist; rerun the step that writes it")
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                raise ValueError(
                    f"{path} lacks columns {missing}; expected a long-format CSV with {list(required)}"
                )
            before = len(rows)
            for row in reader:
                where = f"{path} line {reader.line_num}"
                if None in row or any(v is None for v in row.values()):
                    raise ValueError(
                        f"{where} has a different number of fields than the header "
                        f"({len(reader.fieldnames)}); the file is truncated or garbled: rerun the "
                        "step that writes it"
                    )
                for key in numeric:
                    if key in row:
                        row[key] = _strict_float(row[key], key, where, key in blank_ok)
                rows.append(row)
            if not empty_ok and len(rows) == before:
                raise ValueError(f"{path} holds no rows; rerun the step that writes it")
    return rows


def _strict_float(text: str, key: str, where: str, blank_ok: bool) -> float:
    if text == "":
        if blank_ok:
            return float("nan")
        raise ValueError(
            f"{where}: {key} is blank (a result that was not computed); rerun the step that writes it"
        )
    try:
        value = float(text)
    except ValueError:
        raise ValueError(
            f"{where}: {key} {text[:20]!r} is not a number; rerun the step that writes it"
        ) from None
    if not math.isfinite(value):
        raise ValueError(f"{where}: {key} is {text}; a result must be a finite number")
    return value


def write_long_csv(path, rows: Sequence[Mapping], columns: Sequence[str]) -> None:
    """Write ``rows`` (dicts) with ``columns`` to ``path`` atomically; floats keep full precision."""
    atomic_write_text(path, long_csv_text(rows, columns))


def long_csv_text(rows: Sequence[Mapping], columns: Sequence[str]) -> str:
    """CSV text of ``rows`` with header ``columns``: a float as its ``repr`` (exact, round-trips),
    NaN and a missing key as an empty cell."""
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
