"""What the interval and test modules of :mod:`calbench.stats` share: resolving a metric name
or callable to its :data:`calbench.metrics.METRICS` entry, the registry's interval facts, the
paired inputs' checks and the :class:`PairedTest` result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from calbench._checks import check_labels, check_probs
from calbench.metrics import INTERVALS, METRICS, Metric

#: entries of one chunk of resampled indices or sign flips (``N x rows``)
CHUNK_ENTRIES = 2**21


def registry_entry(metric):
    if isinstance(metric, str):
        return METRICS.get(metric)
    return metric if isinstance(metric, Metric) else None


def interval_method(metric) -> str | None:
    """The interval construction of a metric name or :data:`calbench.metrics.METRICS` entry
    (``Metric.interval``): ``None`` when the metric has no interval; ``"percentile"`` for a
    plain callable or a metric that declares none."""
    m = registry_entry(metric)
    if m is None:
        return "percentile"
    if m.interval is None or m.interval in INTERVALS:
        return m.interval
    return "percentile"


def no_interval_reason(metric) -> str:
    """Why ``metric`` gets no interval (empty when it has one)."""
    m = registry_entry(metric)
    if m is None or m.interval is not None:
        return ""
    return m.no_interval_reason


def resolve_metric(metric) -> Callable:
    if isinstance(metric, str):
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; choose from {sorted(METRICS)}")
        return METRICS[metric]
    if not callable(metric):
        raise ValueError(
            f"metric must be a callable f(probs, labels) -> float or a METRICS name, got {metric!r}"
        )
    return metric


@dataclass(frozen=True)
class PairedTest:
    """A two-sided paired test of ``metric(a) - metric(b)`` on the same samples.

    ``test`` names the test (:data:`PAIRED_TEST_NAMES`), ``statistic`` its statistic (the
    number of discordant pairs won by ``a`` for McNemar, ``t``, the signed-rank ``W+``, or the
    observed difference for the sign-flip test); ``min_p`` is the smallest p-value the test
    could give on these samples (``2 / 2^n_discordant`` for McNemar's exact test,
    ``1 / (B + 1)`` for the sign-flip test with ``B`` flips, 0 for the asymptotic tests), so a
    caller can tell "not significant" from "cannot be significant". ``n_permutations`` is ``B``
    (0 for the other tests).
    """

    difference: float
    statistic: float
    p_value: float
    test: str
    min_p: float
    n_permutations: int = 0


def paired_inputs(probs_a, probs_b, labels):
    pa = check_probs(probs_a, "probs_a")
    pb = check_probs(probs_b, "probs_b")
    if pa.shape != pb.shape:
        raise ValueError(
            f"probs_a has shape {pa.shape} but probs_b has shape {pb.shape}; "
            "pass both calibrators' probabilities for the same samples and classes"
        )
    y = check_labels(labels, pa.shape[0], pa.shape[1])
    return pa, pb, y
