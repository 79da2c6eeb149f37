"""Do the conclusions survive other evaluation choices?

Nixon et al. (2019, "Measuring calibration in deep learning", §4) showed that the ranking of
calibrators by ECE changes with the bin count, the binning scheme and the ECE variant. For one
model, :func:`robustness_rows` ranks its calibrators under each evaluation choice of
:data:`VARIANTS` (10, 15 and 20 equal-width bins, 15 equal-mass bins, classwise and smooth ECE)
and estimates, for the study's ECE, the probability that each calibrator ranks first over
bootstrap resamples of the test half (the same resampled samples for every calibrator:
:func:`first_place_probability`). :func:`summarise` turns the rows of many models into the
report's answer: which calibrator has the best average rank under each variant, and whether the
default variant's conclusion holds under all of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial

import numpy as np

from calbench.metrics import METRICS
from calbench.metrics.ece import classwise_ece, ece
from calbench.metrics.smooth import smooth_ece
from calbench.stats import mean_ranks, multiplicities, resample_indices

#: The study's ECE (15 equal-width bins, Guo et al. 2017): the variant the headline uses.
DEFAULT_VARIANT = "ece_w15"


def _variants() -> dict[str, tuple[str, Callable]]:
    out = {
        "ece_w10": ("ECE, 10 equal-width bins", partial(ece, n_bins=10)),
        DEFAULT_VARIANT: ("ECE, 15 equal-width bins", partial(ece, n_bins=15)),
        "ece_w20": ("ECE, 20 equal-width bins", partial(ece, n_bins=20)),
        "ece_m15": ("ECE, 15 equal-mass bins", partial(ece, n_bins=15, binning="mass")),
        "cwece": ("Classwise ECE, 15 bins", partial(classwise_ece, n_bins=15)),
    }
    # binning-free top-label error (Blasiok & Nakkiran 2023)
    out["smece"] = ("Smooth ECE (no bins)", smooth_ece)
    return out


#: variant -> (label, f(probs, labels) -> float); every variant is an error: lower is better
VARIANTS: dict[str, tuple[str, Callable]] = _variants()

ROBUSTNESS_COLUMNS = ("dataset", "model", "method", "variant", "value", "rank", "p_first")


def ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks of ``values`` (1 = smallest; ties share their average rank; NaN ranks last)."""
    v = np.asarray(values, dtype=np.float64)
    return mean_ranks(np.where(np.isfinite(v), v, np.inf))


def first_place_probability(
    probs_by_method: Mapping[str, np.ndarray],
    labels,
    *,
    n_resamples: int = 200,
    seed: int = 0,
) -> dict[str, float]:
    """Share of bootstrap resamples of the samples in which each method has the lowest study
    ECE (15 equal-width bins). Every method is evaluated on the same resampled indices
    (:func:`calbench.stats.resample_indices`); a tie for first shares the resample equally."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    methods = list(probs_by_method)
    y = np.asarray(labels)
    n = y.shape[0]
    weighted = {m: METRICS["ece"].weighted(np.asarray(p), y) for m, p in probs_by_method.items()}
    wins = np.zeros(len(methods))
    for idx in resample_indices(n, n_resamples, seed):
        w = multiplicities(idx, n)
        values = np.stack([np.atleast_1d(weighted[m](w)) for m in methods])  # (methods, chunk)
        best = values.min(axis=0)
        first = np.isclose(values, best, rtol=0.0, atol=1e-12)
        wins += (first / first.sum(axis=0)).sum(axis=1)
    return {m: float(wins[i] / n_resamples) for i, m in enumerate(methods)}


def robustness_rows(
    probs_by_method: Mapping[str, np.ndarray],
    labels,
    *,
    dataset: str,
    model: str,
    n_resamples: int = 200,
    seed: int = 0,
) -> list[dict]:
    """One row per (method, variant): its value on the test half, its rank among the model's
    methods under that variant, and (default variant only) its first-place probability over
    ``n_resamples`` bootstrap resamples (NaN when 0)."""
    if not probs_by_method:
        raise ValueError("ranking needs at least one calibrator of the model")
    p_first = (
        first_place_probability(probs_by_method, labels, n_resamples=n_resamples, seed=seed)
        if n_resamples > 0
        else dict.fromkeys(probs_by_method, math.nan)
    )
    rows = []
    methods = list(probs_by_method)
    for variant, (_, fn) in VARIANTS.items():
        values = [float(fn(probs_by_method[m], labels)) for m in methods]
        for m, value, rank in zip(methods, values, ranks(values), strict=True):
            rows.append(
                {
                    "dataset": dataset,
                    "model": model,
                    "method": m,
                    "variant": variant,
                    "value": value,
                    "rank": float(rank),
                    "p_first": p_first[m] if variant == DEFAULT_VARIANT else math.nan,
                }
            )
    return rows


def summarise(rows: Sequence[Mapping]) -> dict:
    """The report's robustness answer from the rows of many models.

    Returns ``{"variants": [{"variant", "label", "best", "mean_ranks": {method: rank}}],
    "headline": best under the default variant, "survives": [variants where the same method
    has the best average rank], "robust": bool, "p_first": {method: mean first-place
    probability over models}, "models": number of models}``.
    """
    by_variant: dict[str, dict[str, list[float]]] = {}
    p_first: dict[str, list[float]] = {}
    models = set()
    for r in rows:
        models.add((r["dataset"], r["model"]))
        by_variant.setdefault(r["variant"], {}).setdefault(r["method"], []).append(float(r["rank"]))
        if r["variant"] == DEFAULT_VARIANT and math.isfinite(float(r["p_first"])):
            p_first.setdefault(r["method"], []).append(float(r["p_first"]))
    if DEFAULT_VARIANT not in by_variant:
        raise ValueError(f"the robustness rows have no {DEFAULT_VARIANT} variant")
    variants = []
    for variant, per_method in by_variant.items():
        mean = {m: float(np.mean(v)) for m, v in per_method.items()}
        low = min(mean.values())
        best = [m for m, v in mean.items() if v == low]
        label = VARIANTS[variant][0] if variant in VARIANTS else variant
        variants.append({"variant": variant, "label": label, "best": best, "mean_ranks": mean})
    headline = next(v["best"] for v in variants if v["variant"] == DEFAULT_VARIANT)
    survives = [v["variant"] for v in variants if v["best"] == headline]
    return {
        "variants": variants,
        "headline": headline,
        "survives": survives,
        "robust": len(survives) == len(variants),
        "p_first": {m: float(np.mean(v)) for m, v in p_first.items()},
        "models": len(models),
    }
