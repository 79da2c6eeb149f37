"""How every table prints numbers and names: one number formatter, one display-name mapping.

Numbers follow the coursework's tables (Vasilev 2021, §5): accuracy, ECE and MCE in percent
with two decimals, classwise ECE in percent with three, NLL and Brier score as plain numbers
with three decimals (:data:`DISPLAY`, read from each registry
:class:`calbench.metrics.Metric`); a missing value prints as an en dash. The best value of a
row (or column) is chosen on the *printed* numbers, so ties are all best (:func:`best_mask`).

Names come from the study spec (``display`` of datasets, models and calibrators; see
cli/report.py): :func:`model_label`, :func:`dataset_labels`, :func:`calibrator_labels` and
:func:`spec_labels` are the one place that maps config keys to printed names.
:func:`without_repository_paths` keeps text from the library (reasons, notes) free of
repository file names a reader of the standalone report cannot open.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np

from calbench.metrics import METRICS

#: Table-only quantities derived by the study tables (not metrics of the registry):
#: ``error`` (1 - accuracy) and ``temperature`` (fitted T): (scale, decimals, label).
DERIVED: dict[str, tuple[float, int, str]] = {
    "error": (100.0, 2, "Error, %"),
    "temperature": (1.0, 2, "T"),
}


def _display_table() -> dict[str, tuple[float, int, str]]:
    out = {}
    for name, m in METRICS.items():
        if m.display is not None and m.scale is not None and m.decimals is not None:
            out[name] = (float(m.scale), int(m.decimals), m.display)
    return {**out, **DERIVED}


#: metric -> (scale, decimals, label) used when printing, read from each
#: :class:`calbench.metrics.Metric` (``display``, ``scale``, ``decimals``) plus :data:`DERIVED`;
#: unknown metrics print x1 with 4 decimals.
DISPLAY: dict[str, tuple[float, int, str]] = _display_table()

#: Metrics for which a larger value is better (``Metric.higher_is_better``); every other metric
#: is an error (smaller is better).
HIGHER_IS_BETTER = frozenset(n for n, m in METRICS.items() if m.higher_is_better)


def higher_is_better(metric: str) -> bool:
    """Whether a larger value of ``metric`` (a registry name) is better."""
    m = METRICS.get(metric)
    return bool(m.higher_is_better) if m is not None else False


def display_spec(metric: str) -> tuple[float, int, str]:
    """(scale, decimals, label) for ``metric``."""
    return DISPLAY.get(metric, (1.0, 4, metric))


def format_value(metric: str, value: float | None, *, signed: bool = False) -> str:
    """The printed form of a metric value (study scale and decimals; ``signed`` adds ``+``);
    ``None`` and NaN print as an en dash."""
    if value is None or not math.isfinite(value):
        return "–"
    scale, decimals, _ = display_spec(metric)
    return f"{value * scale:+.{decimals}f}" if signed else f"{value * scale:.{decimals}f}"


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
        best = row[finite].max() if higher_is_better(metric) else row[finite].min()
        mask[i] = finite & (row == best)
    return mask


# --------------------------------------------------------------------------------------------
# display names
# --------------------------------------------------------------------------------------------
def is_descriptive(metric: str) -> bool:
    """Whether ``metric`` is descriptive only: its registry entry's ``verdicts`` fact is False
    (no better/worse verdict is drawn from it); a registry without the fact: False."""
    m = METRICS.get(metric)
    return m is not None and not bool(getattr(m, "verdicts", True))


def compares_losses(displays) -> bool:
    """Whether a study has training-loss tables (coursework tables 1-2): its models' displays
    name at least two different ``loss`` labels (one loss alone compares nothing)."""
    return len({str(d["loss"]) for d in displays if d and d.get("loss")}) >= 2


def losses_calibrators(displays, calibrators) -> list[str]:
    """The calibrators whose by-loss tables a study has: ``uncalibrated`` (coursework tables
    1-2, the files ``aggregate`` writes) and ``ts`` (after temperature scaling, in the report),
    those of them among ``calibrators``, when :func:`compares_losses`; a study without one of
    them has no such tables for it."""
    if not compares_losses(displays):
        return []
    return [c for c in ("uncalibrated", "ts") if c in calibrators]


def model_label(name: str, display: Mapping | None) -> str:
    """Row label of a model: ``display.name`` plus ``(display.loss)`` and ``seed N`` when given."""
    display = display or {}
    label = str(display.get("name") or name)
    if display.get("loss"):
        label += f" ({display['loss']})"
    if display.get("seed") is not None:
        label += f" seed {display['seed']}"
    return label


def dataset_labels(spec: Mapping) -> dict[str, str]:
    """``{dataset: display name}`` (the key when no display is given)."""
    return {d: str((v or {}).get("display") or d) for d, v in (spec.get("datasets") or {}).items()}


def calibrator_labels(spec: Mapping) -> dict[str, str]:
    """``{calibrator: display name}`` (the key when no display is given)."""
    return {
        c: str((v or {}).get("display") or c) for c, v in (spec.get("calibrators") or {}).items()
    }


def model_dataset_labels(spec: Mapping) -> dict[str, str]:
    """``{model: display name of its dataset}``."""
    dl = dataset_labels(spec)
    return {
        m: str(dl.get(v.get("dataset")) or v.get("dataset", ""))
        for m, v in (spec.get("models") or {}).items()
    }


def spec_labels(spec: Mapping) -> tuple[dict, dict, dict, dict]:
    """Display names: models (prefixed with the dataset when there are several), calibrators,
    datasets, and each model's dataset label."""
    models = spec.get("models", {})
    dl = dataset_labels(spec)
    used = {v.get("dataset") for v in models.values()}
    ml = {}
    for m, v in models.items():
        label = model_label(m, (v or {}).get("display"))
        if len(used) > 1:
            label = f"{dl.get(v.get('dataset'), v.get('dataset'))} {label}"
        ml[m] = label
    return ml, calibrator_labels(spec), dl, model_dataset_labels(spec)


#: Where the project's documentation is published (outside the report).
DOCS_URL = "the project's documentation (docs/ in its repository; outside this report)"
#: What a benchmark script of the project is called in the report (outside the report).
BENCH_NAME = "the project's benchmark simulation (outside this report)"


def without_repository_paths(text: str) -> str:
    """``text`` without references to repository files ("(perf/bench_coverage.py)",
    "docs/statistics.md"), which a reader of the standalone report cannot open: a bracketed
    path becomes "(simulation in the project's benchmarks, outside this report)", a benchmark
    script (``perf/``, ``scripts/``) in the sentence :data:`BENCH_NAME`, any other path the
    project's documentation."""
    text = re.sub(
        r"\s*\((?:see )?(?:perf|docs|tests|scripts)/[\w./-]+(?:,[^)]*)?\)",
        " (simulation in the project's benchmarks, outside this report)",
        text,
    )
    text = re.sub(r"(?:perf|scripts)/[\w./-]*\w", BENCH_NAME, text)
    return re.sub(r"(?:docs|tests)/[\w./-]*\w", DOCS_URL, text)  # not a closing full stop
