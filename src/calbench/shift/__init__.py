"""Calibration under dataset shift (Ovadia et al. 2019): corrupted test sets and their evaluation.

:mod:`~calbench.shift.corruptions` (Hendrycks & Dietterich 2019 corruptions at severities 1-5),
:mod:`~calbench.shift.datasets` (the corrupted-set file format, generated sets and the published
CIFAR-10-C / CIFAR-100-C archives), :mod:`~calbench.shift.logits` (a model's logits on the test
half of every corrupted set) and :mod:`~calbench.shift.evaluate` (clean-fitted calibrators under
shift, paired bootstrap). Nothing here imports torch at import time.
"""

from calbench.shift.corruptions import CORRUPTIONS, PARAMS, SEVERITIES, corrupt

__all__ = ["CORRUPTIONS", "PARAMS", "SEVERITIES", "corrupt"]
