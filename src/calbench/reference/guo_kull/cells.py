"""Every published cell beside ours: the workflow's metric for the cell, the tolerance and the
status (ok, differs, reference band, ...)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from calbench.reference.guo_kull.published import (
    DEFAULT_METRIC_MAP,
    DEFAULT_TOLERANCES,
    EXPECTED,
    FLAGGED,
    MISSING,
    NO_LOGITS,
    OK,
    REFERENCE,
    REFERENCE_BAND,
    SOURCES,
    published_rows,
)
from calbench.results import GUO_KULL_CELL_COLUMNS


def ours_lookup(
    metrics_rows: Sequence[Mapping],
    n_classes: Mapping[str, int],
    metric_map: Mapping[str, str] | None = None,
    half: str = "test",
):
    """A function ``(model, method, quantity) -> float | None`` over the aggregated metrics
    (``model, method, half, metric, value``; fractions). ``n_classes[model]`` = K for Brier / K."""
    mm = {**DEFAULT_METRIC_MAP, **(metric_map or {})}
    table = {
        (r["model"], r["method"], r["metric"]): float(r["value"])
        for r in metrics_rows
        if r.get("half", half) == half
    }

    def get(model: str, method: str, quantity: str) -> float | None:
        metric = mm.get(quantity, quantity)
        v = table.get((model, method, metric))
        if v is None or not math.isfinite(v):
            return None
        if quantity == "error":
            return 1.0 - v
        if quantity == "brier_div_k" and metric == DEFAULT_METRIC_MAP["brier_div_k"]:
            k = n_classes.get(model)
            return None if not k else v / k
        return v

    return get


def cell_status(
    source: str,
    model: str,
    ours: float | None,
    published: float,
    tolerance: float,
    method: str,
    expected_to_differ: Sequence[str] = (),
) -> str:
    if not model:
        return NO_LOGITS
    if ours is None or not math.isfinite(published):
        return MISSING
    if source in REFERENCE_BAND:
        return REFERENCE
    if abs(ours - published) <= tolerance:
        return OK
    return EXPECTED if method in expected_to_differ else FLAGGED


def comparison_rows(
    metrics_rows: Sequence[Mapping],
    n_classes: Mapping[str, int],
    spec: Mapping | None = None,
) -> list[dict]:
    """Every published cell beside ours (columns :data:`GUO_KULL_CELL_COLUMNS`, fractions).

    ``spec`` (all optional): ``models`` (config keys; cells of other models count as having no
    logits), ``calibrators`` (config keys; cells of others are left out), ``metric_map``,
    ``tolerances`` (quantity -> fraction, added to half a printed unit) and
    ``expected_to_differ`` (calibrator keys whose flagged cells are marked expected),
    ``sources`` (source keys to compare; absent or None = all of :data:`SOURCES`).
    """
    spec = spec or {}
    sources = spec.get("sources")
    if sources is not None:
        unknown = sorted(set(sources) - set(SOURCES))
        if unknown:
            raise ValueError(f"unknown sources {unknown}; known: {list(SOURCES)}")
    get = ours_lookup(metrics_rows, n_classes, spec.get("metric_map"))
    tol_base = {**DEFAULT_TOLERANCES, **(spec.get("tolerances") or {})}
    models = spec.get("models")
    calibrators = spec.get("calibrators")
    differ = tuple(spec.get("expected_to_differ") or ())
    out = []
    for p in published_rows():
        if sources is not None and p["source"] not in sources:
            continue
        if calibrators is not None and p["method"] not in calibrators:
            continue
        model = p["model"] if (models is None or p["model"] in models) else ""
        ours = get(model, p["method"], p["quantity"]) if model else None
        tol = tol_base.get(p["quantity"], 0.0) + 0.5 * 10.0 ** (-p["decimals"]) / p["scale"]
        published = p["published"]
        out.append(
            {
                **{k: p[k] for k in GUO_KULL_CELL_COLUMNS if k in p},
                "model": model,
                "ours": ours,
                "difference": None
                if ours is None or not math.isfinite(published)
                else ours - published,
                "tolerance": tol,
                "status": cell_status(
                    p["source"], model, ours, published, tol, p["method"], differ
                ),
            }
        )
    return out
