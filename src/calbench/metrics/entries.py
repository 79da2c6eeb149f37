"""Registry entries beyond the study's table: the unbiased squared calibration errors, the
calibration tests' p-values, and the whole-set metrics (refinement split, selective
prediction, conformal sets); the facts shared by many entries."""

from __future__ import annotations

from functools import partial

import numpy as np

from calbench.metrics import conformal, refinement, selective, unbiased
from calbench.metrics.binning import top_label
from calbench.metrics.registry import Metric, _decomposed

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

    tests = {"spiegelhalter_p": "spiegelhalter", "ks_cal_p": "ks", "kuiper_cal_p": "kuiper"}

    def joint(p, y, dtype=None):  # the three tests share one call
        from calbench import caltests  # lazy: pulls scipy

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


def _plain_joint(fn):
    """``joint`` of metrics computed together by a function of validated ``(probs, labels)``."""

    def joint(p, y, dtype=None):
        return fn(p, y)

    return joint


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
    refit = {"joint": _plain_joint(refinement.split_values)}
    sets = {"joint": _plain_joint(conformal.conformal_values)}
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
            **refit,
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
            **refit,
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
            **refit,
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
            **refit,
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
            **sets,
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
            **sets,
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
            **sets,
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
            **sets,
        ),
    ]
