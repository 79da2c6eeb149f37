"""Array inputs of any layout and dtype.

The property for every entry of ``calbench.calibrators.REGISTRY`` and ``calbench.metrics.METRICS``
(the answer for Fortran-ordered arrays, strided slices, float16/32/64 inputs, any integer label
dtype, NumPy arrays and torch tensors equals the answer for the same values as a C-ordered
float64 array, within the input dtype's precision) is the ``layout and dtype`` check of the
conformance suite (:mod:`calbench.conformance`), which ``tests/plugins/test_conformance.py``
runs over every built-in and every adapter, and ``calbench check-calibrator`` over a plug-in.
Here: the edge cases of the input checks themselves.
"""

import numpy as np
import pytest

from calbench.conformance import overconfident_logits
from calbench.functional import softmax


def test_float16_probabilities_pass_the_row_sum_check_only_within_their_precision():
    from calbench._checks import check_probs

    p = softmax(overconfident_logits(90, 10)[0]).astype(np.float16)
    dev = np.abs(p.astype(np.float64).sum(axis=1) - 1.0).max()
    assert 1e-4 < dev < 2e-3  # the case at hand: beyond the float32/64 tolerance
    check_probs(p)  # rounding to float16 moves row sums by up to ~5e-4: accepted
    bad = p.astype(np.float64)
    bad[0, 0] += 0.01  # far beyond float16 rounding: refused in every dtype
    for d in (np.float16, np.float32, np.float64):
        with pytest.raises(ValueError, match="rows must sum to 1"):
            check_probs(bad.astype(d))


def test_uint64_labels_beyond_int64_are_refused_not_wrapped():
    from calbench._checks import check_labels

    y = np.array([0, 2**63 + 1], dtype=np.uint64)
    with pytest.raises(ValueError, match="must lie in"):
        check_labels(y, 2, 3)
