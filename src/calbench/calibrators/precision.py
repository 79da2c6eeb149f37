"""The ``precision`` option of the calibrators: the floating type of their probability arithmetic.

Every calibrator takes ``precision="float64"`` (the default) or ``precision="float32"``.

``"float64"`` -- calbench's numerics: softmax probabilities, binning, isotonic fits and the
calibrated outputs are computed in float64 whatever the logits' type.  Float32 softmax rounds
top-label probabilities above ``1 - 6e-8`` to exactly 1 and merges scores closer than float32's
resolution, which loses information an isotonic or binning map can use.

``"float32"`` -- the replicated study's precision (Vasilev, MSU 2021, ``calib/``), for
reproducing its numbers on its float32 logits:

* probabilities are ``scipy.special.softmax`` of float32 logits, which keeps float32: subtract the
  row maximum, exponentiate, divide by the row sum, every step rounded to float32
  (:func:`softmax32`; equal to scipy's output bit for bit);
* histogram binning bins those float32 values (its bin frequencies and renormalised output stay
  float64, as in the study);
* isotonic regression is scikit-learn's ``IsotonicRegression`` on float32 input: scores closer
  than float32's resolution (1e-6) to the first score of a group are pooled (1e-15 for float64),
  fitted values are rounded to float32, predictions interpolate in float32 arithmetic
  (``scipy.interpolate.interp1d`` on float32 knots) and the renormalisation runs in float32;
* the scaling family (``ts vs vs_b ms_b``, and ``dirichlet``) applies its fitted float32 map to
  float32 logits in float32 arithmetic before the float32 softmax (the study's
  ``LogitScaling.transform``);
* outputs are float32 arrays except histogram binning's (float64, as in the study).

On a synthetic 10-class set the isotonic difference alone moves test NLL from 1.210 (float64) to
1.162 (float32) and MCE from 0.277 to 0.145 (issue notes), far beyond the rounding of the
published tables, so replication configs set ``precision: float32``.
"""

from __future__ import annotations

import numpy as np

from calbench._checks import check_choice, check_logits
from calbench.functional import softmax

#: Accepted values of the ``precision`` option.
PRECISIONS = ("float64", "float32")


def check_precision(precision) -> str:
    """Return ``precision`` if it is one of :data:`PRECISIONS`, else a one-line ValueError."""
    check_choice(precision, "precision", PRECISIONS)
    return precision


def softmax32(logits) -> np.ndarray:
    """Row softmax computed entirely in float32, as ``scipy.special.softmax(z32, axis=1)``.

    ``z - max(z)``, ``exp`` and the division by the row sum (numpy's float32 pairwise sum), each
    rounded to float32; float64 logits are first rounded to float32. The same float32 operations
    as scipy's, applied in place on one new array (the input is never modified), so the result is
    equal bit for bit without scipy's three full-size temporaries.
    """
    arr = check_logits(logits)
    if arr.dtype == np.float32:
        e = arr - np.amax(arr, axis=1, keepdims=True)
    else:  # the float32 rounding is already a new array: shift it in place
        e = arr.astype(np.float32)
        e -= np.amax(e, axis=1, keepdims=True)
    np.exp(e, out=e)
    e /= np.sum(e, axis=1, keepdims=True)
    return e


def softmax_in(logits, precision: str) -> np.ndarray:
    """Softmax of ``logits`` in ``precision``: float64 (:func:`calbench.functional.softmax`) or
    float32 (:func:`softmax32`)."""
    return softmax32(logits) if precision == "float32" else softmax(logits)
