"""Spline calibration (``spline``), binary and one-vs-rest.

Lucena 2018, "Spline-based probability calibration" (arXiv:1809.07751), sec. 3: the calibrated
log-odds is a natural cubic spline ``f`` of the score's log-odds, fitted by L2-penalised logistic
regression::

    min_beta  (1/n) sum_i w_i [ -y_i log s(f_i) - (1 - y_i) log(1 - s(f_i)) ]
              + lambda ||beta||^2 / p,          f = N beta,

where ``N`` is the natural cubic spline basis of Hastie, Tibshirani & Friedman (2009), eqs.
(5.4)-(5.5): ``N_1 = 1``, ``N_2 = x``, ``N_{k+2} = d_k - d_{K-1}`` with
``d_k(x) = ((x - xi_k)_+^3 - (x - xi_K)_+^3) / (xi_K - xi_k)``.

The procedure is that of the author's ``ml_insights``/``splinecalib`` ``SplineCalib`` with its
defaults, step by step:

* knots: the smallest and largest distinct score, 28 other distinct scores drawn with Python's
  ``random.Random(42).shuffle`` of the distinct interior scores, and 0.1, 0.2, ..., 0.9;
* a "unity prior" (Lucena 2018, sec. 3.3): 135 pseudo-points on the diagonal (scores
  ``10^-8 .. 10^-2`` (19), ``0.01 .. 0.99`` (99), ``1 - 10^-8 .. 1 - 10^-2`` (19), duplicates
  merged) with target equal to score and total weight 20;
* scores clipped to ``[eps, 1 - eps]`` before the log-odds, ``eps = max(1e-16, min(1e-4,
  2^(round(log2 m) - 1)))`` with ``m`` the score (or one minus the score) closest to 0 or 1;
* ``lambda`` from ``10^-4 .. 10^4`` (17 values): each fitted on folds 1-4 of a 5-fold split
  stratified on the target (seed 42) and scored by log-loss on fold 0; the lowest loss rounded to
  4 decimals wins (the first on ties); the final fit uses the same folds 1-4.

Each penalised fit is the exact optimum (Newton's method, gradient max-norm below 1e-10).  The
reference stops L-BFGS-B / BFGS at a gradient norm of 1e-4; on weakly penalised (ill-conditioned)
fits that moves its validation losses by up to ~1e-3, so where two ``lambda`` are that close the
reference may pick another one than the exact criterion does.  Where both pick the same
``lambda``, probabilities agree to about 1e-5.  Multiclass: each softmax column against ``y == j``, rows renormalised;
K = 2: class 1's probability, output ``[1 - f, f]``.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from calbench.calibrators.base import Calibrator, Field, register, rises_within
from calbench.calibrators.precision import check_precision
from calbench.calibrators.structured import blas_threads
from calbench.functional import softmax

KNOT_SAMPLE = 30
EXTRA_KNOTS = np.linspace(0.1, 0.9, 9)
LAMBDAS = np.logspace(-4, 4, 17)
N_FOLDS = 5
SEED = 42
PRIOR_WEIGHT = 20.0


def ncs_basis(x: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """Natural cubic spline basis (Hastie et al. 2009, eqs. 5.4-5.5) of ``x`` (n,) for sorted
    ``knots`` (K,): an (n, K) matrix."""
    x = np.asarray(x, dtype=np.float64)
    k = knots.size
    out = np.empty((x.size, k))
    out[:, 0] = 1.0
    out[:, 1] = x
    last = np.maximum(x - knots[-1], 0.0) ** 3

    def d(j):
        return (np.maximum(x - knots[j], 0.0) ** 3 - last) / (knots[-1] - knots[j])

    d_km1 = d(k - 2)
    for j in range(k - 2):
        out[:, j + 2] = d(j) - d_km1
    return out


def choose_knots(scores: np.ndarray) -> np.ndarray:
    """Knots on the probability scale (module docstring)."""
    u = np.unique(scores)
    if u.size < 3:
        raise ValueError(
            f"spline calibration needs at least 3 distinct scores per class, got {u.size}"
        )
    if u.size > KNOT_SAMPLE:
        inner = u[1:-1].tolist()
        random.Random(SEED).shuffle(inner)
        kn = np.concatenate([inner[: KNOT_SAMPLE - 2], [u[0], u[-1]]])
    else:
        kn = u
    return np.unique(np.concatenate([kn, EXTRA_KNOTS]))


def unity_prior() -> tuple[np.ndarray, np.ndarray]:
    """Pseudo-points ``(scores, weights)`` of the unity prior (module docstring)."""
    a1 = 10 ** np.linspace(-8, -2, 19)
    pts = np.unique(np.concatenate([a1, np.linspace(0.01, 0.99, 99), 1 - a1]))
    wv = np.concatenate([np.full(18, 1 / 18), np.ones(99), np.full(18, 1 / 18)])
    return pts, PRIOR_WEIGHT / wv.sum() * wv


def logodds_eps(scores: np.ndarray) -> float:
    inner = scores[(scores > 0) & (scores < 1)]
    m = min(inner.min(), 1 - (1 - inner).max())
    return float(max(min(1e-4, 2.0 ** (np.round(np.log2(m)) - 1)), 1e-16))


def stratified_folds(y: np.ndarray) -> np.ndarray:
    """Fold of each sample: per distinct target value, its indices shuffled by
    ``RandomState(42)`` and cut into 5 near-equal runs, fold order reversed for odd values."""
    folds = -np.ones(y.size)
    edges = lambda m: np.round(m / N_FOLDS * np.arange(N_FOLDS + 1)).astype(int)  # noqa: E731
    for v in np.unique(y):
        idx = np.flatnonzero(y == v)
        np.random.RandomState(SEED).shuffle(idx)
        e = edges(idx.size)
        for i in range(N_FOLDS):
            folds[idx[e[i] : e[i + 1]]] = i if v % 2 == 0 else N_FOLDS - i - 1
    return folds


def fit_penalised_logistic(x, y, w, lam, beta0=None, tol=1e-10, max_iter=100) -> np.ndarray:
    """Exact minimiser of the module docstring's penalised, weighted log-loss (Newton)."""
    n, p = x.shape
    beta = np.zeros(p) if beta0 is None else beta0.copy()
    reg = 2.0 * lam / p

    def loss(b):
        f = x @ b
        return float(
            np.sum(w * (y * np.logaddexp(0, -f) + (1 - y) * np.logaddexp(0, f))) / n
            + lam * b @ b / p
        )

    cur = loss(beta)
    for _ in range(max_iter):
        f = x @ beta
        z = np.exp(-np.logaddexp(0.0, -f))
        grad = x.T @ (w * (z - y)) / n + reg * beta
        if np.max(np.abs(grad)) < tol:
            break
        h = (x * (w * z * (1 - z))[:, None]).T @ x / n + reg * np.eye(p)
        step = np.linalg.solve(h, grad)
        t = 1.0
        while t > 1e-12:
            cand = beta - t * step
            new = loss(cand)
            if new <= cur:
                break
            t *= 0.5
        else:
            break
        beta, cur = cand, new
    return beta


def penalised_loss(x, y, w, lam, beta) -> float:
    """The penalised, weighted log-loss of the module docstring."""
    f = x @ beta
    ll = np.sum(w * (y * np.logaddexp(0, -f) + (1 - y) * np.logaddexp(0, f))) / x.shape[0]
    return float(ll + lam * beta @ beta / beta.size)


def _log_loss(y, q):
    q = np.clip(q, 1e-16, 1 - 1e-16)
    return -np.mean(y * np.log(q) + (1 - y) * np.log(1 - q))


def fit_spline(scores: np.ndarray, targets: np.ndarray):
    """``(knots on the log-odds scale, coefficients, eps, lambda)`` for one binary problem, and
    the penalised objective ``(x, y, w)`` of the final fit (its training folds)."""
    scores = np.asarray(scores, dtype=np.float64)
    knots = choose_knots(scores)
    pts, pw = unity_prior()
    s = np.concatenate([scores, pts])
    y = np.concatenate([np.asarray(targets, dtype=np.float64), pts])
    w = np.concatenate([np.ones(scores.size), pw])
    eps = logodds_eps(s)
    kt = np.unique(np.clip(knots, eps, 1 - eps))
    kt = np.log(kt / (1 - kt))
    sc = np.clip(s, eps, 1 - eps)
    x = ncs_basis(np.log(sc / (1 - sc)), kt)
    folds = stratified_folds(y)
    tr, te = folds != 0, folds == 0
    losses, fits = [], []
    beta = None
    for lam in LAMBDAS[::-1]:  # strongest penalty first: each fit warm-starts the next
        beta = fit_penalised_logistic(x[tr], y[tr], w[tr], float(lam), beta0=beta)
        fits.append(beta)
        losses.append(_log_loss(y[te], 1 / (1 + np.exp(-x[te] @ beta))))
    fits, losses = fits[::-1], losses[::-1]
    best = int(np.argmin(np.round(losses, 4)))
    return kt, fits[best], eps, float(LAMBDAS[best]), (x[tr], y[tr], w[tr])


def apply_spline(knots_tr: np.ndarray, coef: np.ndarray, eps: float, s: np.ndarray) -> np.ndarray:
    s = np.clip(np.asarray(s, dtype=np.float64), eps, 1 - eps)
    f = ncs_basis(np.log(s / (1 - s)), knots_tr) @ coef
    return 1.0 / (1.0 + np.exp(-f))


@register
class SplineCalibration(Calibrator):
    """Spline calibration (Lucena 2018), binary or one-vs-rest (module docstring).

    State: per binary problem (1 for K = 2, K otherwise) its log-odds knots and coefficients
    concatenated (``knots``, ``coef``, split by ``offsets``) and its clip ``eps``.
    """

    name = "spline"
    reference = "Lucena 2018 (spline calibration)"
    state_schema = {
        "knots": Field(shape=(None,)),
        "coef": Field(shape=(None,)),
        "offsets": Field(shape=(None,), integer=True, low=0.0),
        "eps": Field(shape=(None,), low=0.0, high=0.5, low_open=True),
    }

    @classmethod
    def _check_state(cls, state: dict[str, Any], k: int) -> str | None:
        off, n = np.asarray(state["offsets"]), len(state["knots"])
        problems = 1 if k == 2 else k
        if len(state["coef"]) != n:
            return f"knots has {n} entries but coef {len(state['coef'])}"
        if off.size != problems + 1 or off[0] != 0 or off[-1] != n or np.any(np.diff(off) < 3):
            return (
                f"offsets must hold {problems + 1} values rising from 0 to len(knots) = {n} by >= 3"
            )
        if len(state["eps"]) != problems:
            return f"eps must hold {problems} values"
        if not rises_within(state["knots"], off):
            return "knots must rise strictly within each problem"
        return None

    def __init__(self, *, precision: str = "float64") -> None:
        super().__init__(precision=check_precision(precision))
        self.knots_ = self.coef_ = self.offsets_ = self.eps_ = None

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        p = softmax(logits)
        cols = [1] if p.shape[1] == 2 else range(p.shape[1])
        ks, cs, es, off = [], [], [], [0]
        with blas_threads(p.size):
            for j in cols:
                kt, coef, eps = fit_spline(p[:, j], labels == j)[:3]
                ks.append(kt)
                cs.append(coef)
                es.append(eps)
                off.append(off[-1] + kt.size)
        self.knots_, self.coef_ = np.concatenate(ks), np.concatenate(cs)
        self.eps_, self.offsets_ = np.asarray(es), np.asarray(off, dtype=np.int64)

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        p = softmax(logits)
        cols = [1] if p.shape[1] == 2 else range(p.shape[1])
        o = self.offsets_
        f = np.stack([apply_spline(self.knots_[o[q] : o[q + 1]], self.coef_[o[q] : o[q + 1]], self.eps_[q], p[:, j])
                      for q, j in enumerate(cols)], axis=1)  # fmt: skip
        out = (
            np.concatenate([1.0 - f, f], axis=1)
            if p.shape[1] == 2
            else f / f.sum(axis=1, keepdims=True)
        )
        return out.astype(np.float32) if self._params["precision"] == "float32" else out

    def _get_state(self) -> dict[str, Any]:
        return {
            "knots": self.knots_,
            "coef": self.coef_,
            "offsets": self.offsets_,
            "eps": self.eps_,
        }

    def _set_state(self, state: dict[str, Any]) -> None:
        self.knots_ = np.asarray(state["knots"], dtype=np.float64)
        self.coef_ = np.asarray(state["coef"], dtype=np.float64)
        self.offsets_ = np.asarray(state["offsets"], dtype=np.int64)
        self.eps_ = np.asarray(state["eps"], dtype=np.float64)
