"""The facts of a metric: the :class:`Metric` entry every consumer reads (display, scale,
direction, interval, paired test, reference, whether verdicts may be drawn from it) and the
names of the interval constructions and paired tests a metric may declare."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass

import numpy as np

from calbench._checks import check_probs_labels

#: one-sided basic bound ``[0, 2 t - q_alpha]``, an upper confidence bound that includes 0) and
#: ``"jackknife"`` (the unbiased squared errors ``*_ub``: the normal interval ``T +- z se_jack`` of
#: the unclipped U-statistic, clipped at 0 and square-rooted, :func:`calbench.stats.ub_interval`).
INTERVALS = ("percentile", "basic", "upper", "jackknife")

#: Paired tests a metric may name (:func:`calbench.stats.paired_test`): McNemar's exact test of
#: the discordant pairs (McNemar 1947), the paired t-test and the Wilcoxon signed-rank test of
#: the per-sample differences (Wilcoxon 1945), and the sign-flip permutation test that swaps the
#: two calibrators' outputs sample by sample (Good 2005, ch. 3; exact under exchangeability, a
#: null that two equally calibrated predictors of different sharpness violate), and the
#: jackknife z-test of equal population squared calibration error for the ``*_ub`` metrics
#: (:func:`calbench.stats.ub_paired_test`: ``D = T_a - T_b`` over its jackknife standard error).
PAIRED_TESTS = ("mcnemar_exact", "paired_t", "wilcoxon", "sign_flip", "jackknife_z")

#: Marks an interval a metric did not declare (``None`` is a declared "no interval").
MISSING = "missing"


@dataclass(frozen=True, eq=False)
class Metric:
    """A named metric with the study's defaults and every fact the workflow needs about it.

    ``core(p, y, dtype)`` computes the value from validated arrays (``dtype`` is the caller's
    input dtype, needed only by the modern NLL rule). When ``stats`` is set, the value equals
    ``reduce(*stats(p, y, dtype))`` where every array returned by ``stats`` has one entry per
    sample, so a bootstrap can resample those arrays instead of the ``(N, K)`` input;
    ``is_mean`` marks metrics whose ``reduce`` is a plain mean of a single array.
    ``weighted(p, y, dtype)``, when set, returns ``g(weights)``: the metric with per-sample
    multiplicities. ``weights`` is ``None`` (all ones) or an ``(N,)`` vector (one bootstrap
    resample, ``np.bincount(idx, minlength=N)``), giving a float, or an ``(r, N)`` array of
    ``r`` resamples, giving an ``(r,)`` array whose entry ``i`` equals ``g(weights[i])`` up to
    rounding. :mod:`calbench.stats` evaluates a whole chunk of resamples with one call. It is set
    for the metrics that do not decompose into per-sample arrays (cwECE, the marginal CE) and
    for the top-label metrics whose bins do not depend on the sample set (equal-width ECE and
    MCE, Kull et al.'s ECE and MCE), whose resamples then share the bin ids.
    ``linear(p, y, dtype)``, when set, returns ``(sums, from_sums)``: ``sums(weights)`` gives
    a tuple of arrays linear in the per-sample weights (``(r, N)`` weights give arrays with a
    leading ``r`` axis) and ``from_sums(*sums)`` the metric; the sign-flip test mixes two
    calibrators' sums with it (cwECE, the marginal CE, Kull et al.'s cwECE).

    The facts every consumer reads (keyword arguments; the registry test
    ``tests/metrics/test_metrics_registry.py`` fails when one is missing or inconsistent):

    * ``display``: the label printed in tables; ``scale`` (100.0 prints percent; ``percent``
      is ``scale == 100``, and the old ``percent=True`` argument means ``scale=100``) and
      ``decimals``;
    * ``higher_is_better``: ``True`` for scores (accuracy), ``False`` for errors;
    * ``interval``: the bootstrap interval construction of :data:`INTERVALS`, or ``None`` for no
      interval, with ``no_interval_reason`` (one sentence the report prints);
    * ``paired_test``: how two calibrators are compared on the same test samples
      (:data:`PAIRED_TESTS`);
    * ``reference``: the paper defining the metric (authors, year, equation);
    * ``verdicts``: whether significance marks, ranks, CD diagrams, robustness verdicts and
      findings may be drawn from this metric: ``True`` only when its estimator's bias does not
      depend on the predictor's sharpness (sample means of per-sample scores: accuracy, NLL,
      Brier score; the unbiased squared calibration errors ``ece_ub``, ``ece_ub_mass``,
      ``cwece_ub``) and its paired test's null is "equal population value" (so not the
      sign-flip test, whose null is exchangeability). Plug-in binned or kernel calibration
      errors (ECE, MCE, cwECE, ACE, KS, smECE, ...) are biased upward by an amount that shrinks
      as predictions get coarser: they stay in the tables as descriptive numbers only.

    ``jackknife(p, y, dtype)``, when set, returns a :class:`calbench.metrics.unbiased.UStat`:
    the unclipped unbiased squared error, its ``N`` leave-one-out values and the jackknife's
    variance excess (:mod:`calbench.metrics.unbiased`), from which
    :func:`calbench.stats.ub_interval` and :func:`calbench.stats.ub_paired_test` are built
    (``interval = "jackknife"``, ``paired_test = "jackknife_z"``).

    ``joint(p, y, dtype)``, when set, returns the values of every metric computed together with
    this one, by name (the four refinement-split metrics share one temperature fit, the four
    conformal ones two sets of scores, the three calibration tests one sort): its entry
    ``name`` equals ``core(p, y, dtype)`` exactly, and a caller computing several metrics of
    one set (:func:`calbench.metrics.metric_values`) calls each distinct ``joint`` once.
    """

    name: str
    core: Callable[..., float]
    stats: Callable[..., tuple[np.ndarray, ...]] | None = None
    reduce: Callable[..., float] | None = None
    is_mean: bool = False
    percent: bool = False
    weighted: Callable[..., Callable[..., float]] | None = None
    _: KW_ONLY
    display: str | None = None
    scale: float | None = None
    decimals: int | None = None
    higher_is_better: bool | None = None
    interval: str | None = MISSING
    no_interval_reason: str = ""
    paired_test: str | None = None
    reference: str | None = None
    linear: Callable[..., tuple] | None = None
    verdicts: bool | None = None
    jackknife: Callable[..., tuple] | None = None
    joint: Callable[..., dict] | None = None

    def __post_init__(self) -> None:
        if self.scale is None and self.percent:
            object.__setattr__(self, "scale", 100.0)
        if self.percent and self.scale != 100.0:
            raise ValueError(
                f"metric {self.name!r}: percent=True contradicts scale={self.scale!r}; "
                "pass scale=100.0 alone"
            )
        object.__setattr__(self, "percent", self.scale == 100.0)

    def __call__(self, probs, labels) -> float:
        dtype = getattr(probs, "dtype", None)
        p, y = check_probs_labels(probs, labels)
        return self.core(p, y, dtype)

    def missing_facts(self) -> list[str]:
        """Names of the facts this metric does not declare, or declares inconsistently."""
        return list(self.fact_problems())

    def fact_problems(self) -> dict[str, str]:
        """The facts of :meth:`missing_facts`, each with ``""`` when it is not declared (or
        declared as no allowed value) or, when its declaration contradicts another fact, the
        sentence saying which and how to fix it."""
        out: dict[str, str] = {}
        if not isinstance(self.display, str) or not self.display:
            out["display"] = ""
        if self.scale not in (1.0, 100.0):
            out["scale"] = ""
        if (
            isinstance(self.decimals, bool)
            or not isinstance(self.decimals, int)
            or self.decimals < 0
        ):
            out["decimals"] = ""
        if not isinstance(self.higher_is_better, bool):
            out["higher_is_better"] = ""
        if self.interval is not None and self.interval not in INTERVALS:
            out["interval"] = ""
        if self.interval is None and not (self.no_interval_reason or "").strip():
            out["no_interval_reason"] = ""
        if self.interval is not None and self.no_interval_reason:
            out["no_interval_reason"] = (
                f"declares a no_interval_reason with interval {self.interval!r}; drop one of them"
            )
        if self.paired_test not in PAIRED_TESTS:
            out["paired_test"] = ""
        if not isinstance(self.reference, str) or not any(c.isdigit() for c in self.reference):
            out["reference"] = ""
        if not isinstance(self.verdicts, bool):
            out["verdicts"] = ""
        elif self.verdicts and self.paired_test == "sign_flip":
            out["verdicts"] = (
                "declares verdicts=True with paired_test 'sign_flip', whose null is "
                "exchangeability, not equal value, so no verdict may rest on it; declare "
                "verdicts=False (or, with per-sample values, a paired test of equal value)"
            )
        needs_jackknife = self.interval == "jackknife" or self.paired_test == "jackknife_z"
        if needs_jackknife and self.jackknife is None:
            out["jackknife"] = ""
        return out

    @property
    def has_interval(self) -> bool:
        """Whether the report shows a bootstrap interval for this metric."""
        return self.interval in INTERVALS


def _decomposed(
    name: str,
    stats,
    reduce,
    *,
    is_mean: bool = False,
    percent: bool = False,
    weighted=None,
    **facts,
) -> Metric:
    def core(p, y, dtype=None):
        return float(reduce(*stats(p, y, dtype)))

    return Metric(name, core, stats, reduce, is_mean, percent, weighted, **facts)
