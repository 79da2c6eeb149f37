"""Paired comparisons of one model's calibrators on the test half, each verdict with its
direction and the null hypothesis its test rejects.

:func:`compare_rows` tests, per metric, every calibrator against each baseline and the
"best" calibrator (chosen without the test half: :mod:`calbench.stats.selection`) against every other
one, with Holm's (1979) correction over the distinct pairs of those questions on one model and
metric (:func:`holm_family`; :func:`calbench.stats.paired_test`, :func:`calbench.stats.holm`).

Only metrics whose estimator's bias does not depend on the predictions' sharpness may carry a
verdict (``Metric.verdicts``: accuracy, NLL, Brier score, the unbiased squared calibration
errors). The plug-in binned errors (ECE, classwise ECE, MCE, ...) are biased upward by an amount
that shrinks as predictions get coarser, so a test or rank on them rewards a coarse predictor
over an equally calibrated sharp one; they stay in the tables as descriptive numbers
(:func:`check_verdict_metrics` refuses them here).

Every row says which way the difference goes (:func:`direction`: ``better`` or ``worse`` than
the baseline or rival, by the metric's direction), the resolution floor of a resampling test
(``p_floor = 1 / (B + 1)``: a p-value at the floor means "no resample was as extreme", and
prints as ``<= floor``) and, in words, the null hypothesis of the test
(:data:`NULL_HYPOTHESES`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from calbench.metrics import METRICS
from calbench.stats import (
    PairedSides,
    holm,
    interval_method,
    min_adjusted_p,
    permutations_for,
)

#: What each paired test's null hypothesis is, in the words the report prints next to its
#: results. The sign-flip test is exact under exchangeability of the two calibrators' outputs
#: per sample; equal calibration error does not imply it (a calibrated predictor and its
#: calibrated coarsening differ in distribution), so a rejection is not evidence of unequal
#: calibration error.
NULL_HYPOTHESES = {
    "mcnemar_exact": (
        "equal accuracy (a sample one calibrator gets right and the other wrong is as likely "
        "either way)"
    ),
    "paired_t": "equal expected per-sample score (equal population NLL or Brier score)",
    "wilcoxon": "per-sample differences distributed symmetrically about zero",
    "sign_flip": (
        "exchangeability of the two calibrators' outputs on each sample (not equal "
        "calibration error)"
    ),
    "jackknife_z": "equal population binned squared calibration error (unbiased estimate)",
    "corrected_repeated_cv_t": (
        "equal expected score of the two calibrators when fitted on (F - 1) / F of the samples "
        "(over fits and test samples; cross-fitted)"
    ),
}


def null_hypothesis(test: str) -> str:
    """The wording of ``test``'s null hypothesis (:data:`NULL_HYPOTHESES`)."""
    try:
        return NULL_HYPOTHESES[test]
    except KeyError:
        raise ValueError(
            f"no null-hypothesis wording for paired test {test!r}; add it to "
            "calbench.stats.comparisons.NULL_HYPOTHESES"
        ) from None


#: the verdict-eligible metric to compare instead of a plug-in one
INSTEAD = {
    "ece": "ece_ub",
    "mce": "ece_ub",
    "ece_kull": "ece_ub",
    "mce_kull": "ece_ub",
    "smece": "ece_ub",
    "ks": "ece_ub",
    "sbece": "ece_ub",
    "dece": "ece_ub",
    "debiased_ece": "ece_ub",
    "ace": "ece_ub_mass",
    "ece_l2_mass": "ece_ub_mass",
    "cwece": "cwece_ub",
    "cwece_kull": "cwece_ub",
    "marginal_ce": "cwece_ub",
}


def verdict_metrics() -> list[str]:
    """The metrics of :data:`calbench.metrics.METRICS` a verdict may be drawn from
    (``Metric.verdicts``)."""
    return [name for name, m in METRICS.items() if m.verdicts]


def check_verdict_metrics(names: Sequence[str], where: str = "compare.metrics") -> list[str]:
    """``names`` checked to be registered metrics whose ``verdicts`` fact is true; a plug-in
    metric fails with one line naming the metric to use instead."""
    for name in names:
        if name not in METRICS:
            raise ValueError(f"{where}: unknown metric {name!r}; choose from {sorted(METRICS)}")
        if not METRICS[name].verdicts:
            use = INSTEAD.get(name)
            hint = f"use {use!r}" if use else f"use one of {verdict_metrics()}"
            raise ValueError(
                f"{where}: {name!r} is a plug-in estimate whose bias depends on the "
                f"predictions' sharpness, so no test or rank may be drawn from it; {hint} "
                "(the tables still show it)"
            )
    return list(names)


def direction(difference: float, higher_is_better: bool) -> str:
    """``better`` or ``worse`` (the method against its baseline or rival, by the metric's
    direction), ``equal`` for a zero difference, ``""`` when the difference is not finite."""
    if not math.isfinite(difference):
        return ""
    if difference == 0:
        return "equal"
    return "better" if (difference > 0) == bool(higher_is_better) else "worse"


def p_floor(test) -> float:
    """The resolution floor of a resampling test's p-value (``1 / (B + 1)`` for ``B`` flips):
    a p-value there says only "at most this". 0 for the analytic and exact tests, whose
    p-values are exact."""
    return float(test.min_p) if getattr(test, "n_permutations", 0) > 0 else 0.0


def comparison_pairs(
    methods: list[str], baselines: list[str], best: str | None
) -> list[tuple[str, str, str]]:
    """The comparison families of one (dataset, model, metric) as ``(family, method, baseline)``.

    For each baseline ``b``: family ``vs:b``, every other method against ``b`` (does a
    calibrator improve on no calibration, on temperature scaling?); family ``best`` (when
    ``best`` is given): the selected calibrator against every other method (is the winner
    really better?). The questions share pairs; Holm's correction runs once per (dataset, model,
    metric) over their distinct pairs (:func:`holm_family`, :func:`compare_rows`).
    """
    out = [(f"vs:{b}", m, b) for b in baselines for m in methods if m != b]
    if best is not None:
        out += [("best", best, m) for m in methods if m != best]
    return out


def holm_family(pairs: Sequence[tuple[str, str, str]]) -> list[frozenset]:
    """The Holm family of one (dataset, model, metric): the distinct unordered pairs of
    :func:`comparison_pairs`, in order of first appearance.

    The questions overlap (temperature scaling against uncalibrated in ``vs:uncalibrated`` and
    uncalibrated against temperature scaling in ``vs:ts``; the best pick against each baseline
    in ``best``); each pair is tested once and enters Holm's (1979) correction once, over the
    union of the questions, so the family-wise error of all the verdicts on one model and metric
    is controlled at ``alpha`` and no pair gets two verdicts."""
    return list(dict.fromkeys(frozenset((a, b)) for _, a, b in pairs))


def compare_rows(
    halves: dict,
    probs_by_method: dict[str, np.ndarray],
    metrics: dict,
    baselines: list[str],
    *,
    best: Mapping[str, str] | None = None,
    selected_on: str = "",
    n_bootstrap: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    jackknives: Mapping[str, Mapping] | None = None,
) -> list[dict]:
    """Paired tests of the calibrators of one model on the test half, in families.

    Per metric, the families of :func:`comparison_pairs`: each method against each baseline
    (``family = "vs:<baseline>"``) and, where ``best`` names the selected calibrator of that
    metric, the selection against every other method (``family = "best"``; ``selected_on``
    records how it was chosen, e.g. ``val:5-fold cross-fit`` by
    :func:`calbench.stats.selection.crossfit_scores`; never the test half, which measures the
    difference). Every metric must be verdict-eligible (:func:`check_verdict_metrics`).

    ``difference = metric(method) - metric(baseline)`` on the test half and ``direction`` says
    whether that is ``better`` or ``worse`` for the method (:func:`direction`). Its p-value comes
    from the metric's paired test (:func:`calbench.stats.paired_test`; a sign-flip test uses
    ``B = max(n_bootstrap, permutations_for(m, 1 - level))`` flips, so that ``m / (B + 1)`` is
    four times below ``alpha = 1 - level``); ``p_floor`` is the test's resolution floor
    (:func:`p_floor`), ``null_hypothesis`` the wording of its null (:data:`NULL_HYPOTHESES`);
    ``family`` names the question the row answers; ``p_holm`` is Holm's adjustment over the
    ``family_size = m`` distinct pairs of all the questions on this model and metric
    (:func:`holm_family`: a pair asked by two questions is tested once and its rows carry the
    same p-values and verdict, the difference mirrored) and
    ``min_p_holm`` the smallest adjusted p-value the test could reach on these samples: above
    ``alpha`` the comparison cannot be significant whatever the data. The interval of the
    difference is the paired percentile bootstrap (``n_bootstrap`` resamples, the same
    resampled test indices for both methods) for metrics with a percentile interval (means:
    accuracy, NLL, Brier score); others get none (``interval = "none"``). ``jackknives``:
    method -> metric -> the :func:`calbench.stats.ub_jackknife` of its test-half probabilities
    already computed (:func:`calbench.steps.evaluate_rows`'s), not computed again.
    """
    check_verdict_metrics(list(metrics))
    _, y = halves["test"]
    missing = [b for b in baselines if b not in probs_by_method]
    if missing:
        raise ValueError(
            f"baselines {missing} are not among the calibrators {list(probs_by_method)}; "
            "pass their JSON files or drop them from --baselines"
        )
    best = dict(best or {})
    bad = {k: v for k, v in best.items() if v not in probs_by_method}
    if bad:
        raise ValueError(f"the selected calibrators {bad} are not among {list(probs_by_method)}")
    alpha = 1.0 - level
    methods = list(probs_by_method)
    rows = []
    for name, fn in metrics.items():
        # each calibrator validated once and its per-sample values, jackknife and resampled
        # values computed once for all the comparisons it enters
        kept = {m: j[name] for m, j in (jackknives or {}).items() if name in j}
        sides = PairedSides(fn, probs_by_method, y, jackknives=kept)
        values = {m: sides.value(m) for m in methods}
        higher = bool(getattr(fn, "higher_is_better", False))
        pairs = comparison_pairs(methods, list(baselines), best.get(name))
        # one Holm family per (model, metric): the distinct unordered pairs of all questions,
        # each tested once, so a pair asked twice (ts vs uncalibrated, uncalibrated vs ts, the
        # best pick vs a baseline) gets one adjusted p-value and one verdict
        m = len(holm_family(pairs))
        # the difference gets the paired percentile interval when the metric is a mean of
        # per-sample values; other differences get none (coverage not verified): the test
        # carries the evidence
        method_ci = "percentile" if interval_method(fn) == "percentile" else None
        done: dict[tuple[str, str, int], tuple] = {}
        metric_rows = []
        for family, a, b in pairs:
            n_perm = max(n_bootstrap, permutations_for(m, alpha))
            key = (a, b, n_perm)
            if key not in done:
                rev = done.get((b, a, n_perm))
                if rev is not None:  # the reversed pair: same p-value, negated difference
                    t, lo, hi = rev
                    done[key] = (t, -hi, -lo)
                else:
                    t = sides.test(a, b, n_permutations=n_perm, seed=seed)
                    lo = hi = float("nan")
                    if method_ci is not None:
                        ci = sides.bootstrap(
                            a, b, n_resamples=n_bootstrap, level=level, seed=seed, method=method_ci
                        )
                        lo, hi = float(ci.low), float(ci.high)
                    done[key] = (t, lo, hi)
            t, lo, hi = done[key]
            diff = values[a] - values[b]
            metric_rows.append(
                {
                    "dataset": halves["meta"]["dataset"],
                    "model": halves["meta"]["model"],
                    "half": "test",
                    "metric": name,
                    "method": a,
                    "baseline": b,
                    "value": values[a],
                    "baseline_value": values[b],
                    "difference": diff,
                    "ci_low": lo,
                    "ci_high": hi,
                    "p_value": float(t.p_value),
                    "n_resamples": n_bootstrap,
                    "interval": method_ci or "none",
                    "selected_on": selected_on if family == "best" else "",
                    "family": family,
                    "family_size": m,
                    "test": t.test,
                    "n_permutations": t.n_permutations,
                    "p_holm": float("nan"),
                    "min_p_holm": min_adjusted_p(t.min_p, m),
                    "alpha": alpha,
                    "direction": direction(diff, higher),
                    "p_floor": p_floor(t),
                    "null_hypothesis": null_hypothesis(t.test),
                }
            )
        first: dict[frozenset, float] = {}
        for r in metric_rows:
            first.setdefault(frozenset((r["method"], r["baseline"])), r["p_value"])
        adjusted = dict(zip(first, holm(list(first.values())), strict=True))
        for r in metric_rows:
            r["p_holm"] = float(adjusted[frozenset((r["method"], r["baseline"]))])
        rows += metric_rows
    return rows
