"""The report's "Implementations side by side" section: the per-model CSVs of ``calbench
compare-implementations`` (:mod:`calbench.arena`, ``results/arena/{dataset}/
{model}.csv``) aggregated across models into one table, per pair of implementations of a
method, of the largest difference in calibrated probability and in each metric, with the model
where it occurs; the per-model rows kept for a folded detail. Plain data: the template escapes
every value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from calbench.results import ARENA_COLUMNS, read_long_csv

PROBABILITY = "probability"


def fmt(v: float) -> str:
    """A difference or a value: 3 significant digits, the exponent form below 1e-3."""
    if v != v:
        return ""
    return "0" if v == 0 else f"{v:.2e}" if abs(v) < 1e-3 else f"{v:.4f}"


def _model_of(path) -> tuple[str, str]:
    p = Path(path)
    return p.parent.name, p.stem


def arena_context(paths: Sequence, models: Mapping | None = None, metric_label=None) -> dict | None:
    """The section's data from the CSVs ``paths`` (``results/arena/{dataset}/{model}.csv``), or
    ``None`` without files. ``models`` is the study spec's ``models`` (display names);
    ``metric_label(name)`` a metric's printed name.

    Returns ``{"metrics": [{name, label}], "pairs": [{method, a, b, prob, prob_model,
    metrics: [{diff, model}]}], "models": [{model, label, rows}]}``: for every pair the largest
    ``max_abs_diff`` over the models (ties: the first model; ``model`` ``None`` for a metric
    difference or ``prob_model`` ``None`` for a probability difference of exactly 0), per
    quantity.
    """
    if not paths:
        return None
    models = models or {}
    label = metric_label or (lambda m: m)
    metrics: list[str] = []
    pairs: dict[tuple, dict] = {}
    per_model = []
    for path in paths:
        rows = read_long_csv(
            [path], ARENA_COLUMNS, numeric=("max_abs_diff", "value_a", "value_b"),
            blank_ok=("value_a", "value_b"), empty_ok=False,
        )  # fmt: skip
        _, model = _model_of(path)
        name = ((models.get(model) or {}).get("display") or {}).get("name") or model
        for r in rows:
            if r["max_abs_diff"] < 0:
                raise ValueError(f"{path}: a negative max_abs_diff; rerun compare-implementations")
            q = r["quantity"]
            if q != PROBABILITY and q not in metrics:
                metrics.append(q)
            p = pairs.setdefault((r["method"], r["a"], r["b"]), {"best": {}})
            if q not in p["best"] or r["max_abs_diff"] > p["best"][q]["diff"]:
                p["best"][q] = {"diff": r["max_abs_diff"], "model": name}
        per_model.append({
            "model": model, "label": name,
            "rows": [{**r, "diff_text": fmt(r["max_abs_diff"]), "a_text": fmt(r["value_a"]),
                      "b_text": fmt(r["value_b"])} for r in rows],
        })  # fmt: skip
    table = []
    for (method, a, b), p in pairs.items():
        best = p["best"]
        if PROBABILITY not in best:
            raise ValueError(f"the arena CSVs give no probability row for {a} vs {b}")
        cells = [best.get(m) for m in metrics]
        table.append({
            "method": method, "a": a, "b": b,
            "prob": fmt(best[PROBABILITY]["diff"]),
            "prob_model": best[PROBABILITY]["model"] if best[PROBABILITY]["diff"] else None,
            # the model where a difference occurs; none where every model agrees exactly
            "metrics": [{"diff": fmt(c["diff"]), "model": c["model"] if c["diff"] else None}
                        if c else None for c in cells],
        })  # fmt: skip
    return {
        "metrics": [{"name": m, "label": label(m)} for m in metrics],
        "pairs": table,
        "models": per_model,
    }
