"""Calibration / refinement split of log-loss and Brier score (pure functions).

Berta, Holzmüller, Jordan & Bach 2025 (arXiv:2501.19195, "Rethinking early stopping: refine,
then calibrate"), sec. 3, eq. (4): a proper loss splits into a refinement error, the loss left
after the best recalibration, and a calibration error, the rest::

    refinement = L(g*(p), y),     calibration error = L(p, y) - refinement,

with ``g*`` estimated, as ``probmetrics`` reports it ("refinement_<loss>_ts-mix_all",
"calib-err_<loss>_ts-mix_all"), by temperature scaling with a uniform mixture fitted on the
evaluated set itself: ``l = max(log p, log tiny32)``, ``a* = argmin_a NLL(softmax(a l))``,
``g*(p) = (1 - e) softmax(a* l) + e / K`` with ``e = 1 / (n + 1)``.  Log-loss is computed on the
same clipped log-probabilities (``-log softmax(l)_y``), Brier as ``sum_j (q_j - 1[y = j])^2``
averaged over samples.  ``a*`` is the exact minimiser (probmetrics bisects on ``log a`` within
3e-8 of it), see :mod:`calbench.calibrators.structured`.

Facts for the registry: ``calib_err_logloss`` / ``calib_err_brier`` (labels "Cal. err. (NLL)",
"Cal. err. (Brier)") and ``refinement_logloss`` / ``refinement_brier`` ("Refinement (NLL)",
"Refinement (Brier)"), scale 1, 4 decimals, lower is better, bootstrap intervals by refitting on
each resample (the function is not a per-sample mean), reference ``probmetrics``.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from calbench._checks import check_choice, check_probs_labels
from calbench.functional import LOG_TINY32, fit_inverse_temperature, log_softmax, ts_mix_probs
from calbench.io import array_digest

LOSSES = ("logloss", "brier")


def _loss(q_log: np.ndarray, y: np.ndarray, loss: str) -> float:
    return _loss_of(log_softmax(q_log, axis=1), y, loss)


def _loss_of(ls: np.ndarray, y: np.ndarray, loss: str) -> float:
    """``loss`` of the normalised log-probabilities ``ls``."""
    if loss == "logloss":
        return float(-np.mean(ls[np.arange(y.size), y]))
    q = np.exp(ls)
    q[np.arange(y.size), y] -= 1.0
    return float(np.mean(np.einsum("ij,ij->i", q, q)))


#: the last few fitted TS-mix inverse temperatures, by content digest of (probabilities,
#: labels): the four metrics of this module on one prediction set share one fit (most of their
#: cost); only the scalar is kept, so the memo costs no memory whatever the array's size
_FITTED: OrderedDict = OrderedDict()
_KEEP = 8


def _recalibrated(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(l, log g*(p))``: the clipped log-probabilities and those of the TS-mix recalibration
    fitted on ``(p, y)`` itself (module docstring); the fit is memoised on the arrays' contents."""
    with np.errstate(divide="ignore"):
        lp = np.maximum(np.log(np.asarray(p, dtype=np.float64)), LOG_TINY32)
    key = array_digest(p, y)
    a = _FITTED.get(key)
    if a is None:
        a = fit_inverse_temperature(lp, y)
        _FITTED[key] = a
        while len(_FITTED) > _KEEP:
            _FITTED.popitem(last=False)
    else:
        _FITTED.move_to_end(key)
    q = ts_mix_probs(lp, a, 1.0 / (y.size + 1))
    with np.errstate(divide="ignore"):
        lq = np.maximum(np.log(q), LOG_TINY32)
    return lp, lq


def _split(lp: np.ndarray, lq: np.ndarray, y: np.ndarray, loss: str) -> tuple[float, float]:
    ref = _loss(lq, y, loss)
    return _loss(lp, y, loss) - ref, ref


def loss_split(probs, labels, loss: str = "logloss") -> tuple[float, float]:
    """``(calibration error, refinement)`` of ``loss`` ("logloss" or "brier") for ``probs``."""
    check_choice(loss, "loss", LOSSES)
    p, y = check_probs_labels(probs, labels)
    return _split(*_recalibrated(p, y), y, loss)


def split_values(p: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """The four metrics of this module on validated ``(p, y)`` from one recalibration, by
    registry name (``Metric.joint``): each equals its function's value exactly."""
    lp, lq = _recalibrated(p, y)
    ls_p, ls_q = log_softmax(lp, axis=1), log_softmax(lq, axis=1)  # once for both losses
    out = {}
    for loss in LOSSES:
        ref = _loss_of(ls_q, y, loss)
        out[f"calib_err_{loss}"], out[f"refinement_{loss}"] = _loss_of(ls_p, y, loss) - ref, ref
    return out


def calib_err_logloss(probs, labels) -> float:
    """Log-loss minus log-loss after TS-mix recalibration (module docstring)."""
    return loss_split(probs, labels, "logloss")[0]


def refinement_logloss(probs, labels) -> float:
    """Log-loss after TS-mix recalibration on the evaluated set (module docstring)."""
    return loss_split(probs, labels, "logloss")[1]


def calib_err_brier(probs, labels) -> float:
    """Brier score minus Brier score after TS-mix recalibration (module docstring)."""
    return loss_split(probs, labels, "brier")[0]


def refinement_brier(probs, labels) -> float:
    """Brier score after TS-mix recalibration on the evaluated set (module docstring)."""
    return loss_split(probs, labels, "brier")[1]
