"""Do the conclusions survive other evaluation choices, and can the data separate the winner?

Nixon et al. (2019, "Measuring calibration in deep learning", §4) showed that the ranking of
calibrators by ECE changes with the bin count, the binning scheme and the ECE variant. For one
model, :func:`robustness_rows` ranks its calibrators under each evaluation choice of
:data:`VARIANTS` (10, 15 and 20 equal-width bins, 15 equal-mass bins, classwise), all of them
the **unbiased** squared binned calibration error (:mod:`calbench.metrics.unbiased`, reported
as its square root): a plug-in error's upward bias shrinks as predictions get coarser and is
shared by every binning variant, so plug-in variants agreeing with each other says nothing
(they all reward the coarser predictor). It also tests the model's winner against its
runner-up under the default choice (:func:`calbench.stats.paired_test` with the metric's own
test, whose null is equal population calibration error) and estimates the probability that each
calibrator ranks first over bootstrap resamples of the test half
(:func:`first_place_probability`).

:func:`summarise` turns the rows of many models into the report's answer. A winner is
**robust** only when (1) its paired test against the runner-up rejects at ``alpha`` and (2) it
ranks first under every evaluation choice; per model with the model's test, and over the study
with the signed-rank test over models of the headline against the runner-up of average rank
(:func:`calbench.stats.signed_rank.signed_rank_test`: exact up to 400 models, the normal
approximation with the tie correction beyond). Otherwise the summary names the choices that
disagree, or says that the data cannot separate the two. The report's average ranks of the
unbiased errors rank on the same signed values (:data:`SIGNED_ESTIMATES`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial

import numpy as np

from calbench._checks import check_probs_labels
from calbench.metrics import METRICS
from calbench.metrics.binning import top_label
from calbench.metrics.unbiased import classwise_bins, cw_ub_sq, ub_sq_from_values, ub_top_weighted
from calbench.stats import (
    multiplicities,
    paired_test,
    ranks_nan_last,
    resample_indices,
    signed_rank_test,
)

#: The tables' unbiased ECE (15 equal-width bins): the variant the headline uses.
DEFAULT_VARIANT = "ece_ub_w15"
#: the registered metric of the default variant (its paired test is the runner-up test)
DEFAULT_METRIC = "ece_ub"
#: significance level of the runner-up tests
ALPHA = 0.05


def signed_root(t: float) -> float:
    """``sign(T) sqrt(|T|)``: the reported ``sqrt(max(T, 0))`` where ``T >= 0``, and below 0
    where the unbiased estimate is (an error too small to measure). Ranking on it ranks on the
    unclipped ``T``: two calibrators whose clipped errors both print as 0 are not tied."""
    return float(np.sign(t) * np.sqrt(abs(t)))


def _top(n_bins: int, binning: str, p, y) -> float:
    return signed_root(ub_sq_from_values(*top_label(p, y), n_bins, binning))


def _classwise(p, y) -> float:
    # the registered cwece_ub's bins: 15 per class, fewer when thin (classwise_bins)
    return signed_root(cw_ub_sq(p, y, classwise_bins(p.shape[0], p.shape[1], 15)))


#: variant -> (label, f(probs, labels) -> float): the unbiased error's signed root
#: (:func:`signed_root`); every variant is an error: lower is better
VARIANTS: dict[str, tuple[str, Callable]] = {
    "ece_ub_w10": ("Unbiased ECE, 10 equal-width bins", partial(_top, 10, "width")),
    DEFAULT_VARIANT: ("Unbiased ECE, 15 equal-width bins", partial(_top, 15, "width")),
    "ece_ub_w20": ("Unbiased ECE, 20 equal-width bins", partial(_top, 20, "width")),
    "ece_ub_m15": ("Unbiased ECE, 15 equal-mass bins", partial(_top, 15, "mass")),
    "cwece_ub": ("Unbiased classwise ECE, up to 15 bins", _classwise),
}

#: registered metric -> the variant that computes its estimator signed: the metric reports
#: ``sqrt(max(T, 0))``, the variant :func:`signed_root` of the same ``T``, so every ranking of
#: these metrics (the report's average ranks, its findings, this section) ranks on the signed
#: value and names the same winner (clipping ties every ``T <= 0`` at 0)
SIGNED_ESTIMATES = {
    DEFAULT_METRIC: DEFAULT_VARIANT,
    "ece_ub_mass": "ece_ub_m15",
    "cwece_ub": "cwece_ub",
}


def signed_estimate(metric: str, probs, labels) -> float:
    """The signed estimate that ranks ``metric`` (a key of :data:`SIGNED_ESTIMATES`) on
    ``probs`` and ``labels``: its variant's :func:`signed_root` of the metric's ``T``."""
    return float(VARIANTS[SIGNED_ESTIMATES[metric]][1](probs, labels))


def first_place_probability(
    probs_by_method: Mapping[str, np.ndarray],
    labels,
    *,
    n_resamples: int = 200,
    seed: int = 0,
) -> dict[str, float]:
    """Share of bootstrap resamples of the samples in which each method has the lowest unbiased
    squared ECE ``T`` (15 equal-width bins, unclipped). Every method is evaluated on the same
    resampled indices
    (:func:`calbench.stats.resample_indices`); a tie for first shares the resample equally."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    methods = list(probs_by_method)
    y = np.asarray(labels)
    n = y.shape[0]
    # the unclipped T of each resample (ties only where the estimates are equal)
    weighted = {
        m: ub_top_weighted(*top_label(*check_probs_labels(p, y)), 15)
        for m, p in probs_by_method.items()
    }
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
    partitions: Sequence[Mapping[str, np.ndarray]] = (),
) -> list[dict]:
    """One row per (method, variant): its value on the test half (the unbiased error's signed
    root, :func:`signed_root`: negative where the estimate fell below 0), its rank among the model's
    methods under that variant, and (default variant only) its first-place probability over
    ``n_resamples`` bootstrap resamples (NaN when 0). The default variant's winner (the one
    method of rank 1) carries ``p_runner_up``: the p-value of the paired test of
    :data:`DEFAULT_METRIC` (its registry test: equal population calibration error) against the
    method of the next rank; NaN on every other row, and on all rows when first place is tied.

    ``partitions``: a cross-fitted study's other partitions' out-of-fold probabilities (the
    first is ``probs_by_method``): each value is then the mean over all partitions (the value
    the metric rows report, :func:`calbench.steps.crossfit_evaluate_rows`) and the ranks are of
    those means; the first-place probabilities and the runner-up test stay the first
    partition's (its samples' resampling)."""
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
        values = [
            float(np.mean([fn(p[m], labels) for p in (probs_by_method, *partitions)]))
            for m in methods
        ]
        r = ranks_nan_last(values)
        p_up = dict.fromkeys(methods, math.nan)
        if variant == DEFAULT_VARIANT and len(methods) > 1 and np.sum(r == r.min()) == 1:
            order = np.argsort(r, kind="stable")
            win, up = methods[order[0]], methods[order[1]]
            test = paired_test(
                METRICS[DEFAULT_METRIC], probs_by_method[win], probs_by_method[up], labels
            )
            p_up[win] = float(test.p_value)
        for m, value, rank in zip(methods, values, r, strict=True):
            rows.append(
                {
                    "dataset": dataset,
                    "model": model,
                    "method": m,
                    "variant": variant,
                    "value": value,
                    "rank": float(rank),
                    "p_first": p_first[m] if variant == DEFAULT_VARIANT else math.nan,
                    "p_runner_up": p_up[m],
                }
            )
    return rows


def signed_estimates(rows: Sequence[Mapping], half: str = "test") -> list[dict]:
    """The headline value rows (``dataset, model, method, half, metric, value``) of the metrics
    of :data:`SIGNED_ESTIMATES`, signed, from the robustness rows: what ranks these metrics.
    ``half``: the rows' headline half, ``test`` (holdout) or ``oof`` (cross-fitted: the
    robustness rows then hold the mean over partitions of the out-of-fold estimates)."""
    variants = {v: m for m, v in SIGNED_ESTIMATES.items()}
    return [
        {
            "dataset": r["dataset"],
            "model": r["model"],
            "method": r["method"],
            "half": half,
            "metric": variants[r["variant"]],
            "value": float(r["value"]),
        }
        for r in rows
        if r["variant"] in variants
    ]


def _per_model(rows, alpha: float) -> list[dict]:
    """Per model: the default variant's winner, its runner-up and their test, the variants
    under which the winner does not rank first, and the robust verdict."""
    by_model: dict[tuple, dict[str, dict[str, Mapping]]] = {}
    for r in rows:
        key = (r["dataset"], r["model"])
        by_model.setdefault(key, {}).setdefault(r["variant"], {})[r["method"]] = r
    out = []
    for (dataset, model), per_variant in by_model.items():
        default = per_variant.get(DEFAULT_VARIANT, {})
        order = sorted(default, key=lambda m: float(default[m]["rank"]))
        if len(order) < 2:
            continue
        win, up = order[0], order[1]
        p = float(default[win].get("p_runner_up", math.nan))
        tied = float(default[win]["rank"]) != 1.0
        disagree = [
            v
            for v, ms in per_variant.items()
            if v != DEFAULT_VARIANT and win in ms and float(ms[win]["rank"]) != 1.0
        ]
        separated = math.isfinite(p) and p < alpha and not tied
        out.append(
            {
                "dataset": dataset,
                "model": model,
                "winner": win,
                "runner_up": up,
                "p": p,
                "tied": tied,
                "disagree": disagree,
                "separated": separated,
                "robust": separated and not disagree,
            }
        )
    return out


def summarise(rows: Sequence[Mapping], alpha: float = ALPHA) -> dict:
    """The report's robustness answer from the rows of many models.

    Returns ``{"variants": [{"variant", "label", "best", "mean_ranks": {method: rank}}],
    "headline": the methods of best average rank under the default variant, "runner_up": the
    next, "survives": [variants where the headline has the best average rank], "disagree":
    [the other variants], "p": the signed-rank test over models of the headline against the
    runner-up on the default variant's values (:func:`calbench.stats.signed_rank.signed_rank_test`
    over the models with both values; with one model, that model's paired test), "p_floor": its
    smallest attainable p-value, "p_method": how ``p`` was computed (``"exact"``, ``"normal"``:
    the normal approximation, ``"model"``: the one model's paired test, ``"none"``: no test),
    "separated": ``p < alpha``, "robust": one headline method,
    separated and first under every variant, "per_model": [{"dataset", "model", "winner",
    "runner_up", "p", "tied", "disagree", "separated", "robust"}], "p_first": {method: mean
    first-place probability over models}, "models": number of models}``.
    """
    by_variant: dict[str, dict[str, list[float]]] = {}
    p_first: dict[str, list[float]] = {}
    values: dict[tuple, dict[str, float]] = {}
    models = set()
    for r in rows:
        key = (r["dataset"], r["model"])
        models.add(key)
        by_variant.setdefault(r["variant"], {}).setdefault(r["method"], []).append(float(r["rank"]))
        if r["variant"] == DEFAULT_VARIANT:
            values.setdefault(key, {})[r["method"]] = float(r["value"])
            if math.isfinite(float(r["p_first"])):
                p_first.setdefault(r["method"], []).append(float(r["p_first"]))
    if DEFAULT_VARIANT not in by_variant:
        raise ValueError(
            f"the robustness rows have no {DEFAULT_VARIANT} variant (written by an older "
            "calbench?); rerun the calibrate step"
        )
    variants = []
    for variant, per_method in by_variant.items():
        mean = {m: float(np.mean(v)) for m, v in per_method.items()}
        low = min(mean.values())
        best = [m for m, v in mean.items() if v == low]
        label = VARIANTS[variant][0] if variant in VARIANTS else variant
        variants.append({"variant": variant, "label": label, "best": best, "mean_ranks": mean})
    default = next(v for v in variants if v["variant"] == DEFAULT_VARIANT)
    headline = default["best"]
    rest = sorted(
        (m for m in default["mean_ranks"] if m not in headline),
        key=lambda m: default["mean_ranks"][m],
    )
    runner_up = [m for m in rest if default["mean_ranks"][m] == default["mean_ranks"][rest[0]]]
    runner_up = runner_up if rest else []
    survives = [v["variant"] for v in variants if v["best"] == headline]
    disagree = [v["variant"] for v in variants if v["best"] != headline]
    per_model = _per_model(rows, alpha)
    p, floor, method = 1.0, 1.0, "none"
    if len(models) == 1 and per_model:  # one model: its own test of winner against runner-up
        p, floor, method = per_model[0]["p"], 0.0, "model"
    elif len(headline) == 1 and len(runner_up) >= 1:
        h, u = headline[0], runner_up[0]
        d = [v[h] - v[u] for v in values.values() if h in v and u in v]
        test = signed_rank_test([x for x in d if math.isfinite(x)])
        p, floor, method = test.p_value, test.floor, test.method
    separated = len(headline) == 1 and math.isfinite(p) and p < alpha
    return {
        "variants": variants,
        "headline": headline,
        "runner_up": runner_up,
        "survives": survives,
        "disagree": disagree,
        "p": p,
        "p_floor": floor,
        "p_method": method,
        "separated": separated,
        "robust": separated and not disagree,
        "per_model": per_model,
        "p_first": {m: float(np.mean(v)) for m, v in p_first.items()},
        "models": len(models),
    }
