"""Dirichlet and matrix scaling with ODIR strengths chosen by cross-validation, fold-averaged
(``dir_odir_cv``, ``ms_odir_cv``): Kull et al. 2019's protocol for their deep-net tables.

Kull, Perello-Nieto, Kängsepp, Silva Filho, Song, Flach 2019, "Beyond temperature scaling:
Obtaining well-calibrated multiclass probabilities with Dirichlet calibration" (NeurIPS),
section 5.2 and their experiment code (dirichletcal/experiments_dnn ``scripts/tune_cal_odir.py``,
``tune_dirichlet_nn_slim.py``, ``calibration/cal_methods.py``): Dir-ODIR (``softmax(ln p W + b)``)
and MS-ODIR (``softmax(z W + b)``) minimise the mean log-loss plus their code's ODIR penalty
``lambda sum_{i != j} W_ij^2 + mu sum_j b_j^2`` (their Keras regularisers: no division by
``K (K-1)`` or ``K`` as in the paper's formula, so ``lambda`` / ``mu`` are on the scale of their
grid and of their tuning tables) for every pair of a grid of ``(lambda, mu)``.  Dir-ODIR's
features are theirs: ``ln clip(p, 2.2e-16, 1)`` in float32, ``p`` their float32 softmax of the
logits, which subtracts the maximum of the whole array rather than of each row (it matters only
for rows whose largest logit is more than ~50 below the array's; such rows fall back to the row
maximum here, where theirs would underflow).  MS-ODIR's features are the logits.

1. the validation set is split by ``sklearn.model_selection.KFold(n_splits=5, shuffle=True,
   random_state=15)``; for each pair, one model is fitted on each fold's training part and
   scored by the log-loss (scikit-learn's 2019 rule, :func:`calbench.metrics.nll`) of its
   predictions on the fold's held-out part;
2. the pair with the smallest mean held-out log-loss is selected (their ``get_best_validation``
   by ``Loss``; ties: the first in grid order);
3. test predictions are the **average of the probabilities of that pair's five fold models**
   (their "_ens" columns); no model is refitted on the whole validation set.

Default grid (theirs): ``lambda`` in ``{1, 0.25, 0.5} x 10^i`` and ``mu`` in ``10^i`` for
integer ``i`` from -5 (K < 100) or -2 (K >= 100, their CIFAR-100 rule) to 6: 432 pairs for 10
classes, 243 for 100, i.e. 2,160 or 1,215 fits.  Pass ``lambdas`` / ``mus`` for a smaller grid.
Their fits were Keras models (identity / zero initialisation, Adam lr 1e-3 then 1e-4, batch 128,
early stopping with patience 15 on the training loss); here each fold model is the LBFGS fit of
:class:`~calbench.calibrators.scaling.MatrixScalingBias` on the features (same objective, run to
convergence), so selected pairs and values can differ slightly from theirs.  Their Dir-L2 (plain
L2 of all weights towards 0) is not offered.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calbench.calibrators.base import Calibrator, Field, register
from calbench.calibrators.precision import check_precision, softmax32
from calbench.calibrators.scaling import MatrixScalingBias, check_fit_options, fit_scaling
from calbench.functional import softmax
from calbench.metrics import nll

#: Kull et al.'s fold count and KFold seed.
N_FOLDS = 5
RANDOM_STATE = 15


def kull_grid(n_classes: int) -> tuple[list[float], list[float]]:
    """Kull et al.'s ``(lambdas, mus)`` grid for ``n_classes`` (module docstring)."""
    start = -2 if n_classes >= 100 else -5
    powers = [10.0**i for i in range(start, 7)]
    lambdas = sorted({p * f for p in powers for f in (1.0, 0.25, 0.5)})
    return lambdas, powers


def kull_log_probs(logits) -> np.ndarray:
    """Dir-ODIR's input in Kull et al.'s code: ``ln clip(p, eps, 1)`` in float32, ``eps`` =
    float64's machine epsilon, ``p`` = float32 softmax with the array's maximum subtracted (rows
    whose exponentials all underflow use their own maximum)."""
    z = np.asarray(logits, dtype=np.float32)
    e = np.exp(z - z.max())
    s = e.sum(axis=1, keepdims=True)
    bad = s[:, 0] == 0
    if np.any(bad):
        e[bad] = np.exp(z[bad] - z[bad].max(axis=1, keepdims=True))
        s[bad] = e[bad].sum(axis=1, keepdims=True)
    p = e / s
    return np.log(np.clip(p, np.float32(np.finfo(np.float64).eps), np.float32(1.0)))


def _check_grid(values, name: str) -> list[float] | None:
    if values is None:
        return None
    ok = isinstance(values, list | tuple) and len(values) > 0
    ok = ok and all(
        isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v) and v >= 0
        for v in values
    )
    if not ok:
        raise ValueError(
            f"{name} must be a non-empty list of numbers >= 0 (or null for Kull et al.'s grid), "
            f"got {values!r}"
        )
    return [float(v) for v in values]


class _ODIRCrossValidated(Calibrator):
    """Shared implementation (module docstring); subclasses set ``_features``."""

    state_schema = {
        "odir": Field(shape=(2,), low=0.0, note="selected (lambda, mu)"),
        "W": Field(shape=(None, "K", "K"), note="one weight matrix per fold model"),
        "b": Field(shape=(None, "K"), note="one intercept per fold model"),
        "cv_loss": Field(shape=(None,), low=0.0, note="mean held-out log-loss per grid pair"),
    }

    def __init__(
        self,
        *,
        lambdas: list[float] | None = None,
        mus: list[float] | None = None,
        n_folds: int = N_FOLDS,
        random_state: int = RANDOM_STATE,
        max_iter: int = 1000,
        line_search: str | None = "strong_wolfe",
        dtype: str = "float32",
        device: str = "auto",
        precision: str = "float64",
    ) -> None:
        check_fit_options(line_search, max_iter, dtype, 0.0, None)
        if isinstance(n_folds, bool) or not isinstance(n_folds, int) or n_folds < 2:
            raise ValueError(f"n_folds must be an integer >= 2, got {n_folds!r}")
        if isinstance(random_state, bool) or not isinstance(random_state, int) or random_state < 0:
            raise ValueError(f"random_state must be an integer >= 0, got {random_state!r}")
        params = dict(
            lambdas=_check_grid(lambdas, "lambdas"),
            mus=_check_grid(mus, "mus"),
            n_folds=n_folds,
            random_state=random_state,
            max_iter=max_iter,
            line_search=line_search,
            dtype=dtype,
            device=device,
            precision=check_precision(precision),
        )
        if "mus" not in type(self).accepted_params():  # Dir-L2 ties mu to lambda
            del params["mus"]
        super().__init__(**params)
        self.odir_: np.ndarray | None = None
        self.W_: np.ndarray | None = None
        self.b_: np.ndarray | None = None
        self.cv_loss_: np.ndarray | None = None

    def grid(self, n_classes: int) -> list[tuple[float, float]]:
        """The ``(lambda, mu)`` pairs tried, in order (lambda-major)."""
        lam0, mu0 = kull_grid(n_classes)
        lambdas = self._params["lambdas"] or lam0
        mus = self._params.get("mus") or mu0
        return [(lam, mu) for lam in lambdas for mu in mus]

    def _base(self, pair, k: int) -> MatrixScalingBias:
        """Matrix scaling with calbench's normalised ODIR equal to their unnormalised penalty."""
        p = self._params
        return MatrixScalingBias(
            odir=(pair[0] * k * (k - 1), pair[1] * k),
            max_iter=p["max_iter"],
            line_search=p["line_search"],
            dtype=p["dtype"],
            device=p["device"],
        )

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        from sklearn.model_selection import KFold

        p = self._params
        x = self._features(logits)
        k = int(x.shape[1])
        folds = list(
            KFold(n_splits=p["n_folds"], shuffle=True, random_state=p["random_state"]).split(x)
        )
        best = None
        losses = []
        for pair in self.grid(k):
            models, fold_loss = [], []
            for train, held in folds:
                # the input was checked (or allowed) by this calibrator's own fit
                model = self._base(pair, k).fit(x[train], labels[train], allow_probabilities=True)
                fold_loss.append(nll(model.predict_proba(x[held]), labels[held]))
                models.append(model)
            losses.append(float(np.mean(fold_loss)))
            if best is None or losses[-1] < best[0]:
                best = (losses[-1], pair, models)
        _, pair, models = best
        self.odir_ = np.array(pair, dtype=np.float64)
        self.W_ = np.stack([m.params_["W"] for m in models])
        self.b_ = np.stack([m.params_["b"] for m in models])
        self.cv_loss_ = np.array(losses, dtype=np.float64)

    def _features(self, logits: np.ndarray) -> np.ndarray:
        return logits

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        if self._params["precision"] == "float32":
            x = np.asarray(self._features(logits), dtype=np.float32)
            probs = [
                softmax32(x @ w.astype(np.float32) + b.astype(np.float32))
                for w, b in zip(self.W_, self.b_, strict=True)
            ]
            return np.mean(probs, axis=0, dtype=np.float32)
        x = np.asarray(self._features(logits), dtype=np.float64)
        out = np.zeros(x.shape, dtype=np.float64)
        for w, b in zip(self.W_, self.b_, strict=True):
            out += softmax(x @ w.astype(np.float64) + b.astype(np.float64))
        return out / len(self.W_)

    def _get_state(self) -> dict[str, Any]:
        return {"odir": self.odir_, "W": self.W_, "b": self.b_, "cv_loss": self.cv_loss_}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.odir_ = np.asarray(state["odir"], dtype=np.float64)
        self.W_ = np.asarray(state["W"])
        self.b_ = np.asarray(state["b"])
        self.cv_loss_ = np.asarray(state["cv_loss"], dtype=np.float64)

    @classmethod
    def _check_state(cls, state: dict[str, Any], k: int) -> str | None:
        if len(state["W"]) != len(state["b"]) or len(state["W"]) < 1:
            return f"W holds {len(state['W'])} fold models but b {len(state['b'])}"
        return None


class _PlainL2Fit:
    """One Dir-L2 fold model: matrix scaling on the features minimising mean CE +
    ``lam (sum W^2 + sum b^2)`` (weight decay towards 0, Kull et al.'s Keras ``l2``)."""

    def __init__(self, lam: float, **options: Any) -> None:
        self.lam, self.options, self.params_ = lam, options, None

    def fit(self, x, y, allow_probabilities: bool = True) -> _PlainL2Fit:
        self.params_ = fit_scaling(x, y, "ms_b", l2=self.lam, l2_center="zero", **self.options)
        return self

    def predict_proba(self, x) -> np.ndarray:
        w, b = (self.params_[k].astype(np.float64) for k in ("W", "b"))
        return softmax(np.asarray(x, dtype=np.float64) @ w + b)


@register
class DirichletODIRCV(_ODIRCrossValidated):
    """Dir-ODIR with (lambda, mu) by 5-fold CV and fold-averaged predictions (Kull et al. 2019)."""

    name = "dir_odir_cv"
    reference = "Kull et al. 2019 (Dir-ODIR, their cross-validation protocol)"

    def _features(self, logits: np.ndarray) -> np.ndarray:
        return kull_log_probs(logits)


@register
class MatrixScalingODIRCV(_ODIRCrossValidated):
    """MS-ODIR with (lambda, mu) by 5-fold CV and fold-averaged predictions (Kull et al. 2019)."""

    name = "ms_odir_cv"
    reference = "Kull et al. 2019 (MS-ODIR, their cross-validation protocol)"


@register
class DirichletL2CV(_ODIRCrossValidated):
    """Dir-L2 with lambda by 5-fold CV and fold-averaged predictions (Kull et al. 2019).

    Their code's Dir-L2 (``tune_dirichlet_nn.py --no_mus``, selected among pairs with
    ``mu = lambda``): Dirichlet features as :class:`DirichletODIRCV`, penalty
    ``lambda (sum_ij W_ij^2 + sum_j b_j^2)`` towards 0 (diagonal included), ``lambda`` from their
    grid (:func:`kull_grid`); the selected value is stored as ``odir = (lambda, lambda)``.
    """

    name = "dir_l2_cv"
    reference = "Kull et al. 2019 (Dir-L2, their cross-validation protocol)"

    def __init__(
        self,
        *,
        lambdas: list[float] | None = None,
        n_folds: int = N_FOLDS,
        random_state: int = RANDOM_STATE,
        max_iter: int = 1000,
        line_search: str | None = "strong_wolfe",
        dtype: str = "float32",
        device: str = "auto",
        precision: str = "float64",
    ) -> None:
        super().__init__(
            lambdas=lambdas,
            n_folds=n_folds,
            random_state=random_state,
            max_iter=max_iter,
            line_search=line_search,
            dtype=dtype,
            device=device,
            precision=precision,
        )

    def grid(self, n_classes: int) -> list[tuple[float, float]]:
        lambdas = self._params["lambdas"] or kull_grid(n_classes)[0]
        return [(lam, lam) for lam in lambdas]

    def _base(self, pair, k: int) -> _PlainL2Fit:
        p = self._params
        return _PlainL2Fit(
            pair[0],
            max_iter=p["max_iter"],
            line_search=p["line_search"],
            dtype=p["dtype"],
            device=p["device"],
        )

    def _features(self, logits: np.ndarray) -> np.ndarray:
        return kull_log_probs(logits)
