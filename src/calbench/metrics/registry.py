"""The metric registry: every built-in metric and its facts, in one place.

:class:`Metric` is the entry every consumer reads (display, scale, direction, interval, paired
test, reference, whether verdicts may be drawn from it); :data:`INTERVALS` and
:data:`PAIRED_TESTS` name the interval constructions and paired tests a metric may declare;
:data:`METRICS` maps each name the workflow reports to its entry, with the study's defaults
(Vasilev, MSU 2021: 15 equal-width bins, NLL with scikit-learn <= 1.0 clipping) and the seed
papers' extra metrics. The kernels stay in their modules (:mod:`calbench.metrics.ece`,
``kull``, ``unbiased``, ``caltests``, ...); the per-sample, bootstrap and sign-flip forms the
entries carry are :mod:`calbench.metrics.forms`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass
from functools import partial

import numpy as np

from calbench._checks import check_probs_labels
from calbench.metrics import caltests, conformal, forms, refinement, selective, unbiased
from calbench.metrics.binning import ECE_BINS, top_label
from calbench.metrics.ece import calibration_error_1d, debiased_from_values, ks_from_values
from calbench.metrics.kull import ece_kull_from_values, mce_kull_from_values
from calbench.metrics.scoring import brier_per_sample, nll_per_sample
from calbench.metrics.smooth import smooth_ece_from_values
from calbench.metrics.soft import dece_from_values, sb_ece_from_values
from calbench.metrics.sweep import ece_sweep_from_values

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


def _calibration_test_metrics() -> list[Metric]:
    """p-values of the top-label calibration tests (:mod:`calbench.metrics.caltests`): large means no
    evidence of miscalibration. The report turns them into "calibrated at the 5% level?"
    verdicts with Holm's correction (analytic p-values: full resolution)."""

    def core(name):
        def f(p, y, dtype=None):
            return float(caltests.calibration_tests(p, y)[name].p_value)

        return f

    tests = {"spiegelhalter_p": "spiegelhalter", "ks_cal_p": "ks", "kuiper_cal_p": "kuiper"}

    def joint(p, y, dtype=None):  # the three tests share one call
        done = caltests.calibration_tests(p, y)
        return {metric: float(done[test].p_value) for metric, test in tests.items()}

    facts = {
        "scale": 1.0,
        "decimals": 4,
        "higher_is_better": True,
        "interval": None,
        "no_interval_reason": "a p-value of a test, not an estimate",
        "paired_test": "sign_flip",
        "verdicts": False,
        "joint": joint,
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
            return unbiased.ub_top_jackknife(*top_label(p, y), ECE_BINS, binning)

        return stats, jack

    w_stats, w_jack = top("width")
    m_stats, m_jack = top("mass")
    return [
        _decomposed(
            "ece_ub",
            w_stats,
            partial(unbiased.ub_from_values, n_bins=ECE_BINS, binning="width"),
            weighted=lambda p, y, dtype=None: forms.root_weighted(
                unbiased.ub_top_weighted(*top_label(p, y), ECE_BINS)
            ),
            jackknife=w_jack,
            display="Unbiased ECE, % (l2, 15 bins)",
            reference=ref + ", top-label, 15 equal-width bins",
            **_UB,
        ),
        _decomposed(
            "ece_ub_mass",
            m_stats,
            partial(unbiased.ub_from_values, n_bins=ECE_BINS, binning="mass"),
            jackknife=m_jack,
            display="Unbiased ECE, % (l2, 15 equal-mass bins)",
            reference=ref + ", top-label, 15 equal-mass bins",
            **_UB,
        ),
        Metric(
            "cwece_ub",
            lambda p, y, dtype=None: float(
                unbiased.root(unbiased.cw_ub_sq(p, y, forms.cw_bins(p)))
            ),
            weighted=lambda p, y, dtype=None: forms.root_weighted(
                unbiased.cw_ub_weighted(p, y, forms.cw_bins(p))
            ),
            jackknife=lambda p, y, dtype=None: unbiased.cw_ub_jackknife(p, y, forms.cw_bins(p)),
            display="Unbiased classwise ECE, % (l2, up to 15 bins)",
            reference=ref
            + ", classwise (one-vs-rest, mean over classes), min(15, N / (2 K)) equal-width bins",
            **_UB,
        ),
    ]


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
    # the four split metrics share one temperature fit, the four conformal ones their scores
    refit = {"joint": forms.plain_joint(refinement.split_values)}
    sets = {"joint": forms.plain_joint(conformal.conformal_values)}
    return [
        Metric(
            "calib_err_logloss",
            forms.plain(refinement.calib_err_logloss),
            display="Calibration error of NLL",
            scale=1.0,
            decimals=4,
            higher_is_better=False,
            reference=split,
            **unverified,
            **refit,
        ),
        Metric(
            "refinement_logloss",
            forms.plain(refinement.refinement_logloss),
            display="Refinement error of NLL",
            scale=1.0,
            decimals=4,
            higher_is_better=False,
            reference=split,
            **unverified,
            **refit,
        ),
        Metric(
            "calib_err_brier",
            forms.plain(refinement.calib_err_brier),
            display="Calibration error of Brier",
            scale=1.0,
            decimals=4,
            higher_is_better=False,
            reference=split,
            **unverified,
            **refit,
        ),
        Metric(
            "refinement_brier",
            forms.plain(refinement.refinement_brier),
            display="Refinement error of Brier",
            scale=1.0,
            decimals=4,
            higher_is_better=False,
            reference=split,
            **unverified,
            **refit,
        ),
        Metric(
            "aurc",
            forms.plain(selective.aurc),
            display="AURC",
            scale=1.0,
            decimals=4,
            higher_is_better=False,
            reference="Geifman & El-Yaniv 2017, sec. 2 (area under the risk-coverage curve)",
            **unverified,
        ),
        Metric(
            "acc_at_90",
            forms.plain(selective.acc_at_90),
            display="Accuracy at 90% coverage, %",
            scale=100.0,
            decimals=2,
            higher_is_better=True,
            reference="Geifman & El-Yaniv 2017, sec. 2 (selective accuracy)",
            **unverified,
        ),
        Metric(
            "lac_size",
            forms.plain(conformal.lac_size),
            display="LAC set size (90% coverage)",
            scale=1.0,
            decimals=3,
            higher_is_better=False,
            reference="Sadinle, Lei & Wasserman 2019 (LAC sets, split-conformal)",
            **unverified,
            **sets,
        ),
        Metric(
            "aps_size",
            forms.plain(conformal.aps_size),
            display="APS set size (90% coverage)",
            scale=1.0,
            decimals=3,
            higher_is_better=False,
            reference="Romano, Sesia & Candes 2020 (APS sets, split-conformal)",
            **unverified,
            **sets,
        ),
        # coverage is a check (near 0.9 by construction), not a score: ranked by closeness to
        # nothing; higher_is_better only orders the column
        *_calibration_test_metrics(),
        Metric(
            "lac_coverage",
            forms.plain(conformal.lac_coverage),
            display="LAC coverage, %",
            scale=100.0,
            decimals=2,
            higher_is_better=True,
            reference="Sadinle, Lei & Wasserman 2019 (empirical coverage)",
            **unverified,
            **sets,
        ),
        Metric(
            "aps_coverage",
            forms.plain(conformal.aps_coverage),
            display="APS coverage, %",
            scale=100.0,
            decimals=2,
            higher_is_better=True,
            reference="Romano, Sesia & Candes 2020 (empirical coverage)",
            **unverified,
            **sets,
        ),
    ]


METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        _decomposed(
            "accuracy",
            forms.correct,
            forms.mean,
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
            forms.top,
            partial(calibration_error_1d, n_bins=ECE_BINS, norm="l1"),
            weighted=forms.width_weighted("l1"),
            linear=forms.width_linear("l1"),
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
            forms.top,
            partial(calibration_error_1d, n_bins=ECE_BINS, norm="max"),
            weighted=forms.width_weighted("max"),
            linear=forms.width_linear("max"),
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
            forms.cwece_core,
            weighted=forms.cwece_weighted,
            linear=forms.cwece_linear,
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
            forms.top,
            partial(calibration_error_1d, n_bins=ECE_BINS, binning="mass"),
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
            forms.top,
            partial(calibration_error_1d, n_bins=ECE_BINS, norm="l2", binning="mass"),
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
            forms.mean,
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
            forms.mean,
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
            forms.mean,
            is_mean=True,
            display="Brier score",
            scale=1.0,
            decimals=3,
            reference="Brier 1950 (sum over classes)",
            **_SCORE_MEAN,
        ),
        _decomposed(
            "ks",
            forms.top,
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
            forms.top,
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
            forms.dece_stats,
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
            forms.top,
            partial(debiased_from_values, n_bins=ECE_BINS),
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
            forms.marginal_core,
            weighted=forms.marginal_weighted,
            linear=forms.marginal_linear,
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
            forms.top,
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
            forms.top,
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
            forms.top,
            ece_kull_from_values,
            weighted=forms.kull_weighted("l1"),
            linear=forms.kull_linear("l1"),
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
            forms.top,
            mce_kull_from_values,
            weighted=forms.kull_weighted("max"),
            linear=forms.kull_linear("max"),
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
            forms.cwece_kull_core,
            weighted=forms.cwece_kull_weighted,
            linear=forms.cwece_kull_linear,
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
            forms.brier_kull_stats,
            forms.mean,
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
            forms.mean,
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
    return metric_values({n: METRICS[n] for n in names}, p, y, dtype)


def metric_values(metrics: Mapping[str, Metric], p, y, dtype=None) -> dict[str, float]:
    """``{key: metric value}`` of several :class:`Metric` entries on one validated set ``(p, y)``
    (``dtype``: the caller's input dtype, as in ``Metric.core``), each value equal to
    ``metric(probs, labels)``: every per-sample decomposition (``Metric.stats``) and every joint
    computation (``Metric.joint``) runs once for all the metrics sharing it."""
    shared: dict = {}
    out = {}
    for key, m in metrics.items():
        if m.joint is not None:
            if m.joint not in shared:
                shared[m.joint] = m.joint(p, y, dtype)
            out[key] = float(shared[m.joint][m.name])
        elif m.stats is None:
            out[key] = m.core(p, y, dtype)
        else:
            if m.stats not in shared:
                shared[m.stats] = m.stats(p, y, dtype)
            out[key] = float(m.reduce(*shared[m.stats]))
    return out
