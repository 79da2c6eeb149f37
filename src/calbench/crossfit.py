"""Cross-fitting every labelled sample: out-of-fold probabilities over repeated partitions.

A calibrator judged on the samples it was fitted on looks better than it is; a single split into
a fitting and a test half judges it on half the samples only. Cross-fitting (K-fold
cross-validation, Stone 1974) uses all ``N`` samples for both: they are split into ``F`` folds,
a fresh calibrator is fitted on ``F - 1`` folds and predicts the held-out one, so every sample
gets one *out-of-fold* prediction from a calibrator that never saw it. Metrics, intervals and
paired tests are then computed on the pooled out-of-fold predictions of all ``N`` samples.

The estimand is that of cross-validation as Bates, Hastie & Tibshirani 2023 ("Cross-validation:
what does it estimate and how well does it do it?", JASA) describe it: the error of a calibrator
fitted on ``(F - 1) / F`` of the data, averaged over fits (over training sets), not the error of
the one calibrator fitted on all samples. Repeating the partition ``R`` times (``repeats``)
averages out the partition's own noise and shows how much a verdict depends on it
(:mod:`calbench.stats.resampled`).

Folds (:func:`fold_assignments`), deterministic from ``(n, folds, repeats, seed, labels)``:
repeat ``r`` draws ``numpy.random.default_rng([seed, r]).permutation(n)``; plain folds give
position ``i`` of that permutation fold ``i mod F``; stratified folds first sort the permuted
samples by label (a stable sort, so the order within a class stays random) and then deal them
out the same way, so every fold holds each class's samples to within one and fold sizes differ by
at most one.

The cross-fitted "best" (:func:`nested_best`) is chosen inside each training part: for the fold
it predicts, the candidates are compared by an inner cross-fit on the ``F - 1`` training folds
only (:func:`calbench.stats.selection.crossfit_scores`), so the choice never sees the predicted fold
(nested cross-validation, Varma & Simon 2006; Cawley & Talbot 2010 show the optimism of choosing
on the folds one reports). When the candidates' out-of-fold predictions were already computed
with the same folds (``oof``), the pick's prediction of a fold is read from them (the same fit:
the candidate fitted on that fold's training part); only the inner fits are extra. With
``inner_folds=None`` (the protocol's choice) the inner folds of outer fold ``k`` are its two
neighbours on the ring of outer folds (``k - 1`` and ``k + 1`` mod ``F``, :func:`ring_pairs`), and
each inner fit serves two outer folds: the calibrator fitted on every fold but ``j`` and
``k = j + 1`` never saw either, so it predicts ``j`` for outer fold ``k``'s inner cross-fit and
``k`` for outer fold ``j``'s; ``F`` inner fits per candidate and partition instead of ``F`` times
the inner folds (5 instead of 25 for ``F = 5``; 10 when every pair of other outer folds served,
which chose on all ``F - 1`` other folds at twice the fits).

Plug-in calibrators see copies: each fit and prediction gets fresh arrays, so a calibrator that
writes into its inputs cannot change what another one is fitted on or predicts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from calbench._checks import ROW_SUM_ATOL, check_logits_labels
from calbench.stats.selection import FOLD_FIT_FAILED, MAX_FOLDS, CrossFit, crossfit_scores

#: most repeated partitions one call may ask for
MAX_REPEATS = 1000


def _check_int(value, name: str, low: int, high: int, example: str) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | np.integer)
        or not low <= value <= high
    ):
        raise ValueError(
            f"{name} must be an integer in [{low}, {high}] (e.g. {example}), got {value!r}"
        )
    return int(value)


def fold_assignments(
    n_or_labels, folds: int = 5, repeats: int = 1, seed: int = 0, *, stratified: bool = True
) -> np.ndarray:
    """The fold (``0 .. folds-1``) of every sample in each of ``repeats`` partitions, ``(R, N)``
    int64.

    ``n_or_labels``: the labels ``(N,)`` (stratified or plain folds) or the sample count ``N``
    (plain folds only). Deterministic: repeat ``r`` uses ``numpy.random.default_rng([seed, r])``
    (see the module docstring), so adding repeats keeps the earlier ones.
    """
    folds = _check_int(folds, "folds", 2, MAX_FOLDS, "5")
    repeats = _check_int(repeats, "repeats", 1, MAX_REPEATS, "10")
    seed = _check_int(seed, "seed", 0, 2**63 - 1, "0")
    if isinstance(n_or_labels, int | np.integer) and not isinstance(n_or_labels, bool):
        if stratified:
            raise ValueError("stratified folds need the labels; pass labels, or stratified=False")
        n, y = int(n_or_labels), None
    else:
        y = np.asarray(n_or_labels)
        if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
            raise ValueError(f"labels must be a 1-D integer array, got {y.dtype} {y.shape}")
        n = y.shape[0]
    if n < 2 * folds:
        raise ValueError(f"{folds} folds need >= {2 * folds} samples, got {n}; lower folds")
    out = np.empty((repeats, n), dtype=np.int64)
    deal = np.arange(n) % folds
    for r in range(repeats):
        order = np.random.default_rng([seed, r]).permutation(n)
        if stratified and y is not None:
            order = order[np.argsort(y[order], kind="stable")]
        out[r, order] = deal
    return out


def _check_assignment(assignment, n: int) -> np.ndarray:
    a = np.asarray(assignment)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] != n or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(
            f"assignment must be integer folds (R, N) with N = {n}, got {a.dtype} {a.shape}; "
            "build it with fold_assignments"
        )
    for r, row in enumerate(a):
        k = int(row.max()) + 1
        if row.min() < 0 or k < 2 or np.unique(row).size != k:
            raise ValueError(
                f"assignment row {r} must number its folds 0 .. F-1 with F >= 2, each non-empty; "
                "build it with fold_assignments"
            )
    return a.astype(np.int64)


def _fit_predict(make: Callable[[], object], z, y, train, held, last: list, where: str):
    cal = make()
    if last and cal is last[0]:
        raise ValueError(
            f"{where}: make() returned the calibrator it returned before; return a new one each call"
        )
    last[:] = [cal]
    try:  # boolean indexing: the calibrator gets copies
        cal.fit(z[train], y[train])
        p = np.asarray(cal.predict_proba(z[held]), dtype=np.float64)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    want = (int(held.sum()), z.shape[1])
    if (
        p.shape != want
        or not np.all(np.isfinite(p))
        or np.any(p < 0)
        or np.any(np.abs(p.sum(axis=1) - 1.0) > ROW_SUM_ATOL)
    ):
        raise ValueError(
            f"{where}: predict_proba gave {p.shape}, not finite non-negative rows summing to 1 "
            f"of shape {want}; check the calibrator"
        )
    return p


def crossfit_predict(
    make: Callable[[], object],
    logits,
    labels,
    folds: int = 5,
    repeats: int = 1,
    seed: int = 0,
    *,
    stratified: bool = True,
    assignment=None,
) -> np.ndarray:
    """Out-of-fold probabilities ``(R, N, K)``: in repeat ``r``, row ``i`` is predicted by a fresh
    calibrator ``make()`` fitted on every fold of that partition except sample ``i``'s.

    Folds: :func:`fold_assignments` (``folds``, ``repeats``, ``seed``, ``stratified``), or a given
    ``assignment`` ``(R, N)``. ``make()`` must return a new unfitted calibrator on every call
    (``fit(logits, labels)``, ``predict_proba(logits)``); ``R * F`` fits in all. A fit's
    ``ValueError`` propagates with the repeat and fold named.
    """
    z, y = check_logits_labels(logits, labels)
    if assignment is None:
        assignment = fold_assignments(y, folds, repeats, seed, stratified=stratified)
    a = _check_assignment(assignment, z.shape[0])
    out = np.empty((a.shape[0], z.shape[0], z.shape[1]), dtype=np.float64)
    last: list = []
    for r, row in enumerate(a):
        for f in range(int(row.max()) + 1):
            held = row == f
            out[r, held] = _fit_predict(make, z, y, ~held, held, last, f"repeat {r}, fold {f}")
    return out


@dataclass(frozen=True)
class NestedBest:
    """The cross-fitted "best" calibrator, chosen inside each training part.

    ``picks[r][f]`` is the candidate chosen for fold ``f`` of repeat ``r`` by the inner cross-fit
    on that repeat's other folds; ``probs`` ``(R, N, K)`` are the out-of-fold probabilities of
    the picks (each fold predicted by its own pick, fitted on its training part);
    ``assignment`` ``(R, N)`` the outer folds; ``inner_folds`` the inner cross-fit's folds."""

    picks: list[list[str]]
    probs: np.ndarray
    assignment: np.ndarray
    inner_folds: int

    def share(self) -> dict[str, float]:
        """Each candidate's share of the ``R * F`` picks (candidates never picked are absent)."""
        flat = [p for row in self.picks for p in row]
        names = sorted(set(flat))
        return {m: flat.count(m) / len(flat) for m in names}


def inner_seed(seed: int, repeat: int, fold: int) -> int:
    """The seed of the inner cross-fit of fold ``fold`` in repeat ``repeat``: the first word of
    ``numpy.random.SeedSequence([seed, repeat, fold])``'s state (deterministic, and different for
    every outer split)."""
    return int(np.random.SeedSequence([seed, repeat, fold]).generate_state(1)[0])


def nested_best(
    makers: Mapping[str, Callable[[], object]],
    logits,
    labels,
    metric: Callable,
    *,
    folds: int = 5,
    repeats: int = 1,
    seed: int = 0,
    stratified: bool = True,
    inner_folds: int | None = 5,
    higher_is_better: bool = False,
    assignment=None,
    oof: Mapping[str, np.ndarray] | None = None,
) -> NestedBest:
    """The cross-fitted "best" of ``makers`` (name -> function returning a fresh calibrator) on
    ``metric(probs, labels) -> float``, chosen without the fold it predicts.

    For each repeat ``r`` and fold ``f`` of the outer folds (``folds``, ``repeats``, ``seed``,
    ``stratified``, or ``assignment``), the candidates are cross-fitted with ``inner_folds`` folds
    on the training part only (every fold of repeat ``r`` but ``f``; seed :func:`inner_seed`) by
    :func:`calbench.stats.selection.crossfit_scores`, and the one with the best mean inner score
    (lower is better unless ``higher_is_better``; ties: the first in ``makers``' order; a
    candidate whose inner fit fails is not one) predicts fold ``f``. ``inner_folds=None``: the
    inner folds of outer fold ``k`` are its two neighbours on the ring of the partition's outer
    folds (:func:`ring_pairs`), and the fit on every fold but ``j`` and ``k = j + 1`` serves
    both outer fold ``k`` (predicting inner fold ``j``) and outer fold ``j`` (predicting ``k``):
    it saw neither, so no choice sees the fold it predicts, at ``F`` inner fits per candidate
    and partition instead of ``F * inner_folds`` (``F >= 3``). ``oof`` maps candidates to
    their :func:`crossfit_predict` output with the same outer folds; the pick's prediction is
    then read from it instead of refitted. :func:`nested_bests` does this for several metrics
    with one inner cross-fit per outer fold.
    """
    if not callable(metric):
        raise ValueError(f"metric must be a callable f(probs, labels) -> float, got {metric!r}")
    return nested_bests(
        makers, logits, labels, {"score": metric}, higher={"score": higher_is_better},
        folds=folds, repeats=repeats, seed=seed, stratified=stratified,
        inner_folds=inner_folds, assignment=assignment, oof=oof,
    )["score"]  # fmt: skip


def nested_bests(
    makers: Mapping[str, Callable[[], object]],
    logits,
    labels,
    metrics: Mapping[str, Callable],
    *,
    higher: Mapping[str, bool] | None = None,
    folds: int = 5,
    repeats: int = 1,
    seed: int = 0,
    stratified: bool = True,
    inner_folds: int | None = 5,
    assignment=None,
    oof: Mapping[str, np.ndarray] | None = None,
    exclude=(),
    known_inner: Mapping[str, list] | None = None,
    found_inner: dict | None = None,
) -> dict[str, NestedBest]:
    """:func:`nested_best` for every metric of ``metrics`` (name -> ``f(probs, labels)``;
    ``higher``: name -> whether higher is better, default lower) at the cost of one: each outer
    fold's inner cross-fit scores every candidate on every metric at once. ``exclude``: names
    that are not candidates (:func:`calbench.stats.selection.crossfit_scores`' argument).
    With ``inner_folds=None``: ``known_inner`` maps candidates to what an earlier run's inner
    fits found for them on the same folds (:func:`ring_scores` of every partition, in order;
    the calibrate step keeps them, :mod:`calbench.reuse`), used instead of refitting them;
    ``found_inner`` (a dict) receives each candidate's results, computed or known."""
    if not makers:
        raise ValueError("nested_best needs at least one candidate calibrator in makers")
    bad = [m for m, fn in metrics.items() if not callable(fn)]
    if not metrics or bad:
        raise ValueError(
            f"metrics must map names to callables f(probs, labels) -> float, got {bad or metrics}"
        )
    higher = dict(higher or {})
    z, y = check_logits_labels(logits, labels)
    if assignment is None:
        assignment = fold_assignments(y, folds, repeats, seed, stratified=stratified)
    a = _check_assignment(assignment, z.shape[0])
    if inner_folds is not None:
        inner_folds = _check_int(inner_folds, "inner_folds", 2, MAX_FOLDS, "5")
    elif int(a.max()) + 1 < 3:
        raise ValueError(
            "inner_folds=None (the neighbouring outer folds) needs >= 3 outer folds, got 2; pass folds "
            ">= 3 or an inner_folds count"
        )
    want = (a.shape[0], z.shape[0], z.shape[1])
    for name, p in (oof or {}).items():
        if name in makers and np.shape(p) != want:
            raise ValueError(
                f"oof[{name!r}] has shape {np.shape(p)}, not {want}; pass crossfit_predict's "
                "output for the same folds"
            )
    probs = {m: np.empty(want, dtype=np.float64) for m in metrics}
    picks: dict[str, list[list[str]]] = {m: [] for m in metrics}
    fitted: dict = {}  # (repeat, fold, candidate) -> its prediction of the fold, fitted once
    last: list = []
    for r, row in enumerate(a):
        for m in metrics:
            picks[m].append([])
        shared = None
        if inner_folds is None:
            shared = _pair_scores(
                makers,
                z,
                y,
                row,
                metrics,
                exclude,
                last,
                f"repeat {r}",
                known_inner,
                found_inner,
                r,
            )
        for f in range(int(row.max()) + 1):
            held = row == f
            train = ~held
            if shared is not None:
                found = shared[f]
            else:
                found = crossfit_scores(
                    makers, z[train], y[train], metrics, k=inner_folds,
                    seed=inner_seed(seed, r, f), exclude=exclude,
                )  # fmt: skip
            if not found.candidates:
                why = "; ".join(f"{m}: {w}" for m, w in found.excluded.items())
                raise ValueError(f"repeat {r}, fold {f}: no candidate could be fitted ({why})")
            for m in metrics:
                best = found.best(m, bool(higher.get(m, False)))
                if math.isnan(found.scores[m][best]):
                    raise ValueError(
                        f"repeat {r}, fold {f}: every candidate's inner score is NaN; check the "
                        "metric"
                    )
                picks[m][r].append(best)
                if oof is not None and best in oof:
                    probs[m][r, held] = np.asarray(oof[best], dtype=np.float64)[r, held]
                else:
                    if (r, f, best) not in fitted:
                        fitted[r, f, best] = _fit_predict(
                            makers[best], z, y, train, held, last, f"repeat {r}, fold {f} ({best})"
                        )
                    probs[m][r, held] = fitted[r, f, best]
    if inner_folds is None:
        inner_folds = 2  # the outer fold's two neighbours on the ring of folds
    return {
        m: NestedBest(picks=picks[m], probs=probs[m], assignment=a, inner_folds=inner_folds)
        for m in metrics
    }


def ring_pairs(n_folds: int) -> list[tuple[int, int]]:
    """The pairs of neighbouring folds on a ring of ``n_folds`` (>= 3) folds, ``(j, j + 1 mod
    F)`` as sorted tuples in order of ``j``: the inner fits of :func:`nested_bests` with
    ``inner_folds=None``, one per pair, each leaving out its two folds. Every fold is in exactly
    two pairs (with its two neighbours), so each outer fold's choice is scored on two inner folds
    by two fits that never saw it; ``F`` fits per candidate and partition."""
    if n_folds < 3:
        raise ValueError(f"a ring of folds needs >= 3 folds, got {n_folds}")
    return [tuple(sorted((j, (j + 1) % n_folds))) for j in range(n_folds)]


def ring_scores(make, z, y, row, metrics: Mapping[str, Callable], last: list, where: str) -> dict:
    """One candidate's inner fits on the ring of one partition ``row`` (:func:`ring_pairs`),
    as JSON-able data: ``{"scores": {outer fold: {metric: [value on each inner fold]}},
    "excluded": {outer fold: why}}`` (outer folds as strings). The fit on every fold but ``j``
    and ``k`` scores inner fold ``j`` for outer fold ``k`` and ``k`` for ``j``; a fit that fails
    excludes the candidate from the two outer folds it serves."""
    scores: dict[str, dict[str, list[float]]] = {}
    excluded: dict[str, str] = {}
    for j, k in ring_pairs(int(row.max()) + 1):
        held = (row == j) | (row == k)
        try:
            p = _fit_predict(make, z, y, ~held, held, last, f"{where}, folds {j} and {k}")
        except ValueError as exc:
            for f in (j, k):
                excluded.setdefault(str(f), f"{FOLD_FIT_FAILED} ({exc})")
            continue
        part = row[held]
        for inner, outer in ((j, k), (k, j)):
            rows = part == inner
            yi = y[row == inner]
            got = scores.setdefault(str(outer), {})
            for name, fn in metrics.items():
                got.setdefault(name, []).append(float(fn(p[rows], yi)))
    return {"scores": scores, "excluded": excluded}


def _pair_scores(
    makers, z, y, row, metrics, exclude, last: list, where: str, known=None, found=None, r=0
) -> list[CrossFit]:
    """The inner cross-fit of every outer fold of one partition ``row`` (repeat ``r``), its
    inner folds the two neighbours of the outer fold on the ring of folds (:func:`ring_pairs`),
    each fit shared by two outer folds: the candidate fitted on every fold but ``j`` and ``k = j
    + 1`` predicts fold ``j`` for outer fold ``k``'s inner cross-fit and fold ``k`` for outer
    fold ``j``'s. It saw neither, so neither outer fold's choice sees the fold that outer fold
    predicts. ``F`` fits per candidate instead of ``F`` times the inner folds. Element ``k`` is
    outer fold ``k``'s :class:`CrossFit` (``k = 2`` inner folds; scores the mean over them of
    each metric on the held-out inner fold); a candidate whose fit fails is not one for the two
    outer folds that fit serves. ``known`` / ``found``: as in :func:`nested_bests` (a
    candidate's :func:`ring_scores` per repeat)."""
    n_folds = int(row.max()) + 1
    if not isinstance(exclude, Mapping):
        exclude = dict.fromkeys(exclude, "excluded by compare.select_exclude (cost)")
    excluded = [{m: str(exclude[m]) for m in makers if m in exclude} for _ in range(n_folds)]
    # per_fold[k][metric][candidate]: the metric on each inner fold of outer fold k
    per_fold = [{name: {} for name in metrics} for _ in range(n_folds)]
    for method, make in makers.items():
        if method in exclude:
            continue
        res = _known_ring(known, method, r, n_folds, metrics)
        if res is None:
            res = ring_scores(make, z, y, row, metrics, last, f"{where} ({method})")
        if found is not None:
            found.setdefault(method, []).append(res)
        for k in range(n_folds):
            why = res["excluded"].get(str(k))
            if why is not None:
                excluded[k].setdefault(method, why)
            elif str(k) in res["scores"]:
                for name in metrics:
                    per_fold[k][name][method] = res["scores"][str(k)][name]
    out = []
    for k in range(n_folds):
        ok = [m for m in makers if m not in excluded[k] and m in per_fold[k][next(iter(metrics))]]
        scores = {name: {m: float(np.mean(per_fold[k][name][m])) for m in ok} for name in metrics}
        out.append(CrossFit(k=2, seed=0, scores=scores, excluded=excluded[k]))
    return out


def _known_ring(known, method: str, r: int, n_folds: int, metrics) -> dict | None:
    """``known[method][r]`` when it is a complete :func:`ring_scores` record for these folds
    and metrics (two values per metric for every outer fold not excluded), else ``None``."""
    try:
        res = known[method][r]
        scores, excluded = res["scores"], res["excluded"]
        for k in range(n_folds):
            if str(k) in excluded:
                continue
            vals = scores[str(k)]
            if any(len(vals[name]) != 2 for name in metrics):
                return None
        return {"scores": scores, "excluded": excluded}
    except (KeyError, IndexError, TypeError):
        return None
