"""Calibration metrics on probabilities ``(N, K)`` and integer labels ``(N,)``; fractions, not
percent.

``METRICS`` maps the names the workflow reports to callables ``f(probs, labels) -> float`` with
the study's defaults (Vasilev, MSU 2021: 15 equal-width bins, NLL with scikit-learn <= 1.0
clipping) and the seed papers' extra metrics. Each entry is a :class:`Metric`; most also expose
a per-sample decomposition (``stats`` + ``reduce``) that :mod:`calbench.stats` uses to bootstrap
without re-indexing the ``(N, K)`` array.

Kull et al. 2019's conventions are registered as ``ece_kull``, ``mce_kull``, ``cwece_kull`` (sum
over classes, their per-class binning), ``brier_kull`` (divided by K) and ``nll_kull``
(:mod:`calbench.metrics.kull`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass
from functools import partial

import numpy as np

from calbench._checks import check_probs_labels
from calbench.metrics import conformal, refinement, selective, unbiased
from calbench.metrics.binning import (
    ReliabilityBins,
    fixed_bins_weighted,
    reliability_bins,
    top_label,
    weight_rows,
    weighted_bincounts,
    width_bin_ids,
)
from calbench.metrics.ece import (
    adaptive_ece,
    calibration_error_1d,
    classwise_binner,
    classwise_ece,
    classwise_from_sums,
    classwise_sums,
    classwise_value,
    debiased_ece,
    debiased_from_values,
    ece,
    errors_from_sums,
    ks_error,
    ks_from_values,
    marginal_ce,
    marginal_from_sums,
    marginal_value,
    mce,
)
from calbench.metrics.kull import (
    cwece_kull,
    cwece_kull_from_sums,
    ece_kull,
    ece_kull_from_values,
    kull_classwise_binner,
    kull_confidence_bins,
    mce_kull,
    mce_kull_from_values,
)
from calbench.metrics.scoring import accuracy, brier, brier_per_sample, nll, nll_per_sample
from calbench.metrics.smooth import smooth_ece_from_values
from calbench.metrics.soft import (
    dece,
    dece_from_values,
    dece_torch,
    sb_ece,
    sb_ece_from_values,
    sb_ece_torch,
    soft_accuracy,
)
from calbench.metrics.sweep import ece_sweep, ece_sweep_from_values

__all__ = [
    "INTERVALS",
    "METRICS",
    "MISSING",
    "PAIRED_TESTS",
    "STUDY_PERCENT",
    "Metric",
    "ReliabilityBins",
    "accuracy",
    "adaptive_ece",
    "brier",
    "classwise_ece",
    "compute_metrics",
    "cwece_kull",
    "debiased_ece",
    "dece",
    "dece_torch",
    "ece",
    "ece_kull",
    "ece_sweep",
    "ks_error",
    "marginal_ce",
    "mce",
    "mce_kull",
    "nll",
    "reliability_bins",
    "sb_ece",
    "sb_ece_torch",
]


#: Interval constructions a metric may name (:mod:`calbench.stats`): ``"percentile"`` (Davison
#: & Hinkley 1997, eq. 5.18), ``"basic"`` (eq. 5.6; Kumar, Liang & Ma 2019) and ``"upper"`` (the
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
        out = []
        if not isinstance(self.display, str) or not self.display:
            out.append("display")
        if self.scale not in (1.0, 100.0):
            out.append("scale")
        if (
            isinstance(self.decimals, bool)
            or not isinstance(self.decimals, int)
            or self.decimals < 0
        ):
            out.append("decimals")
        if not isinstance(self.higher_is_better, bool):
            out.append("higher_is_better")
        if self.interval is not None and self.interval not in INTERVALS:
            out.append("interval")
        if self.interval is None and not (self.no_interval_reason or "").strip():
            out.append("no_interval_reason")
        if self.interval is not None and self.no_interval_reason:
            out.append("no_interval_reason")
        if self.paired_test not in PAIRED_TESTS:
            out.append("paired_test")
        if not isinstance(self.reference, str) or not any(c.isdigit() for c in self.reference):
            out.append("reference")
        if not isinstance(self.verdicts, bool):
            out.append("verdicts")
        elif self.verdicts and self.paired_test == "sign_flip":
            out.append("verdicts")  # the sign-flip null is exchangeability, not equal value
        needs_jackknife = self.interval == "jackknife" or self.paired_test == "jackknife_z"
        if needs_jackknife and self.jackknife is None:
            out.append("jackknife")
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


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x))


def _top(p, y, dtype=None):
    return top_label(p, y)


def _correct(p, y, dtype=None):
    return ((np.argmax(p, axis=1) == y).astype(np.float64),)


def _dece_stats(p, y, dtype=None):
    return top_label(p, y)[0], soft_accuracy(p, y, 100.0)


def _width_weighted(norm: str, n_bins: int = 15):
    """``weighted`` form of the equal-width top-label error ``norm`` (ECE, MCE)."""

    def weighted(p, y, dtype=None):
        conf, correct = top_label(p, y)
        reduce = partial(errors_from_sums, norm=norm)
        return fixed_bins_weighted(
            width_bin_ids(conf, n_bins), conf, correct, n_bins, reduce, conf.shape[0]
        )

    return weighted


def _fixed_sums(ids, x, target, size: int, n: int, rows=None):
    """``sums(weights)`` of a top-label error with fixed bins: ``(count, sum_x, sum_t, total)``
    with a leading axis of one row per weight vector (``None``: all ones, one row); linear in
    the weights (``Metric.linear``)."""

    binned = weighted_bincounts([(ids, rows, None), (ids, rows, x), (ids, rows, target)], size, n)

    def sums(weights=None):
        w, _ = weight_rows(np.ones(n) if weights is None else weights, n)
        return (*binned(w), w.sum(axis=1))

    return sums


def _width_linear(norm: str, n_bins: int = 15):
    """``linear`` form of the equal-width top-label error ``norm`` (ECE, MCE)."""

    def linear(p, y, dtype=None):
        conf, correct = top_label(p, y)
        ids = width_bin_ids(conf, n_bins)
        sums = _fixed_sums(ids, conf, correct, n_bins, conf.shape[0])
        return sums, partial(errors_from_sums, norm=norm)

    return linear


def _kull_reduce(count, sum_x, sum_t, total, norm):
    safe = np.maximum(count, 1.0)
    gap = np.where(count > 0, np.abs(sum_t / safe - sum_x / safe), 0.0)
    if norm == "max":
        return gap.max(axis=-1)
    return np.sum(gap * count, axis=-1) / total


def _kull_weighted(norm: str):
    """``weighted`` form of Kull et al.'s (lo, hi] top-label ECE / MCE: the membership of every
    bin is fixed by the confidences (a confidence on a float bound may be in two bins or none,
    as in :func:`calbench.metrics.kull._confidence_gaps`)."""

    def weighted(p, y, dtype=None):
        conf, correct = top_label(p, y)
        upper, width = kull_confidence_bins()
        rows, ids = [], []
        for b, u in enumerate(upper):
            lo = u - width
            member = np.flatnonzero((conf <= u) & ((conf > lo) | (lo == 0)))
            rows.append(member)
            ids.append(np.full(member.shape[0], b, dtype=np.int64))
        rows_a, ids_a = np.concatenate(rows), np.concatenate(ids)
        reduce = partial(_kull_reduce, norm=norm)
        return fixed_bins_weighted(
            ids_a, conf[rows_a], correct[rows_a], len(upper), reduce, conf.shape[0], rows_a
        )

    return weighted


def _kull_linear(norm: str):
    """``linear`` form of Kull et al.'s (lo, hi] top-label ECE / MCE."""

    def linear(p, y, dtype=None):
        conf, correct = top_label(p, y)
        upper, width = kull_confidence_bins()
        rows, ids = [], []
        for b, u in enumerate(upper):
            lo = u - width
            member = np.flatnonzero((conf <= u) & ((conf > lo) | (lo == 0)))
            rows.append(member)
            ids.append(np.full(member.shape[0], b, dtype=np.int64))
        rows_a, ids_a = np.concatenate(rows), np.concatenate(ids)
        sums = _fixed_sums(ids_a, conf[rows_a], correct[rows_a], len(upper), conf.shape[0], rows_a)
        return sums, partial(_kull_reduce, norm=norm)

    return linear


def _cwece_weighted(p, y, dtype=None):
    sums = classwise_binner(p, y, 15)
    return lambda weights=None: classwise_from_sums(*sums(weights))


def _marginal_weighted(p, y, dtype=None):
    sums = classwise_binner(p, y, 15)
    return lambda weights=None: marginal_from_sums(*sums(weights), 2.0)


def _cwece_core(p, y, dtype=None):
    return classwise_value(p, y, 15)


def _marginal_core(p, y, dtype=None):
    return marginal_value(p, y, 15, 2.0)


def _cwece_kull_core(p, y, dtype=None):
    return cwece_kull_from_sums(*kull_classwise_binner(p, y)())


def _cwece_kull_weighted(p, y, dtype=None):
    sums = kull_classwise_binner(p, y)
    return lambda weights=None: cwece_kull_from_sums(*sums(weights))


def _brier_kull_stats(p, y, dtype=None):
    return (brier_per_sample(p, y) / p.shape[1],)


def _cwece_linear(p, y, dtype=None):
    return classwise_binner(p, y, 15), classwise_from_sums


def _marginal_linear(p, y, dtype=None):
    return classwise_binner(p, y, 15), partial(marginal_from_sums, power=2.0)


def _cwece_kull_linear(p, y, dtype=None):
    return kull_classwise_binner(p, y), cwece_kull_from_sums


_MAX_GAP = (
    "the largest bin gap is a non-smooth extreme whose bootstrap is inconsistent: its basic "
    "intervals covered the population value 32-64% of the time (perf/bench_coverage.py)"
)
_TOP_LABEL = (
    "no bootstrap interval covered the population ECE in 90-99% of simulated test sets in "
    "every scenario: the basic interval 48-97% (it excludes a true 0 half the time), the "
    "one-sided upper bound 84.5-98%, the percentile interval 0-97% (perf/bench_coverage.py)"
)
_CLASSWISE = (
    "no bootstrap interval covered the population classwise error in 90-99% of simulated test "
    "sets: the basic interval 0-90.5% (its plug-in bias exceeds the error for nearly calibrated "
    "models and for 100 classes), the one-sided upper bound 89-100% (perf/bench_coverage.py)"
)
_UNVERIFIED = (
    "its coverage is not verified: perf/bench_coverage.py knows the population value of ECE, "
    "classwise ECE and MCE only, and the bootstrap of a biased plug-in error may miss it"
)
_ERROR = {"higher_is_better": False, "paired_test": "sign_flip", "verdicts": False}
_SCORE_MEAN = {
    "higher_is_better": False,
    "paired_test": "paired_t",
    "interval": "percentile",
    "verdicts": True,
}
_UB = {
    "higher_is_better": False,
    "paired_test": "jackknife_z",
    "interval": "jackknife",
    "verdicts": True,
    "scale": 100.0,
    "decimals": 2,
}


def _plain(fn):
    """``core`` of a metric computed by a function of validated ``(probs, labels)``."""

    def core(p, y, dtype=None):
        return float(fn(p, y))

    return core


def _calibration_test_metrics() -> list[Metric]:
    """p-values of the top-label calibration tests (:mod:`calbench.caltests`): large means no
    evidence of miscalibration. The report turns them into "calibrated at the 5% level?"
    verdicts with Holm's correction (analytic p-values: full resolution)."""

    def core(name):
        def f(p, y, dtype=None):
            from calbench import caltests  # lazy: pulls scipy

            return float(caltests.calibration_tests(p, y)[name].p_value)

        return f

    facts = {
        "scale": 1.0,
        "decimals": 4,
        "higher_is_better": True,
        "interval": None,
        "no_interval_reason": "a p-value of a test, not an estimate",
        "paired_test": "sign_flip",
        "verdicts": False,
    }
    return [
        Metric(
            "spiegelhalter_p",
            core("spiegelhalter"),
            display="Spiegelhalter Z test, p",
            reference="Spiegelhalter 1986 (Z test of the Brier score)",
            **facts,
        ),
        Metric(
            "ks_cal_p",
            core("ks"),
            display="KS calibration test, p",
            reference="Gupta et al. 2021, eq. 8; Arrieta-Ibarra et al. 2022 (cumulative differences)",
            **facts,
        ),
        Metric(
            "kuiper_cal_p",
            core("kuiper"),
            display="Kuiper calibration test, p",
            reference="Arrieta-Ibarra et al. 2022 (Kuiper range of the cumulative differences)",
            **facts,
        ),
    ]


def _ub_metrics() -> list[Metric]:
    """The unbiased binned squared calibration errors of :mod:`calbench.metrics.unbiased`,
    reported as ``sqrt(max(T, 0))`` with jackknife intervals and tests of the unclipped ``T``."""
    ref = (
        "Kumar, Liang & Ma 2019, sec. 5; Sun, Chaudhari, Barnett & Dobriban 2024 "
        "(per-bin U-statistic of the squared binned error)"
    )

    def top(binning):
        def stats(p, y, dtype=None):
            return top_label(p, y)

        def jack(p, y, dtype=None):
            return unbiased.ub_top_jackknife(*top_label(p, y), 15, binning)

        return stats, jack

    w_stats, w_jack = top("width")
    m_stats, m_jack = top("mass")
    return [
        _decomposed(
            "ece_ub",
            w_stats,
            partial(unbiased.ub_from_values, n_bins=15, binning="width"),
            weighted=lambda p, y, dtype=None: _root_weighted(
                unbiased.ub_top_weighted(*top_label(p, y), 15)
            ),
            jackknife=w_jack,
            display="Unbiased ECE, % (l2, 15 bins)",
            reference=ref + ", top-label, 15 equal-width bins",
            **_UB,
        ),
        _decomposed(
            "ece_ub_mass",
            m_stats,
            partial(unbiased.ub_from_values, n_bins=15, binning="mass"),
            jackknife=m_jack,
            display="Unbiased ECE, % (l2, 15 equal-mass bins)",
            reference=ref + ", top-label, 15 equal-mass bins",
            **_UB,
        ),
        Metric(
            "cwece_ub",
            lambda p, y, dtype=None: float(unbiased.root(unbiased.cw_ub_sq(p, y, _cw_bins(p)))),
            weighted=lambda p, y, dtype=None: _root_weighted(
                unbiased.cw_ub_weighted(p, y, _cw_bins(p))
            ),
            jackknife=lambda p, y, dtype=None: unbiased.cw_ub_jackknife(p, y, _cw_bins(p)),
            display="Unbiased classwise ECE, % (l2, up to 15 bins)",
            reference=ref
            + ", classwise (one-vs-rest, mean over classes), min(15, N / (2 K)) equal-width bins",
            **_UB,
        ),
    ]


def _cw_bins(p) -> int:
    """Bins per class of ``cwece_ub``: 15, fewer when thin (:func:`unbiased.classwise_bins`)."""
    return unbiased.classwise_bins(p.shape[0], p.shape[1], 15)


def _root_weighted(g):
    """``weighted`` form reporting ``sqrt(max(T, 0))`` of a ``weighted`` form of ``T``."""

    def h(weights=None):
        out = unbiased.root(g(weights))
        return float(out) if np.ndim(out) == 0 else out

    return h


def _plain_metrics() -> list[Metric]:
    """Metrics that are functions of the whole evaluated set (no per-sample decomposition):
    the calibration / refinement split of log-loss and Brier score (Berta et al. 2025),
    selective prediction (Geifman & El-Yaniv 2017) and split-conformal sets (Sadinle et al.
    2019; Romano et al. 2020). None has a verified interval; compared by the sign-flip test."""
    unverified = {
        "interval": None,
        "no_interval_reason": _UNVERIFIED,
        "paired_test": "sign_flip",
        "verdicts": False,
    }
    split = "Berta, Holzmueller, Jordan & Bach 2025, eq. 4 (TS-mix refit, as probmetrics)"
    return [
        Metric(
            "calib_err_logloss",
            _plain(refinement.calib_err_logloss),
            display="Calibration error of NLL",
            scale=1.0,
            decimals=4,
            higher_is_better=False,
            reference=split,
            **unverified,
        ),
        Metric(
            "refinement_logloss",
            _plain(refinement.refinement_logloss),
            display="Refinement error of NLL",
            scale=1.0,
            decimals=4,
            higher_is_better=False,
            reference=split,
            **unverified,
        ),
        Metric(
            "calib_err_brier",
            _plain(refinement.calib_err_brier),
            display="Calibration error of Brier",
            scale=1.0,
            decimals=4,
            higher_is_better=False,
            reference=split,
            **unverified,
        ),
        Metric(
            "refinement_brier",
            _plain(refinement.refinement_brier),
            display="Refinement error of Brier",
            scale=1.0,
            decimals=4,
            higher_is_better=False,
            reference=split,
            **unverified,
        ),
        Metric(
            "aurc",
            _plain(selective.aurc),
            display="AURC",
            scale=1.0,
            decimals=4,
            higher_is_better=False,
            reference="Geifman & El-Yaniv 2017, sec. 2 (area under the risk-coverage curve)",
            **unverified,
        ),
        Metric(
            "acc_at_90",
            _plain(selective.acc_at_90),
            display="Accuracy at 90% coverage, %",
            scale=100.0,
            decimals=2,
            higher_is_better=True,
            reference="Geifman & El-Yaniv 2017, sec. 2 (selective accuracy)",
            **unverified,
        ),
        Metric(
            "lac_size",
            _plain(conformal.lac_size),
            display="LAC set size (90% coverage)",
            scale=1.0,
            decimals=3,
            higher_is_better=False,
            reference="Sadinle, Lei & Wasserman 2019 (LAC sets, split-conformal)",
            **unverified,
        ),
        Metric(
            "aps_size",
            _plain(conformal.aps_size),
            display="APS set size (90% coverage)",
            scale=1.0,
            decimals=3,
            higher_is_better=False,
            reference="Romano, Sesia & Candes 2020 (APS sets, split-conformal)",
            **unverified,
        ),
        # coverage is a check (near 0.9 by construction), not a score: ranked by closeness to
        # nothing; higher_is_better only orders the column
        *_calibration_test_metrics(),
        Metric(
            "lac_coverage",
            _plain(conformal.lac_coverage),
            display="LAC coverage, %",
            scale=100.0,
            decimals=2,
            higher_is_better=True,
            reference="Sadinle, Lei & Wasserman 2019 (empirical coverage)",
            **unverified,
        ),
        Metric(
            "aps_coverage",
            _plain(conformal.aps_coverage),
            display="APS coverage, %",
            scale=100.0,
            decimals=2,
            higher_is_better=True,
            reference="Romano, Sesia & Candes 2020 (empirical coverage)",
            **unverified,
        ),
    ]


METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        _decomposed(
            "accuracy",
            _correct,
            _mean,
            is_mean=True,
            display="Accuracy, %",
            scale=100.0,
            decimals=2,
            higher_is_better=True,
            interval="percentile",
            paired_test="mcnemar_exact",
            verdicts=True,
            reference="top-1 accuracy; paired test of McNemar 1947 (Dietterich 1998)",
        ),
        _decomposed(
            "ece",
            _top,
            partial(calibration_error_1d, n_bins=15, norm="l1"),
            weighted=_width_weighted("l1"),
            linear=_width_linear("l1"),
            display="ECE, % (15 bins)",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_TOP_LABEL,
            reference="Naeini, Cooper & Hauskrecht 2015; Guo et al. 2017, eq. 3",
            **_ERROR,
        ),
        _decomposed(
            "mce",
            _top,
            partial(calibration_error_1d, n_bins=15, norm="max"),
            weighted=_width_weighted("max"),
            linear=_width_linear("max"),
            display="MCE, % (15 bins)",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_MAX_GAP,
            reference="Naeini, Cooper & Hauskrecht 2015; Guo et al. 2017, eq. 4",
            **_ERROR,
        ),
        Metric(
            "cwece",
            _cwece_core,
            weighted=_cwece_weighted,
            linear=_cwece_linear,
            display="Classwise ECE, % (15 bins)",
            scale=100.0,
            decimals=3,
            interval=None,
            no_interval_reason=_CLASSWISE,
            reference="Kull et al. 2019, eq. 8 (classwise ECE, mean over classes)",
            **_ERROR,
        ),
        _decomposed(
            "ace",
            _top,
            partial(calibration_error_1d, n_bins=15, binning="mass"),
            display="Adaptive ECE, % (15 equal-mass bins)",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Nixon, Dusenberry, Zhang, Jerfel & Tran 2019 (adaptive calibration error)",
            **_ERROR,
        ),
        _decomposed(
            "ece_l2_mass",
            _top,
            partial(calibration_error_1d, n_bins=15, norm="l2", binning="mass"),
            display="L2 ECE, % (equal-mass bins)",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Kumar, Liang & Ma 2019, sec. 2 (l2 calibration error)",
            **_ERROR,
        ),
        _decomposed(
            "nll",
            lambda p, y, dtype=None: (nll_per_sample(p, y, "study"),),
            _mean,
            is_mean=True,
            display="NLL",
            scale=1.0,
            decimals=3,
            reference="negative log-likelihood, Guo et al. 2017, sec. 2 (scikit-learn <= 1.0 clip)",
            **_SCORE_MEAN,
        ),
        _decomposed(
            "nll_modern",
            lambda p, y, dtype=None: (nll_per_sample(p, y, "modern", dtype),),
            _mean,
            is_mean=True,
            display="NLL (unclipped)",
            scale=1.0,
            decimals=3,
            reference="negative log-likelihood, Guo et al. 2017, sec. 2 (machine-epsilon clip)",
            **_SCORE_MEAN,
        ),
        _decomposed(
            "brier",
            lambda p, y, dtype=None: (brier_per_sample(p, y),),
            _mean,
            is_mean=True,
            display="Brier score",
            scale=1.0,
            decimals=3,
            reference="Brier 1950 (sum over classes)",
            **_SCORE_MEAN,
        ),
        _decomposed(
            "ks",
            _top,
            ks_from_values,
            display="KS error, %",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Gupta, Rahimi, Ajanthan, Mensink, Sminchisescu & Hartley 2021, eq. 7",
            **_ERROR,
        ),
        _decomposed(
            "sbece",
            _top,
            sb_ece_from_values,
            display="SB-ECE, %",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Karandikar, Cain, Tran, Lakshminarayanan, Shlens, Mozer & Roelofs 2021",
            **_ERROR,
        ),
        _decomposed(
            "dece",
            _dece_stats,
            dece_from_values,
            display="DECE, %",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Bohdal, Yang & Hospedales 2021 (differentiable ECE)",
            **_ERROR,
        ),
        _decomposed(
            "debiased_ece",
            _top,
            partial(debiased_from_values, n_bins=15),
            display="Debiased ECE, %",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Kumar, Liang & Ma 2019, Theorem 5.4 (debiased l2 error)",
            **_ERROR,
        ),
        Metric(
            "marginal_ce",
            _marginal_core,
            weighted=_marginal_weighted,
            linear=_marginal_linear,
            display="Marginal CE, %",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_CLASSWISE,
            reference="Kumar, Liang & Ma 2019, sec. 2 (marginal l2 calibration error)",
            **_ERROR,
        ),
        _decomposed(
            "ece_sweep",
            _top,
            ece_sweep_from_values,
            display="Mean-sweep CE, % (l2, equal-mass)",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Roelofs, Cain, Shlens & Mozer 2022, sec. 4 (ECE_sweep)",
            **_ERROR,
        ),
        _decomposed(
            "smece",
            _top,
            smooth_ece_from_values,
            display="Smooth ECE, %",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Blasiok & Nakkiran 2023 (smooth ECE, reflected Gaussian kernel)",
            **_ERROR,
        ),
        # unbiased squared calibration errors (calbench.metrics.unbiased)
        *_ub_metrics(),
        # Kull et al. 2019's conventions (calbench.metrics.kull)
        _decomposed(
            "ece_kull",
            _top,
            ece_kull_from_values,
            weighted=_kull_weighted("l1"),
            linear=_kull_linear("l1"),
            display="ECE (Kull et al. bins)",
            scale=1.0,
            decimals=4,
            interval=None,
            no_interval_reason=_TOP_LABEL,
            reference="Kull et al. 2019, supplementary (their (lo, hi] bins)",
            **_ERROR,
        ),
        _decomposed(
            "mce_kull",
            _top,
            mce_kull_from_values,
            weighted=_kull_weighted("max"),
            linear=_kull_linear("max"),
            display="MCE (Kull et al. bins)",
            scale=1.0,
            decimals=4,
            interval=None,
            no_interval_reason=_MAX_GAP,
            reference="Kull et al. 2019, supplementary (their (lo, hi] bins)",
            **_ERROR,
        ),
        Metric(
            "cwece_kull",
            _cwece_kull_core,
            weighted=_cwece_kull_weighted,
            linear=_cwece_kull_linear,
            display="Classwise ECE (Kull et al., sum over classes)",
            scale=1.0,
            decimals=4,
            interval=None,
            no_interval_reason=_CLASSWISE,
            reference="Kull et al. 2019, eq. 8 (summed over classes, their binning)",
            **_ERROR,
        ),
        _decomposed(
            "brier_kull",
            _brier_kull_stats,
            _mean,
            is_mean=True,
            display="Brier score / K (Kull et al.)",
            scale=1.0,
            decimals=4,
            reference="Brier 1950 divided by K, as Kull et al. 2019 report it",
            **_SCORE_MEAN,
        ),
        _decomposed(
            "nll_kull",
            lambda p, y, dtype=None: (nll_per_sample(p, y, "study"),),
            _mean,
            is_mean=True,
            display="NLL (Kull et al.)",
            scale=1.0,
            decimals=4,
            reference="negative log-likelihood as Kull et al. 2019 report it",
            **_SCORE_MEAN,
        ),
        # calibration / refinement split, selective prediction, conformal sets
        # (calbench.metrics.refinement, .selective, .conformal)
        *_plain_metrics(),
    ]
}

#: Metrics printed multiplied by 100 (``scale == 100``: accuracy and the calibration errors).
STUDY_PERCENT = frozenset(name for name, m in METRICS.items() if m.percent)


def compute_metrics(probs, labels, names: Iterable[str] | None = None) -> dict[str, float]:
    """Evaluate several :data:`METRICS` (all by default) validating the input only once."""
    names = list(METRICS) if names is None else list(names)
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric names {unknown}; choose from {sorted(METRICS)}")
    dtype = getattr(probs, "dtype", None)
    p, y = check_probs_labels(probs, labels)
    shared: dict = {}  # per-sample arrays computed once per stats function (e.g. top label)
    out = {}
    for n in names:
        m = METRICS[n]
        if m.stats is None:
            out[n] = m.core(p, y, dtype)
            continue
        if m.stats not in shared:
            shared[m.stats] = m.stats(p, y, dtype)
        out[n] = float(m.reduce(*shared[m.stats]))
    return out


# keep the helpers importable for plots and calibrators
__all__ += ["classwise_sums", "top_label"]
