"""Many paired comparisons among the calibrators of one model on the same samples, each
calibrator's share of the work done once (:func:`calbench.stats.comparisons.compare_rows`).

:func:`calbench.stats.paired_test` and :func:`calbench.stats.paired_bootstrap` compare two
calibrators from their probabilities: every call validates both arrays and recomputes both
calibrators' per-sample values (``Metric.stats``: NLL or Brier terms, correctness), their
jackknife (``Metric.jackknife``) and their bootstrap values, although a family of
comparisons meets each calibrator many times. :class:`PairedSides` holds one metric's
calibrators on one label vector: each array is validated once, and each calibrator's
per-sample values, jackknife and resampled values are computed the first time a comparison
needs them. Every result equals the pairwise function's on the same pair, bit for bit: the
two sides of a paired test or bootstrap are computed independently there too, on the same
resampled indices (the same seed) and with the same input dtypes.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from calbench._checks import check_labels, check_probs
from calbench.stats.common import PairedTest, registry_entry, resolve_metric
from calbench.stats.intervals import (
    PairedBootstrap,
    check_bootstrap_options,
    check_interval_method,
    multiplicities,
    paired_result,
    prepare_metric,
    resample_indices,
)
from calbench.stats.paired import paired_test, per_sample_test
from calbench.stats.ub import ub_paired_result


class PairedSides:
    """One metric of several calibrators' probabilities ``probs_by_method`` (name -> ``(N, K)``)
    on the same ``labels``, for paired tests and bootstraps between any two of them
    (:meth:`test`, :meth:`bootstrap`, :meth:`value`), each calibrator's part computed once.
    ``jackknives``: name -> the metric's :func:`calbench.stats.ub_jackknife` of that
    calibrator's probabilities where the caller has it (the interval of its metrics row)."""

    def __init__(
        self,
        metric,
        probs_by_method: Mapping[str, np.ndarray],
        labels,
        *,
        jackknives: Mapping | None = None,
    ):
        self.metric = resolve_metric(metric)
        self._entry = registry_entry(metric)
        self._given = dict(probs_by_method)
        self._probs = {}
        for name, probs in self._given.items():
            p = check_probs(probs, "probs_a" if not self._probs else "probs_b")
            first = next(iter(self._probs.values()), p)
            if p.shape != first.shape:
                raise ValueError(
                    f"probs_a has shape {first.shape} but probs_b has shape {p.shape}; "
                    "pass both calibrators' probabilities for the same samples and classes"
                )
            self._probs[name] = p
        k = next(iter(self._probs.values())).shape
        self.labels = check_labels(labels, k[0], k[1])
        self._memo: dict = {}
        for name, u in (jackknives or {}).items():
            if name in self._probs and len(u.loo) == k[0]:
                self._memo[("jackknife", name)] = u

    def _once(self, key, compute):
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def _dtype(self, name: str):
        return getattr(self._given[name], "dtype", None)

    def _stats(self, name: str, dtype):
        m, p, y = self.metric, self._probs[name], self.labels
        return self._once(("stats", name, dtype), lambda: m.stats(p, y, dtype))

    def value(self, name: str) -> float:
        """``metric(probs_by_method[name], labels)``."""
        m = self.metric
        if getattr(m, "stats", None) is not None and getattr(m, "reduce", None) is not None:
            return float(m.reduce(*self._stats(name, self._dtype(name))))
        if getattr(m, "core", None) is not None:
            p, y, dtype = self._probs[name], self.labels, self._dtype(name)
            return self._once(("value", name), lambda: float(m.core(p, y, dtype)))
        return float(m(self._given[name], self.labels))

    def test(self, a: str, b: str, *, n_permutations: int = 1999, seed: int = 0) -> PairedTest:
        """:func:`calbench.stats.paired_test` of ``a`` against ``b`` with the metric's own test."""
        entry = self._entry
        test = entry.paired_test if entry is not None and entry.paired_test else "sign_flip"
        m = self.metric
        if test == "jackknife_z" and getattr(m, "jackknife", None) is not None:
            return ub_paired_result(self._jackknife(a), self._jackknife(b))
        per_sample = test in ("mcnemar_exact", "paired_t", "wilcoxon")
        if per_sample and getattr(m, "is_mean", False) and getattr(m, "stats", None) is not None:
            dtype = self._dtype(a)  # paired_test computes both sides with a's input dtype
            ((xa,), (xb,)) = self._stats(a, dtype), self._stats(b, dtype)
            return per_sample_test(test, xa, xb)
        return paired_test(
            m,
            self._given[a],
            self._given[b],
            self.labels,
            n_permutations=n_permutations,
            seed=seed,
        )

    def _jackknife(self, name: str):
        p, y = self._probs[name], self.labels
        if p.shape[0] < 3:
            raise ValueError(f"the jackknife needs >= 3 samples, got {p.shape[0]}")
        return self._once(("jackknife", name), lambda: self.metric.jackknife(p, y, p.dtype))

    def bootstrap(
        self,
        a: str,
        b: str,
        *,
        n_resamples: int = 1000,
        level: float = 0.95,
        seed: int = 0,
        method: str | None = None,
    ) -> PairedBootstrap:
        """:func:`calbench.stats.paired_bootstrap` of ``a`` against ``b``: each side's resampled
        values over the resamples of ``seed`` computed once per calibrator."""
        n_resamples, level, seed = check_bootstrap_options(n_resamples, level, seed)
        method = check_interval_method(
            method, self._entry if self._entry is not None else self.metric
        )
        est_a, va = self._resampled(a, n_resamples, seed)
        est_b, vb = self._resampled(b, n_resamples, seed)
        return paired_result(est_a - est_b, va - vb, level, method)

    def _resampled(self, name: str, n_resamples: int, seed: int):
        def compute():
            p, y = self._probs[name], self.labels
            estimate, f = prepare_metric(self.metric, self._given[name], y, (p, y))
            n = p.shape[0]
            weights = getattr(f, "uses_weights", False)
            values = [
                f(idx, multiplicities(idx, n)) if weights else f(idx)
                for idx in resample_indices(n, n_resamples, seed)
            ]
            return estimate, np.concatenate(values)

        return self._once(("resampled", name, n_resamples, seed), compute)
