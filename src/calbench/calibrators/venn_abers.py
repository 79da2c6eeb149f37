"""Inductive Venn-Abers prediction (``venn_abers``), binary and one-vs-rest multiclass.

Vovk & Petej 2014, "Venn-Abers predictors" (UAI), sec. 3 (the inductive, IVAP, form of Vovk,
Petej & Fedorova 2015, "Large-scale probabilistic predictors with and without guarantees of
validity", NeurIPS, Algorithm 1): for a test score ``s`` fit isotonic regression to the
calibration scores plus ``(s, 0)`` and read its value at ``s``: that is ``p0``; the same with
``(s, 1)`` gives ``p1``.  The multiprobability ``(p0, p1)`` is an interval that contains a
well-calibrated probability; it is merged into one probability by minimising the worst-case
log-loss (Vovk & Petej 2014, eq. 13 / Vovk et al. 2015, eq. 8)::

    p = p1 / (1 - p0 + p1).

Scores: for K = 2 the softmax probability of class 1 (output ``[1 - p, p]``, the binary IVAP);
for K > 2 each class's softmax column against ``y == j`` (one-vs-all; not Manokhin 2017's
one-vs-one pairwise coupling), with the merged probabilities renormalised over the row.  These
are the conventions of the ``venn_abers`` package (``VennAbersCalibrator.predict_proba`` with
``va_type="one_vs_rest"``), including its treatment of ties: a test score equal to a calibration
score joins its group; a test score between calibration scores ``c_{j-1} < s < c_j`` takes, for
``p1``, the value of ``s`` pooled with ``c_j`` and, for ``p0``, of ``s`` pooled with ``c_{j-1}``
(below all scores ``p0`` is the value of a new lowest point, above all ``p1`` that of a new
highest point).

Computation: ``fit`` tabulates ``p0`` and ``p1`` for the ``m + 1`` positions of a test score
among the ``m`` distinct calibration scores; ``predict_proba`` looks them up.  With 0/1 targets
the table is read off the max-min formula of isotonic regression (Robertson, Wright & Dykstra
1988, Thm 1.4.4): the value of group ``i`` is ``max_{a <= i} min_{b > i}`` of the mean of groups
``a .. b-1``.  A block may start only at group ``i`` or at a group with a positive target
(starting earlier on a zero-target group lowers every mean) and end only before a group with a
positive target or at the top, so with ``P`` positive groups the table costs ``O(P^2 + m P)``
array operations (:func:`_table_maxmin`).  Every mean is a ratio of integer counts, exact in
float64, so the value is the correctly rounded ratio whichever way it is found: the same bits as
pool-adjacent-violators.  Non-binary targets, and problems with many positives, use two
persistent pool-adjacent-violators stacks instead, one of every prefix and one of every suffix of
the sorted groups: the augmented group is merged with the prefix stack's last blocks and the
suffix stack's first blocks while they violate the order (PAV merges in any order give the same
fit).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calbench._checks import check_logits
from calbench.calibrators.base import Calibrator, Field, register, rises_within
from calbench.calibrators.precision import check_precision
from calbench.functional import softmax


def _stacks(w: list[float], y: list[float]):
    """Persistent PAV stacks: prefix tops ``pre[i]`` (groups ``0..i-1``) and suffix heads
    ``suf[i]`` (groups ``i..m-1``) as node ids into the node arrays ``(nw, ny, link)``."""
    m = len(w)
    nw: list[float] = []
    ny: list[float] = []
    link: list[int] = []
    pre = [-1] * (m + 1)
    for i in range(m):
        cw, cy, p = w[i], y[i], pre[i]
        while p != -1 and ny[p] * cw >= cy * nw[p]:  # mean(prev) >= mean(cur)
            cw += nw[p]
            cy += ny[p]
            p = link[p]
        nw.append(cw)
        ny.append(cy)
        link.append(p)
        pre[i + 1] = len(nw) - 1
    suf = [-1] * (m + 1)
    for i in range(m - 1, -1, -1):
        cw, cy, s = w[i], y[i], suf[i + 1]
        while s != -1 and ny[s] * cw <= cy * nw[s]:  # mean(next) <= mean(cur)
            cw += nw[s]
            cy += ny[s]
            s = link[s]
        nw.append(cw)
        ny.append(cy)
        link.append(s)
        suf[i] = len(nw) - 1
    return nw, ny, link, pre, suf


def _pooled_value(cw: float, cy: float, p: int, s: int, nw, ny, link) -> float:
    """Isotonic value of the block ``(cw, cy)`` between prefix top ``p`` and suffix head ``s``."""
    while True:
        if p != -1 and ny[p] * cw > cy * nw[p]:
            cw += nw[p]
            cy += ny[p]
            p = link[p]
        elif s != -1 and ny[s] * cw < cy * nw[s]:
            cw += nw[s]
            cy += ny[s]
            s = link[s]
        else:
            return cy / cw


#: above this many positive groups a table is built from the PAV stacks (the max-min table's
#: ``m P`` work outgrows the stacks' ``m`` Python steps)
MAX_DENSE_POSITIVES = 200


def _table_maxmin(w: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(p0, p1)`` of groups with integer weights ``w`` and integer positive counts ``y`` by the
    max-min formula restricted to the candidate block starts and ends (module docstring)."""
    m = w.size
    cw = np.concatenate([[0.0], np.cumsum(w)])  # integers: exact
    cy = np.concatenate([[0.0], np.cumsum(y)])
    q = np.flatnonzero(y > 0)  # starts a < i: groups with a positive target
    b = np.append(q, m)  # ends b > i: boundaries before a positive group, and the top
    idx = np.arange(m)
    lo = np.searchsorted(q, idx, side="left")  # starts q[:lo_i] lie below group i
    hi = np.searchsorted(q, idx, side="right")  # ends b[hi_i:] lie above it
    # start at the group itself: min over ends b_j > i of the mean of groups i .. b_j - 1 with
    # the test point; ends b_j serve the groups i < b_j
    own = np.full((2, m), np.inf)
    for e in b.tolist():
        num = cy[e] - cy[:e]
        den = cw[e] - cw[:e] + 1.0
        np.minimum(own[0, :e], num / den, out=own[0, :e])
        np.minimum(own[1, :e], (num + 1.0) / den, out=own[1, :e])
    # start at a positive group q_a < i: min over ends b_j > i, for every (a, j), then the best
    # start among q[:lo_i] for the ends b[hi_i:] (suffix minima, prefix maxima)
    tri = q[:, None] < b[None, :]
    num = cy[b][None, :] - cy[q][:, None]
    den = np.where(tri, cw[b][None, :] - cw[q][:, None] + 1.0, 1.0)
    has = lo > 0
    out = []
    for add in (0.0, 1.0):
        pair = np.where(tri, (num + add) / den, np.inf)
        sufmin = np.minimum.accumulate(pair[:, ::-1], axis=1)[:, ::-1]
        premax = np.maximum.accumulate(sufmin, axis=0)
        start = np.full(m, -np.inf)
        start[has] = premax[lo[has] - 1, hi[has]]
        out.append(np.maximum(start, own[int(add)]))
    p0 = np.concatenate([[0.0], out[0]])  # a new lowest point with target 0: value 0
    p1 = np.append(out[1], 1.0)  # a new highest point with target 1: value 1
    return p0, p1


def _table_stacks(w: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(p0, p1)`` from the persistent PAV stacks (module docstring)."""
    w, y = w.tolist(), y.tolist()
    m = len(w)
    nw, ny, link, pre, suf = _stacks(w, y)
    p1 = [_pooled_value(w[i] + 1.0, y[i] + 1.0, pre[i], suf[i + 1], nw, ny, link) for i in range(m)]
    p1.append(_pooled_value(1.0, 1.0, pre[m], -1, nw, ny, link))
    p0 = [_pooled_value(1.0, 0.0, -1, suf[0], nw, ny, link)]
    p0 += [_pooled_value(w[i] + 1.0, y[i], pre[i], suf[i + 1], nw, ny, link) for i in range(m)]
    return np.asarray(p0), np.asarray(p1)


def venn_abers_table(
    scores: np.ndarray, targets: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(c, p0, p1)``: distinct calibration scores ``c`` (m,) and the IVAP values ``p0``, ``p1``
    (m + 1,) for a test score at each position among them (module docstring)."""
    order = np.argsort(scores, kind="stable")
    s = np.asarray(scores, dtype=np.float64)[order]
    t = np.asarray(targets, dtype=np.float64)[order]
    c, start, counts = np.unique(s, return_index=True, return_counts=True)
    w, y = counts.astype(float), np.add.reduceat(t, start)
    binary = bool(np.all((t == 0.0) | (t == 1.0)))
    if binary and np.count_nonzero(y) <= MAX_DENSE_POSITIVES:
        p0, p1 = _table_maxmin(w, y)
    else:
        p0, p1 = _table_stacks(w, y)
    return c, p0, p1


def venn_abers_lookup(c, p0, p1, s) -> tuple[np.ndarray, np.ndarray]:
    """``(p0, p1)`` of test scores ``s`` from a table of :func:`venn_abers_table`."""
    return p0[np.searchsorted(c, s, side="right")], p1[np.searchsorted(c, s, side="left")]


def merge_interval(p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    """``p1 / (1 - p0 + p1)`` (Vovk & Petej 2014, log-loss merge)."""
    return p1 / (1.0 - p0 + p1)


@register
class VennAbers(Calibrator):
    """Inductive Venn-Abers predictor, one-vs-all for K > 2 (module docstring).

    State: the distinct calibration scores of each binary problem concatenated (``scores``,
    split by ``offsets``: one problem for K = 2, K problems otherwise) and the tables ``p0``,
    ``p1`` (problem ``j`` holds ``offsets[j+1] - offsets[j] + 1`` entries starting at
    ``offsets[j] + j``).  :meth:`predict_interval` returns the intervals ``(p0, p1)``.
    """

    name = "venn_abers"
    reference = "Vovk & Petej 2014 (inductive Venn-Abers, one-vs-all)"
    state_schema = {
        "scores": Field(shape=(None,), low=0.0, high=1.0),
        "p0": Field(shape=(None,), low=0.0, high=1.0),
        "p1": Field(shape=(None,), low=0.0, high=1.0),
        "offsets": Field(shape=(None,), integer=True, low=0.0),
    }

    @classmethod
    def _check_state(cls, state: dict[str, Any], k: int) -> str | None:
        off = np.asarray(state["offsets"])
        problems = 1 if k == 2 else k
        n = len(state["scores"])
        if off.size != problems + 1 or off[0] != 0 or off[-1] != n or np.any(np.diff(off) < 1):
            return f"offsets must hold {problems + 1} values rising from 0 to len(scores) = {n}"
        for key in ("p0", "p1"):
            if len(state[key]) != n + problems:
                return f"{key} has {len(state[key])} entries, expected len(scores) + {problems}"
        if not rises_within(state["scores"], off):
            return "scores must rise strictly within each problem (distinct sorted scores)"
        return None

    def __init__(self, *, precision: str = "float64") -> None:
        super().__init__(precision=check_precision(precision))
        self.scores_ = self.p0_ = self.p1_ = self.offsets_ = None

    @staticmethod
    def _problems(probs: np.ndarray) -> list[int]:
        return [1] if probs.shape[1] == 2 else list(range(probs.shape[1]))

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        probs = softmax(logits)
        cs, p0s, p1s, off = [], [], [], [0]
        for j in self._problems(probs):
            c, p0, p1 = venn_abers_table(probs[:, j], labels == j)
            cs.append(c)
            p0s.append(p0)
            p1s.append(p1)
            off.append(off[-1] + c.size)
        self.scores_, self.p0_, self.p1_ = (
            np.concatenate(cs),
            np.concatenate(p0s),
            np.concatenate(p1s),
        )
        self.offsets_ = np.asarray(off, dtype=np.int64)

    def predict_interval(self, logits) -> tuple[np.ndarray, np.ndarray]:
        """Venn-Abers intervals ``(p0, p1)``, each (N, P): P = 1 (class 1) for K = 2, else K
        one-vs-all problems; ``p0 <= p1`` elementwise up to ties."""
        if self.offsets_ is None:
            raise ValueError("VennAbers is not fitted; call fit(logits, labels) first")
        probs = softmax(self._checked(logits))
        lo, hi = [], []
        for q, j in enumerate(self._problems(probs)):
            a, b = self.offsets_[q], self.offsets_[q + 1]
            p0, p1 = venn_abers_lookup(self.scores_[a:b], self.p0_[a + q : b + q + 1],
                                       self.p1_[a + q : b + q + 1], probs[:, j])  # fmt: skip
            lo.append(p0)
            hi.append(p1)
        return np.stack(lo, axis=1), np.stack(hi, axis=1)

    def _checked(self, logits) -> np.ndarray:
        z = check_logits(logits)
        if z.shape[1] != self.n_classes_:
            raise ValueError(
                f"logits have {z.shape[1]} classes but the calibrator was fitted on {self.n_classes_}"
            )
        return z

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        p0, p1 = self.predict_interval(logits)
        p = merge_interval(p0, p1)
        if logits.shape[1] == 2:
            out = np.concatenate([1.0 - p, p], axis=1)
        else:
            out = p / p.sum(axis=1, keepdims=True)
        return out.astype(np.float32) if self._params["precision"] == "float32" else out

    def _get_state(self) -> dict[str, Any]:
        return {"scores": self.scores_, "p0": self.p0_, "p1": self.p1_, "offsets": self.offsets_}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.scores_ = np.asarray(state["scores"], dtype=np.float64)
        self.p0_ = np.asarray(state["p0"], dtype=np.float64)
        self.p1_ = np.asarray(state["p1"], dtype=np.float64)
        self.offsets_ = np.asarray(state["offsets"], dtype=np.int64)
