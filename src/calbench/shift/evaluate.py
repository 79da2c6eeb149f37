"""Calibrators fitted on clean data, evaluated under dataset shift (Ovadia et al. 2019, §4).

Each calibrator was fitted on the clean validation half (``fit-calibrator``); here it is applied
unchanged to the test half of every (corruption, severity) and to the clean halves. Metrics are
those of :data:`calbench.metrics.METRICS` (15-bin ECE etc.).

Paired comparisons under shift: for each severity s (0 = the clean test half), the statistic of
a method is its metric *averaged over the corruptions* at severity s. Two comparisons per
metric: temperature scaling against the uncalibrated model, and the best calibrator against
temperature scaling, the best being chosen on the clean *validation* half (the data the
calibrators were fitted on: no test data take part in the choice; in-sample, so flexible
calibrators such as histogram binning look better there than they generalise). Differences of
means (accuracy, NLL, Brier score: metrics whose registry entry has an interval,
:func:`calbench.stats.interval_method`) get a paired percentile bootstrap interval over test
*images* (Efron & Tibshirani 1993, ch. 13): one set of resampled image indices
(:func:`calbench.stats.resample_indices`) is applied to every corruption and both methods, since
the corrupted copies of one image are not independent samples; the p-value is
``min(1, 2 min(share of d* <= 0, share of d* >= 0))``. At severity 0 the interval is
:func:`calbench.stats.paired_bootstrap`'s percentile interval with the same seed. Differences of
ECE get neither interval nor p-value (:data:`NO_INTERVAL_REASON`): blank ``ci_low``,
``ci_high`` and ``p_value``.

Resampled metrics are computed from per-sample statistics and the resample multiplicities
``W`` (resamples x samples): a mean metric is ``W @ x / n``; the 15-bin ECE is
``sum_b |W @ (1[bin=b] correct) - W @ (1[bin=b] conf)| / n`` (Guo et al. 2017, eq. 3 with the
bin weight n_b / n folded in), so each resample costs one matrix product.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from calbench.calibrators import load_calibrator
from calbench.metrics import METRICS
from calbench.shift.corruptions import SEVERITIES

METRIC_COLUMNS = ("dataset", "model", "method", "half", "corruption", "severity", "metric", "value")
COMPARE_COLUMNS = (
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
#: The two comparisons: (label, method or "best", baseline).
COMPARISONS = (("ts_vs_uncalibrated", "ts", "uncalibrated"), ("best_vs_ts", "best", "ts"))
#: Why a difference of ECEs has no interval (docs/statistics.md, perf/bench_coverage.py).
NO_INTERVAL_REASON = (
    "the paired bootstrap interval of a difference of ECEs covered the population difference "
    "in as few as 44% of simulated test sets (percentile; the bias-corrected basic interval "
    "71-89.8%; perf/bench_coverage.py): the two plug-in ECEs are biased upward by different "
    "amounts, most for the better-calibrated side"
)


def has_interval(metric: str) -> bool:
    """Whether the differences of ``metric`` get an interval and p-value: metrics whose
    registry entry has one (:func:`calbench.stats.interval_method`), the means."""
    from calbench.stats import interval_method  # lazy: code inputs

    return interval_method(metric) is not None


def resample_weights(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """Multiplicities ``(n_resamples, n)`` of the bootstrap resamples of
    :func:`calbench.stats.resample_indices` (same draws for the same arguments)."""
    from calbench.stats import multiplicities, resample_indices  # lazy: code inputs

    return np.concatenate(
        [multiplicities(idx, n) for idx in resample_indices(n, n_resamples, seed)]
    )


def resampled_metric(name: str, probs: np.ndarray, labels: np.ndarray, weights: np.ndarray):
    """Values of metric ``name`` on each resample given by ``weights`` (multiplicities): ECE
    through its weighted form (:mod:`calbench.metrics`), a mean metric as a weighted mean."""
    n = labels.shape[0]
    if name == "ece":
        return METRICS["ece"].weighted(probs, labels, probs.dtype)(weights)
    metric = METRICS.get(name)
    if metric is None or not metric.is_mean:
        raise ValueError(
            f"metric {name!r} cannot be compared under shift; use ece or a mean metric "
            "(accuracy, nll, nll_modern, brier)"
        )
    (x,) = metric.stats(probs, labels, probs.dtype)
    return weights @ np.asarray(x, dtype=np.float64) / n


def _load_calibrators(paths) -> dict:
    cals = {}
    for path in paths:
        name = Path(path).stem
        if name in cals:
            raise ValueError(f"two calibrator files are named {name!r}; give each method one file")
        cals[name] = load_calibrator(path)
    return cals


def _check_options(metrics, compare_metrics, n_bootstrap: int, level: float) -> None:
    unknown = [m for m in [*metrics, *compare_metrics] if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; choose from {sorted(METRICS)}")
    if n_bootstrap < 1 and compare_metrics:
        raise ValueError("n_bootstrap must be >= 1 for the paired comparisons")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), e.g. 0.95, got {level}")


def _load_inputs(shift_logits, clean_logits, split):
    """``(clean logits file, val_idx, test_idx, shift logits file)``, checked to agree."""
    from calbench.logits import load_logits  # lazy: code inputs
    from calbench.shift.logits import load_shift_logits, read_split  # lazy: code inputs

    clean = load_logits(clean_logits)
    val_idx, test_idx = read_split(split, clean["labels"].shape[0], clean["order_hash"])
    shifted = load_shift_logits(shift_logits)
    if shifted["order_hash"] != clean["order_hash"] or not np.array_equal(
        shifted["test_idx"], test_idx
    ):
        raise ValueError(
            f"{shift_logits} was computed on other test samples than {clean_logits} with "
            f"{split}; run shift-logits again with these files"
        )
    return clean, val_idx, test_idx, shifted


def _best_on_validation(val_probs: dict, y_val, compare_metrics) -> dict[str, str]:
    """The best calibrator per compared metric on the clean validation half (ties: first)."""
    best = {}
    for m in compare_metrics:
        higher = bool(METRICS[m].higher_is_better)
        scores = {k: float(METRICS[m](val_probs[k], y_val)) for k in val_probs}
        worst = -math.inf if higher else math.inf
        pick = max if higher else min
        best[m] = pick(scores, key=lambda k: scores[k] if math.isfinite(scores[k]) else worst)
    return best


def _comparison_rows(stats, best, corr, compare_metrics, meta, level, n_bootstrap) -> list[dict]:
    """Paired differences per severity (mean over that severity's corruptions) of
    :data:`COMPARISONS`, from the per-condition values and resampled values in ``stats``."""
    compare = []
    groups = {0: [("clean", 0)], **{s: [(c, s) for c in corr] for s in SEVERITIES}}
    lo_q, hi_q = (1.0 - level) / 2.0, (1.0 + level) / 2.0
    for m in compare_metrics:
        interval = has_interval(m)

        def stat(method, sev, m=m, interval=interval):
            keys = groups[sev]
            value = float(np.mean([stats[(method, m, k)][0] for k in keys]))
            if not interval:
                return value, None
            return value, np.mean([stats[(method, m, k)][1] for k in keys], axis=0)

        for label, method, base in COMPARISONS:
            method = best[m] if method == "best" else method
            for sev in groups:
                va, ba = stat(method, sev)
                vb, bb = stat(base, sev)
                lo = hi = p = math.nan
                if interval:
                    diffs = ba - bb
                    lo, hi = (float(q) for q in np.quantile(diffs, [lo_q, hi_q]))
                    share = min(np.mean(diffs <= 0.0), np.mean(diffs >= 0.0))
                    p = float(min(1.0, 2.0 * share))
                compare.append({**meta, "severity": sev, "metric": m, "comparison": label,
                                "method": method, "baseline": base, "value": va,
                                "baseline_value": vb, "difference": va - vb,
                                "ci_low": lo, "ci_high": hi, "p_value": p,
                                "n_resamples": int(n_bootstrap)})  # fmt: skip
    return compare


def evaluate_shift(
    shift_logits,
    clean_logits,
    split,
    calibrators: list,
    *,
    metrics: list[str],
    compare_metrics: list[str],
    n_bootstrap: int = 200,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[list[dict], list[dict]]:
    """Metric rows and paired-comparison rows of one model (columns :data:`METRIC_COLUMNS`,
    :data:`COMPARE_COLUMNS`). ``calibrators`` are JSON files named ``<method>.json``; they must
    include ``ts`` and ``uncalibrated`` when ``compare_metrics`` is not empty."""
    _check_options(metrics, compare_metrics, n_bootstrap, level)
    clean, val_idx, test_idx, shifted = _load_inputs(shift_logits, clean_logits, split)
    cals = _load_calibrators(calibrators)
    if compare_metrics:
        missing = [m for m in ("ts", "uncalibrated") if m not in cals]
        if missing:
            raise ValueError(
                f"the shift comparisons need calibrators {missing}; pass their JSON files "
                "(ts.json, uncalibrated.json)"
            )
    z, y = clean["logits"], clean["labels"]
    yt = y[test_idx]
    meta = {"dataset": clean["dataset"], "model": clean["model"]}
    corr = shifted["corruptions"]
    conditions = [("clean", 0)] + [(c, s) for c in corr for s in SEVERITIES]
    val_probs = {name: cal.predict_proba(z[val_idx]) for name, cal in cals.items()}
    best = _best_on_validation(val_probs, y[val_idx], compare_metrics)
    needed = {"ts", "uncalibrated", *best.values()} if compare_metrics else set()
    resampled = [m for m in compare_metrics if has_interval(m)]
    weights = resample_weights(len(test_idx), n_bootstrap, seed) if resampled else None
    # (method, metric, condition) -> (value, resampled values), for the compared methods only;
    # probabilities are not kept (76 conditions x 100 classes would not fit in memory)
    stats: dict = {}
    rows = []
    for name, cal in cals.items():
        for m in metrics:
            rows.append({**meta, "method": name, "half": "val", "corruption": "clean",
                         "severity": 0, "metric": m,
                         "value": float(METRICS[m](val_probs[name], y[val_idx]))})  # fmt: skip
        for c, s in conditions:
            zc = z[test_idx] if c == "clean" else shifted["logits"][corr.index(c), s - 1]
            p = cal.predict_proba(zc)
            for m in metrics:
                rows.append({**meta, "method": name, "half": "test", "corruption": c,
                             "severity": s, "metric": m, "value": float(METRICS[m](p, yt))})  # fmt: skip
            if name in needed:
                for m in compare_metrics:
                    stats[(name, m, (c, s))] = (
                        float(METRICS[m](p, yt)),
                        resampled_metric(m, p, yt, weights) if m in resampled else None,
                    )
    compare = _comparison_rows(stats, best, corr, compare_metrics, meta, level, n_bootstrap)
    return rows, compare
