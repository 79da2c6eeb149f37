"""Training the workflow's own small models, with a per-epoch history.

* :mod:`~calbench.training.options`: the ``training`` options of a model spec
  (:class:`TrainingConfig`, :func:`parse_training`);
* :mod:`~calbench.training.loop`: the training loop (:func:`train`): index splits per method,
  seeded batches, epochs;
* :mod:`~calbench.training.steps`: one step of each method (standard and interleaved,
  Karandikar et al. 2021; Meta-Calibration, Bohdal et al. 2021) and the objective;
* :mod:`~calbench.training.history`: the per-epoch history, validation metrics and CSV;
* :mod:`~calbench.training.run`: :func:`train_from_spec` for a ``source: train`` spec.

Importing the package does not import torch.
"""

from calbench.training.history import (
    HISTORY_COLUMNS,
    META_COLUMNS,
    VAL_COLUMNS,
    evaluate_logits,
    validation_metrics,
    write_history,
)
from calbench.training.loop import train
from calbench.training.options import METHODS, TrainingConfig, parse_training
from calbench.training.run import train_from_spec
from calbench.training.steps import build_objective, final_linear

__all__ = [
    "HISTORY_COLUMNS",
    "META_COLUMNS",
    "METHODS",
    "VAL_COLUMNS",
    "TrainingConfig",
    "build_objective",
    "evaluate_logits",
    "final_linear",
    "parse_training",
    "train",
    "train_from_spec",
    "validation_metrics",
    "write_history",
]
