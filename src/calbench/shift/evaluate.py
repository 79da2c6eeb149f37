"""Calibrators fitted on clean data, evaluated under dataset shift (Ovadia et al. 2019, §4).

Each calibrator was fitted on the clean validation half (``fit-calibrator``); here it is applied
unchanged to the test half of every (corruption, severity) and to the clean halves. Metrics are
those of :data:`calbench.metrics.METRICS` (15-bin ECE etc.).

Paired comparisons under shift: for each severity s (0 = the clean test half), per compared
metric (verdict-eligible only: :func:`calbench.stats.comparisons.check_verdict_metrics`; a plug-in
error such as binned ECE is refused, naming ``ece_ub``), temperature scaling against the
uncalibrated model and the best calibrator against temperature scaling. "best" is chosen by
K-fold cross-fitting inside the clean *validation* half (:func:`best_by_crossfit`, reusing
:func:`calbench.steps.select_best`): each calibrator refitted on K - 1 folds and scored on the
held-out one, so none is judged on samples it was fitted on and no test data take part.

Differences of means (accuracy, NLL, Brier score) get a paired percentile bootstrap interval
over test *images* (Efron & Tibshirani 1993, ch. 13) of the mean over the severity's
corruptions: one set of resampled image indices (:func:`calbench.stats.resample_indices`) is
applied to every corruption and both methods, since the corrupted copies of one image are not
independent samples; the p-value is ``min(1, 2 min(share of d* <= 0, share of d* >= 0))``. At
severity 0 the interval is :func:`calbench.stats.paired_bootstrap`'s percentile interval with
the same seed. Unbiased calibration errors (``ece_ub`` ...) get the p-value of a test of equal
(mean) squared calibration error and no interval (:mod:`calbench.shift.ub_compare`,
:data:`NO_INTERVAL_REASON`): :func:`calbench.stats.ub_paired_test` on the clean half, the
jackknife over images of the mean over corruptions at severities 1-5.

Resampled means are computed from per-sample statistics and the resample multiplicities ``W``
(resamples x samples) as ``W @ x / n``: each resample costs one matrix product.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from calbench import isolation
from calbench.calibrators import load_calibrator
from calbench.metrics import METRICS
from calbench.shift.corruptions import SEVERITIES
from calbench.shift.ub_compare import NO_UB_INTERVAL_REASON

#: The two comparisons: (label, method or "best", baseline).
COMPARISONS = (("ts_vs_uncalibrated", "ts", "uncalibrated"), ("best_vs_ts", "best", "ts"))
#: Why a difference of unbiased calibration errors has a p-value but no interval.
NO_INTERVAL_REASON = NO_UB_INTERVAL_REASON


def kind_of(metric: str) -> str | None:
    """How the differences of ``metric`` are tested under shift: ``"bootstrap"`` for a mean
    metric (an interval, :func:`calbench.stats.interval_method`), ``"ub"`` for an unbiased
    squared calibration error (a jackknife test, :mod:`calbench.shift.ub_compare`), else None."""
    from calbench.stats import interval_method  # lazy: code inputs

    m = METRICS.get(metric)
    if m is None:
        return None
    if getattr(m, "jackknife", None) is not None:
        return "ub"
    return "bootstrap" if m.is_mean and interval_method(metric) is not None else None


def has_interval(metric: str) -> bool:
    """Whether the differences of ``metric`` get a bootstrap interval (the means)."""
    return kind_of(metric) == "bootstrap"


def resample_weights(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """Multiplicities ``(n_resamples, n)`` of the bootstrap resamples of
    :func:`calbench.stats.resample_indices` (same draws for the same arguments)."""
    from calbench.stats import multiplicities, resample_indices  # lazy: code inputs

    return np.concatenate(
        [multiplicities(idx, n) for idx in resample_indices(n, n_resamples, seed)]
    )


def resampled_metric(name: str, probs: np.ndarray, labels: np.ndarray, weights: np.ndarray):
    """Values of the mean metric ``name`` on each resample given by ``weights``
    (multiplicities), as weighted means of its per-sample values."""
    n = labels.shape[0]
    metric = METRICS.get(name)
    if metric is None or not metric.is_mean:
        raise ValueError(
            f"metric {name!r} cannot be resampled; use a mean metric "
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
    from calbench.stats.comparisons import check_verdict_metrics  # lazy: code inputs

    unknown = [m for m in [*metrics, *compare_metrics] if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; choose from {sorted(METRICS)}")
    check_verdict_metrics(list(compare_metrics), "shift.compare_metrics")
    unsupported = [m for m in compare_metrics if kind_of(m) is None]
    if unsupported:
        raise ValueError(
            f"shift.compare_metrics: {unsupported} cannot be compared under shift; use ece_ub "
            "or a mean metric (accuracy, nll, nll_modern, brier)"
        )
    if n_bootstrap < 1 and compare_metrics:
        raise ValueError("n_bootstrap must be >= 1 for the paired comparisons")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), e.g. 0.95, got {level}")


def _load_inputs(shift_logits, clean_logits, split):
    """``(clean logits file, val_idx, test_idx, shift logits file)``, checked to agree."""
    from calbench.logits import load_logits  # lazy: code inputs
    from calbench.shift.logits import load_shift_logits, read_split  # lazy: code inputs

    clean = load_logits(clean_logits)
    val_idx, test_idx = read_split(
        split, clean["labels"].shape[0], clean["order_hash"], labels=clean["labels"]
    )
    shifted = load_shift_logits(shift_logits)
    if shifted["order_hash"] != clean["order_hash"] or not np.array_equal(
        shifted["test_idx"], test_idx
    ):
        raise ValueError(
            f"{shift_logits} was computed on other test samples than {clean_logits} with "
            f"{split}; run shift-logits again with these files"
        )
    return clean, val_idx, test_idx, shifted


def best_by_crossfit(
    cals: dict, z_val, y_val, compare_metrics, *, folds: int, seed: int, exclude=(), log=None
) -> dict[str, str]:
    """The "best" calibrator per compared metric by ``folds``-fold cross-fitting inside the
    clean validation half (:func:`calbench.steps.select_best`,
    :func:`calbench.stats.selection.crossfit_scores`): each calibrator is refitted from its method and
    hyperparameters on ``folds - 1`` folds and scored on the held-out one, so no calibrator is
    judged on samples it was fitted on, and no test sample (clean or corrupted) takes part."""
    from calbench.steps import calibrator_maker, select_best  # lazy: code inputs

    if not compare_metrics:
        return {}
    makers = {n: calibrator_maker(type(c).name, c.get_params()) for n, c in cals.items()}
    chosen = {m: METRICS[m] for m in compare_metrics}
    best, _ = select_best(makers, (z_val, y_val), chosen, folds=folds, seed=seed,
                          exclude=list(exclude), log=log)  # fmt: skip
    if not best:
        raise ValueError(
            "no calibrator is a candidate for the cross-fitted best; shorten compare.select_exclude"
        )
    return best


def _bootstrap_cell(stats, m, method, base, keys, q):
    """(value, baseline value, low, high, p) of a mean metric: mean over ``keys``, paired
    percentile bootstrap over images (one resample for every corruption and both methods)."""
    va, vb = (float(np.mean([stats[(x, m, k)][0] for k in keys])) for x in (method, base))
    ba, bb = (np.mean([stats[(x, m, k)][1] for k in keys], axis=0) for x in (method, base))
    diffs = ba - bb
    lo, hi = (float(v) for v in np.quantile(diffs, q))
    share = min(np.mean(diffs <= 0.0), np.mean(diffs >= 0.0))
    return va, vb, lo, hi, float(min(1.0, 2.0 * share))


def _ub_cell(stats, clean, m, method, base, keys, yt):
    """(value, baseline value, p) of an unbiased calibration error: the root of the mean
    unclipped ``T`` over ``keys``; p of :func:`calbench.stats.ub_paired_test` on the clean test
    half, of :func:`calbench.shift.ub_compare.ub_mean_test` over a severity's corruptions."""
    from calbench.metrics.unbiased import root  # lazy: code inputs
    from calbench.shift.ub_compare import mean_ub, ub_mean_test  # lazy: code inputs
    from calbench.stats import ub_paired_test  # lazy: code inputs

    ua = [stats[(method, m, k)][1] for k in keys]
    ub = [stats[(base, m, k)][1] for k in keys]
    if keys == [("clean", 0)]:
        p = ub_paired_test(m, clean[method], clean[base], yt).p_value
    else:
        p = ub_mean_test(ua, ub)[2]
    return float(root(mean_ub(ua))), float(root(mean_ub(ub))), float(p)


def _comparison_rows(stats, clean, yt, best, corr, compare_metrics, meta, level, n_bootstrap):
    """Paired differences per severity of :data:`COMPARISONS`: a mean metric's mean over that
    severity's corruptions with a bootstrap interval; an unbiased calibration error's root mean
    squared error over them with the p-value of the test of equal error (no interval)."""
    compare = []
    groups = {0: [("clean", 0)], **{s: [(c, s) for c in corr] for s in SEVERITIES}}
    q = [(1.0 - level) / 2.0, (1.0 + level) / 2.0]
    for m in compare_metrics:
        kind = kind_of(m)
        for label, method, base in COMPARISONS:
            method = best[m] if method == "best" else method
            for sev, keys in groups.items():
                lo = hi = math.nan
                if kind == "bootstrap":
                    va, vb, lo, hi, p = _bootstrap_cell(stats, m, method, base, keys, q)
                else:
                    va, vb, p = _ub_cell(stats, clean, m, method, base, keys, yt)
                compare.append({**meta, "severity": sev, "metric": m, "comparison": label,
                                "method": method, "baseline": base, "value": va,
                                "baseline_value": vb, "difference": va - vb,
                                "ci_low": lo, "ci_high": hi, "p_value": p,
                                "n_resamples": int(n_bootstrap) if kind == "bootstrap" else 0})  # fmt: skip
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
    select_folds: int = 5,
    select_exclude: list[str] = (),
    log=None,
) -> tuple[list[dict], list[dict]]:
    """Metric rows and paired-comparison rows of one model (columns
    :data:`calbench.results.SHIFT_METRIC_COLUMNS`, :data:`calbench.results.SHIFT_COMPARE_COLUMNS`).
    ``calibrators`` are JSON files named ``<method>.json``; they must include ``ts`` and ``uncalibrated`` when ``compare_metrics`` is not empty, which must be
    verdict-eligible. "best" is cross-fitted inside the clean validation half
    (:func:`best_by_crossfit`, ``select_folds`` folds, ``select_exclude`` not candidates)."""
    from calbench.stats.selection import check_folds  # lazy: code inputs

    _check_options(metrics, compare_metrics, n_bootstrap, level)
    if compare_metrics:
        check_folds(select_folds)
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
    val_probs = {name: isolation.predict(cal, z[val_idx], name=name) for name, cal in cals.items()}
    unknown = sorted(set(select_exclude) - set(cals))
    if compare_metrics and unknown:
        raise ValueError(f"compare.select_exclude names {unknown}, which are not calibrators here")
    best = best_by_crossfit(cals, z[val_idx], y[val_idx], compare_metrics, folds=select_folds,
                            seed=seed, exclude=select_exclude, log=log)  # fmt: skip
    needed = {"ts", "uncalibrated", *best.values()} if compare_metrics else set()
    resampled = [m for m in compare_metrics if has_interval(m)]
    clean_probs: dict = {}  # the compared methods' clean test probabilities (ub_paired_test)
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
            p = isolation.predict(cal, zc, name=name)  # on a copy, checked, read-only
            for m in metrics:
                rows.append({**meta, "method": name, "half": "test", "corruption": c,
                             "severity": s, "metric": m, "value": float(METRICS[m](p, yt))})  # fmt: skip
            if name in needed:
                if c == "clean":
                    clean_probs[name] = p
                for m in compare_metrics:
                    stats[(name, m, (c, s))] = (
                        float(METRICS[m](p, yt)),
                        resampled_metric(m, p, yt, weights)
                        if m in resampled
                        else METRICS[m].jackknife(p, yt, p.dtype),
                    )
    compare = _comparison_rows(stats, clean_probs, yt, best, corr, compare_metrics, meta, level,
                               n_bootstrap)  # fmt: skip
    return rows, compare
