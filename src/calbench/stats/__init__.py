"""Statistics of calibrators' metrics: intervals, paired tests, families, cross-fitted
selection, ranks over models and robustness.

The core, every name re-exported here (``from calbench.stats import X``; numpy only at import):

* :mod:`calbench.stats.intervals`: bootstrap intervals of a metric and of a difference
  (percentile, basic, one-sided upper; Davison & Hinkley 1997), dispatching the ``jackknife``
  construction of the unbiased errors to :mod:`calbench.stats.ub`;
* :mod:`calbench.stats.ub`: the unbiased squared calibration errors' score intervals, upper
  bounds ("calibrated within delta") and paired test of equal calibration error;
* :mod:`calbench.stats.paired`: paired tests of two calibrators on the same samples (McNemar,
  paired t, Wilcoxon, sign-flip, and :func:`paired_test`, the registry's choice);
* :mod:`calbench.stats.signed_rank`: Wilcoxon's signed-rank test for any number of pairs
  (exact, or the normal approximation), behind the per-sample test and the test over models;
* :mod:`calbench.stats.sides`: a family of paired comparisons among several calibrators, each
  calibrator's share (validation, per-sample values, jackknife, resampled values) computed once;
* :mod:`calbench.stats.ranks`: ranks, average ranks, Friedman and Nemenyi (Demšar 2006),
  Spearman's correlation;
* :mod:`calbench.stats.multiplicity`: Holm, Benjamini-Hochberg, the smallest adjusted p-value
  (re-exported), and calibration verdicts over many calibration tests' p-values.

The study-level modules, imported by their own name (not re-exported):

* :mod:`calbench.stats.comparisons`: the comparison families of one model, in Holm families;
* :mod:`calbench.stats.selection`: the "best" calibrator by cross-fitting in the validation half;
* :mod:`calbench.stats.robustness`: rankings under other evaluation choices, and the robust
  winner over models.

The calibration tests' statistics and p-values are metrics of the registry, so their kernels
are :mod:`calbench.metrics.caltests` (the registry is below this package and imports nothing
of it); their Holm / BH verdicts are :mod:`calbench.stats.multiplicity`.
"""

from __future__ import annotations

from calbench.metrics import METRICS  # re-exported: callers read the registry through stats
from calbench.stats.common import (
    PairedTest,
    interval_method,
    no_interval_reason,
)
from calbench.stats.intervals import (
    CALIBRATION_ERRORS,
    INTERVAL_METHODS,
    NO_INTERVAL,
    BootstrapCI,
    PairedBootstrap,
    bootstrap_ci,
    bootstrap_cis,
    bootstrap_values,
    interval_from_values,
    multiplicities,
    paired_bootstrap,
    resample_indices,
)
from calbench.stats.multiplicity import benjamini_hochberg, holm, min_adjusted_p
from calbench.stats.paired import (
    PAIRED_TEST_NAMES,
    mcnemar_exact,
    paired_t,
    paired_test,
    permutations_for,
    sign_flip_test,
    wilcoxon_signed_rank,
)
from calbench.stats.ranks import (
    Friedman,
    RankComparison,
    average_ranks,
    friedman_test,
    mean_ranks,
    nemenyi_cd,
    nemenyi_q,
    rank_comparison,
    rank_rows,
    ranks_nan_last,
    spearman,
)
from calbench.stats.sides import PairedSides
from calbench.stats.signed_rank import SignedRank, signed_rank_test
from calbench.stats.ub import ub_interval, ub_jackknife, ub_paired_test, ub_upper_bound

__all__ = [
    "METRICS",
    "CALIBRATION_ERRORS",
    "INTERVAL_METHODS",
    "NO_INTERVAL",
    "PAIRED_TEST_NAMES",
    "BootstrapCI",
    "Friedman",
    "PairedBootstrap",
    "PairedSides",
    "PairedTest",
    "RankComparison",
    "SignedRank",
    "average_ranks",
    "benjamini_hochberg",
    "bootstrap_ci",
    "bootstrap_cis",
    "bootstrap_values",
    "friedman_test",
    "holm",
    "interval_from_values",
    "interval_method",
    "mcnemar_exact",
    "mean_ranks",
    "min_adjusted_p",
    "multiplicities",
    "nemenyi_cd",
    "nemenyi_q",
    "no_interval_reason",
    "paired_bootstrap",
    "paired_t",
    "paired_test",
    "permutations_for",
    "rank_comparison",
    "rank_rows",
    "ranks_nan_last",
    "resample_indices",
    "sign_flip_test",
    "signed_rank_test",
    "spearman",
    "ub_interval",
    "ub_jackknife",
    "ub_paired_test",
    "ub_upper_bound",
    "wilcoxon_signed_rank",
]
