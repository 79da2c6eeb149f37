"""Tests of the calbench.plots functions' argument checks (one-line ValueErrors) and of the
package's import cost (no matplotlib until a figure is drawn)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.figure import Figure  # noqa: E402

from calbench import plots  # noqa: E402
from calbench.functional import softmax  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from plot_checks import HAND_LABELS, HAND_PROBS  # noqa: E402


# --------------------------------------------------------------------------------------------
# bad inputs: one-line ValueError
# --------------------------------------------------------------------------------------------
def _one_line(excinfo):
    assert "\n" not in str(excinfo.value)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: plots.reliability_diagram(np.log(HAND_PROBS), HAND_LABELS), "logits"),
        (lambda: plots.reliability_diagram(HAND_PROBS, HAND_LABELS[:-1]), "one label per row"),
        (lambda: plots.reliability_diagram(HAND_PROBS, HAND_LABELS + 1), r"\[0, 2\]"),
        (lambda: plots.reliability_diagram(HAND_PROBS, HAND_LABELS, n_bins=0), "n_bins"),
        (lambda: plots.reliability_diagram(HAND_PROBS, HAND_LABELS, style="bars"), "style"),
        (lambda: plots.reliability_diagram(HAND_PROBS, HAND_LABELS, binning="q"), "binning"),
        (lambda: plots.reliability_curve({"m": HAND_PROBS}, HAND_LABELS, binning="q"), "binning"),
        (lambda: plots.reliability_diagram(HAND_PROBS, HAND_LABELS, ax="ax"), "Axes"),
        (
            lambda: plots.reliability_diagram(
                HAND_PROBS, HAND_LABELS, style="coursework", ax=tuple(Figure().subplots(1, 2))
            ),
            "pair",
        ),
        (lambda: plots.reliability_diagram(HAND_PROBS, HAND_LABELS, title=3), "title"),
        (lambda: plots.reliability_diagram(HAND_PROBS[0], HAND_LABELS[:1]), "2-D"),
        (lambda: plots.classwise_reliability_diagram(HAND_PROBS, HAND_LABELS, 3), "class_index"),
        (lambda: plots.classwise_reliability_diagram(HAND_PROBS, HAND_LABELS, -1), "class_index"),
        (lambda: plots.classwise_reliability_diagram(HAND_PROBS, HAND_LABELS, 1.0), "class_index"),
        (lambda: plots.reliability_curve({}, HAND_LABELS), "non-empty dict"),
        (lambda: plots.reliability_curve([HAND_PROBS], HAND_LABELS), "dict"),
        (lambda: plots.reliability_curve({"m": HAND_PROBS * 2}, HAND_LABELS), "method 'm'"),
        (lambda: plots.reliability_grid({}, HAND_LABELS), "non-empty dict"),
        (lambda: plots.reliability_grid({"m": HAND_PROBS}, HAND_LABELS, ncols=0), "ncols"),
        (lambda: plots.reliability_grid({"m": HAND_PROBS}, HAND_LABELS, style="x"), "style"),
        (lambda: plots.reliability_grid({"m": HAND_PROBS}, HAND_LABELS[:2]), "method 'm'"),
        (lambda: plots.ece_vs_temperature(HAND_PROBS, HAND_LABELS, [1.0, 0.0]), "> 0"),
        (lambda: plots.ece_vs_temperature(HAND_PROBS, HAND_LABELS, []), "non-empty"),
        (lambda: plots.ece_vs_temperature(HAND_PROBS, HAND_LABELS, [[1.0]]), "1-D"),
        (lambda: plots.ece_vs_temperature(HAND_PROBS, HAND_LABELS, [np.nan]), "finite"),
        (lambda: plots.ece_vs_temperature(HAND_PROBS, HAND_LABELS, ["a"]), "numbers"),
        (lambda: plots.ece_vs_temperature(HAND_PROBS * np.inf, HAND_LABELS, [1.0]), "NaN"),
        (
            lambda: plots.binary_calibration_map(HAND_PROBS, HAND_LABELS, {"i": softmax}),
            "binary",
        ),
        (
            lambda: plots.binary_calibration_map([0.2, 1.3], [0, 1], {"i": softmax}),
            "scores",
        ),
        (lambda: plots.binary_calibration_map([0.2, 0.7], [0, 2], {"i": softmax}), "labels"),
        (lambda: plots.binary_calibration_map([0.2, 0.7], [0, 1], {"i": 3}), "not callable"),
        (lambda: plots.binary_calibration_map([0.2, 0.7], [0, 1], {}), "non-empty dict"),
        (
            lambda: plots.binary_calibration_map([0.2, 0.7], [0, 1], {"i": lambda z: z}),
            "calibrator 'i'",
        ),
        (
            lambda: plots.binary_calibration_map([0.2, 0.7], [0, 1], {"i": lambda z: z[:3, 0]}),
            "returned shape",
        ),
        (
            lambda: plots.binary_calibration_map([0.2, 0.7], [0, 1], {"i": softmax}, n_points=1),
            "n_points",
        ),
    ],
)
def test_bad_inputs_raise_one_line_value_error(call, match):
    with pytest.raises(ValueError, match=match) as excinfo:
        call()
    _one_line(excinfo)


def test_import_is_cheap():
    code = (
        "import sys, calbench.plots; "
        "heavy = [m for m in ('matplotlib', 'torch', 'scipy', 'sklearn') if m in sys.modules]; "
        "print(heavy); assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60)
