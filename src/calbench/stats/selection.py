"""Which calibrator is "best", chosen without the data it is judged on: cross-fitting inside the
validation half.

The comparison family ``best`` (:func:`calbench.stats.comparisons.compare_rows`) tests, on the test
half, the calibrator that looks best against every other one. Reading "best" off the validation
half on which every calibrator was *fitted* rewards over-fitting: a flexible calibrator
(isotonic regression, matrix scaling) scores well on the samples it was fitted on and worse on
new ones (in the default study, picks made that way ranked 6th to 15th of 16 on the test half).

Cross-fitting (K-fold cross-validation, Stone 1974) judges each calibrator only on samples it
was not fitted on: the validation half is split into ``k`` folds by a seeded permutation
(:func:`fold_ids`); each candidate is refitted on ``k - 1`` folds and scored on the held-out
one (:func:`out_of_fold`), and the fold scores are averaged (:func:`crossfit_scores`). The
candidate with the best mean is the pick (:meth:`CrossFit.best`). Only validation logits are
passed in: the test half, on which the pick is then tested, takes no part in the choice.

Cost: each candidate is fitted ``k`` more times on ``(k - 1) / k`` of the validation half
(perf/bench_crossfit.py prints the figures: for the default study's 16 calibrators on a
5,000 x 10 validation half, 5 folds, one CPU thread, ~46 s per model against ~12 s for the
single fits, 28 s of it ``ts_sbece``; ~17 s without it, which the default config excludes). Calibrators that cross-validate internally
(``dir_odir_cv``, ``ms_odir_cv``, ``dir_l2_cv``: Kull et al.'s 5-fold search) would cost ``5 k``
more fits and may be left out of the candidates (``compare.select_exclude``), with that reason
printed; they are still tested against the pick.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from calbench import isolation

#: most folds one selection may ask for
MAX_FOLDS = 20
#: the start of the reason given for a candidate whose fit failed on a fold
FOLD_FIT_FAILED = "its fit failed on a fold"


def check_folds(k: int, n: int | None = None) -> int:
    """``k`` checked to be an integer in ``[2, MAX_FOLDS]`` (and, given ``n``, ``<= n // 2``:
    at least two samples a fold)."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 2 <= k <= MAX_FOLDS:
        raise ValueError(
            f"compare.select_folds must be an integer in [2, {MAX_FOLDS}] (e.g. 5), got {k!r}"
        )
    if n is not None and n < 2 * k:
        raise ValueError(
            f"cross-fitted selection with {k} folds needs >= {2 * k} validation samples, got "
            f"{n}; lower compare.select_folds"
        )
    return int(k)


def fold_ids(n: int, k: int, seed: int = 0) -> np.ndarray:
    """The fold (``0 .. k-1``) of each of ``n`` samples: position ``i`` of the seeded
    permutation ``numpy.random.default_rng(seed).permutation(n)`` goes to fold ``i mod k``, so
    fold sizes differ by at most one and the same ``(n, k, seed)`` always gives the same folds."""
    check_folds(k, n)
    out = np.empty(n, dtype=np.int64)
    out[np.random.default_rng(seed).permutation(n)] = np.arange(n) % k
    return out


def out_of_fold(
    make: Callable[[], object], logits: np.ndarray, labels: np.ndarray, folds: np.ndarray
) -> np.ndarray:
    """Out-of-fold probabilities ``(N, K)``: row ``i`` is predicted by a fresh calibrator
    (``make()``) fitted on every fold except ``folds[i]``'s."""
    out = None
    for f in np.unique(folds):
        held = folds == f
        # plug-in code on copies, its exceptions one-line ValueErrors (a failed fold fit)
        cal = isolation.fit(make(), logits[~held], labels[~held])
        p = isolation.run_plugin(
            "predict_proba", cal.predict_proba, logits[held], plugin=isolation.is_plugin(cal)
        )
        p = np.asarray(p, dtype=np.float64)
        if out is None:
            out = np.empty((logits.shape[0], p.shape[1]), dtype=np.float64)
        out[held] = p
    return out


@dataclass(frozen=True)
class CrossFit:
    """Mean held-out scores of the candidates. ``scores[metric][method]`` is the mean over the
    ``k`` folds of the metric on each held-out fold; ``excluded`` maps the calibrators that
    were not candidates to the reason (one sentence)."""

    k: int
    seed: int
    scores: dict[str, dict[str, float]]
    excluded: dict[str, str] = field(default_factory=dict)

    @property
    def candidates(self) -> list[str]:
        first = next(iter(self.scores.values()), {})
        return list(first)

    def best(self, metric: str, higher_is_better: bool = False) -> str:
        """The candidate with the best mean held-out ``metric`` (non-finite means rank last;
        ties go to the first candidate in order)."""
        s = self.scores[metric]
        if not s:
            raise ValueError("no calibrator is a candidate for the cross-fitted selection")
        worst = -math.inf if higher_is_better else math.inf
        key = lambda m: s[m] if math.isfinite(s[m]) else worst  # noqa: E731
        return max(s, key=key) if higher_is_better else min(s, key=key)


def crossfit_scores(
    makers: Mapping[str, Callable[[], object]],
    logits,
    labels,
    metrics: Mapping[str, Callable],
    *,
    k: int = 5,
    seed: int = 0,
    exclude: Mapping[str, str] | Sequence[str] = (),
    known: Mapping[str, Mapping[str, float] | str] | None = None,
) -> CrossFit:
    """Mean held-out score of every candidate calibrator on every metric.

    ``makers`` maps a calibrator name to a function returning a fresh, unfitted calibrator
    (``fit(logits, labels) -> self``, ``predict_proba(logits)``); ``logits``, ``labels`` are the
    **validation** half only. Folds: :func:`fold_ids` (``k``, ``seed``), the same for every
    candidate. A name in ``exclude`` (a mapping to the reason, or a list: "excluded by
    compare.select_exclude") is not a candidate; nor is one whose fit fails on a fold (its
    reason names the error). ``known`` maps a candidate to what an earlier run with the same
    folds, seed, data and calibrator found: its mean score per metric of ``metrics`` (then it
    is not refitted) or the sentence of its failed fold fit; :func:`candidate_result` gives
    that value back from the result, for the caller to keep. Returns a :class:`CrossFit`.
    """
    z = np.asarray(logits)
    y = np.asarray(labels)
    if z.ndim != 2 or y.shape != (z.shape[0],):
        raise ValueError(
            f"logits must be (N, K) and labels (N,), got {z.shape} and {y.shape}; pass the "
            "validation half"
        )
    folds = fold_ids(z.shape[0], k, seed)
    if not isinstance(exclude, Mapping):
        exclude = dict.fromkeys(exclude, "excluded by compare.select_exclude (cost)")
    excluded = {m: str(exclude[m]) for m in makers if m in exclude}
    scores: dict[str, dict[str, float]] = {name: {} for name in metrics}
    known = known or {}
    for method, make in makers.items():
        if method in excluded:
            continue
        found = known.get(method)
        if isinstance(found, str) and found.startswith(FOLD_FIT_FAILED):
            excluded[method] = found
            continue
        if isinstance(found, Mapping) and set(found) == set(metrics):
            for name in metrics:
                scores[name][method] = float(found[name])
            continue
        try:
            probs = out_of_fold(make, z, y, folds)
        except ValueError as exc:
            excluded[method] = f"{FOLD_FIT_FAILED} ({exc})"
            continue
        for name, fn in metrics.items():
            per_fold = [float(fn(probs[folds == f], y[folds == f])) for f in range(k)]
            scores[name][method] = float(np.mean(per_fold))
    return CrossFit(k=k, seed=seed, scores=scores, excluded=excluded)


def candidate_result(fit: CrossFit, method: str) -> dict[str, float] | str | None:
    """What :func:`crossfit_scores` found for ``method``, in the form its ``known`` takes: the
    mean score per metric, the sentence of a failed fold fit, or ``None`` (left out by the
    caller's ``exclude``, which is not a finding about the calibrator)."""
    reason = fit.excluded.get(method)
    if reason is not None:
        return reason if reason.startswith(FOLD_FIT_FAILED) else None
    if method in fit.candidates:
        return {name: per[method] for name, per in fit.scores.items()}
    return None
