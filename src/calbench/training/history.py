"""What a training run records per epoch: the history's columns, the validation metrics and the
history CSV."""

from __future__ import annotations

from calbench.functional import softmax
from calbench.io import atomic_write_text
from calbench.logits import compute_logits
from calbench.metrics import accuracy, dece, ece, nll

#: columns of the history CSV, one row per epoch (no wall-clock times: two identical runs write
#: identical files; each epoch's time goes to the log, see :func:`calbench.training.train`)
HISTORY_COLUMNS = ("epoch", "loss", "accuracy", "lr")
#: per-epoch validation columns, written when the run has a validation set (``val_size`` or the
#: Meta-Calibration split): accuracy, NLL, ECE (15 equal-width bins, Guo et al. 2017 eq. 3) and
#: DECE (Bohdal et al. 2021 eq. 5-7, 15 bins, tau_a 100, tau_b 0.01) of the validation images
VAL_COLUMNS = ("val_accuracy", "val_nll", "val_ece", "val_dece")
#: extra per-epoch columns of Meta-Calibration runs: mean meta-loss and mean |omega|
META_COLUMNS = ("meta_loss", "omega_abs_mean")


def evaluate_logits(model, images, labels, preprocess, *, batch_size: int = 1000, device="cpu"):
    """Float32 logits of ``images`` (uint8 tensor) in eval mode, as a numpy array
    (:func:`calbench.logits.compute_logits`); the model's training mode is restored after."""
    was_training = model.training
    z = compute_logits(
        model, images, preprocess, batch_size=batch_size, device=device, progress=False
    )
    model.train(was_training)
    return z


def validation_metrics(logits, labels) -> dict:
    """Validation accuracy, NLL (study rule), ECE (15 equal-width bins, Guo et al. 2017 eq. 3)
    and DECE (Bohdal et al. 2021 eq. 5-7: 15 bins, tau_a 100, tau_b 0.01) of ``logits``."""
    import numpy as np

    p = softmax(np.asarray(logits, dtype=np.float64), axis=1)
    y = np.asarray(labels, dtype=np.int64)
    return {
        "val_accuracy": accuracy(p, y),
        "val_nll": nll(p, y),
        "val_ece": ece(p, y),
        "val_dece": dece(p, y),
    }


def write_history(path, history: list[dict]) -> None:
    """Write the per-epoch history as CSV atomically: :data:`HISTORY_COLUMNS`, then those of
    :data:`META_COLUMNS` and :data:`VAL_COLUMNS` that any row has (missing cells: ``nan``)."""
    extra = [c for c in META_COLUMNS + VAL_COLUMNS if any(c in row for row in history)]
    columns = list(HISTORY_COLUMNS) + extra
    lines = [",".join(columns)]
    for row in history:
        cells = []
        for c in columns:
            v = row.get(c, float("nan"))
            cells.append(repr(float(v)) if isinstance(v, float) else str(v))
        lines.append(",".join(cells))
    atomic_write_text(path, "\n".join(lines) + "\n")
