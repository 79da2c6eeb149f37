"""Shared by the tests of calbench.plots: a hand-computed example and readers of the numbers a
figure shows (bar rectangles, line data, text) from its matplotlib artists."""

from __future__ import annotations

import numpy as np

from calbench.functional import softmax

# --------------------------------------------------------------------------------------------
# A hand-computed example (3 classes, 6 samples, 10 equal-width bins).
#   top-label confidences 0.95 (correct), 0.95 (wrong), 0.92 (correct) -> bin [0.9, 1]
#                         0.65 (correct), 0.62 (wrong)                 -> bin [0.6, 0.7)
#                         0.45 (wrong)                                 -> bin [0.4, 0.5)
#   bin [0.4,0.5): conf 0.45,  acc 0,   weight 1/6
#   bin [0.6,0.7): conf 0.635, acc 1/2, weight 2/6
#   bin [0.9,1.0]: conf 0.94,  acc 2/3, weight 3/6
#   ECE = 1/6*0.45 + 2/6*0.135 + 3/6*(0.94 - 2/3) = 0.075 + 0.045 + 0.1366667 = 0.2566667
#   overall accuracy 3/6, average confidence 4.54/6
# --------------------------------------------------------------------------------------------
HAND_PROBS = np.array(
    [
        [0.95, 0.03, 0.02],
        [0.95, 0.03, 0.02],
        [0.04, 0.92, 0.04],
        [0.10, 0.25, 0.65],
        [0.62, 0.31, 0.07],
        [0.45, 0.35, 0.20],
    ]
)
HAND_LABELS = np.array([0, 1, 1, 2, 1, 2])
HAND_LEFT = [0.4, 0.6, 0.9]
HAND_CONF = [0.45, 0.635, 0.94]
HAND_ACC = [0.0, 0.5, 2.0 / 3.0]
HAND_WEIGHT = [1 / 6, 2 / 6, 3 / 6]
HAND_ECE = 1 / 6 * 0.45 + 2 / 6 * 0.135 + 3 / 6 * (0.94 - 2 / 3)


def _random_problem(n=400, k=5, seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * scale
    probs = softmax(logits)
    # labels drawn from a sharpened version so the model is miscalibrated
    p_true = softmax(logits * 0.5)
    labels = np.array([rng.choice(k, p=row) for row in p_true])
    return logits, probs, labels


def _container(ax, label):
    found = [c for c in ax.containers if c.get_label() == label]
    assert len(found) == 1, [c.get_label() for c in ax.containers]
    return found[0]


def _heights(container):
    return np.array([r.get_height() for r in container.patches])


def _lefts(container):
    return np.array([r.get_x() for r in container.patches])


def _bottoms(container):
    return np.array([r.get_y() for r in container.patches])


def _texts(ax):
    """Texts on the axes other than the sample counts printed over sparse bins and the tick
    labels a grid draws itself (calbench.plots.grid.TICK_GID)."""
    return [
        t.get_text()
        for t in ax.texts
        if not t.get_text().startswith("n=") and not str(t.get_gid()).startswith("calbench-tick")
    ]


def _line(ax, label):
    found = [ln for ln in ax.lines if ln.get_label() == label]
    assert len(found) == 1, [ln.get_label() for ln in ax.lines]
    return found[0]


def _nonempty(b):
    count = np.asarray(b.count)
    keep = count > 0
    return keep, np.asarray(b.confidence)[keep], np.asarray(b.accuracy)[keep], count[keep]
