"""The report's "calibrated at the 5% level?" table: KS calibration-test p-values per model,
Holm-adjusted over the model's calibrators (calbench.report.render.verdict_view)."""

import numpy as np
import pytest

from calbench.report.render import VERDICT_TEST, verdict_view

SPEC = {
    "models": {"m1": {"dataset": "d", "display": {"name": "Net"}}},
    "calibrators": {"a": {"display": "A"}, "b": {"display": "B"}, "c": {"display": "C"}},
}


def _rows(p_values, metric=VERDICT_TEST, half="test"):
    return [
        {"dataset": "d", "model": "m1", "method": m, "half": half, "metric": metric, "value": p}
        for m, p in p_values.items()
    ]


def test_holm_within_the_model_known_answer():
    # Holm over 3: 0.001 * 3 = 0.003 (rejected), 0.02 * 2 = 0.04 (rejected), 0.5 (kept)
    view = verdict_view(_rows({"a": 0.001, "b": 0.5, "c": 0.02}), SPEC)
    assert view["header"] == ["A", "B", "C"] and view["m"] == 3
    cells = view["rows"][0]["cells"]
    assert [c["ok"] for c in cells] == [False, True, False]
    assert cells[0]["text"] == "no (p = 0.003)" and cells[2]["text"] == "no (p = 0.04)"
    assert cells[1]["text"] == "yes (p = 0.5)"
    assert (view["n_calibrated"], view["n"]) == (1, 3)
    assert view["rows"][0]["label"] == "Net"


def test_no_test_rows_no_section_and_validation_half_ignored():
    assert verdict_view(_rows({"a": 0.3}, metric="ece"), SPEC) is None
    assert verdict_view(_rows({"a": 0.3}, half="val"), SPEC) is None


def test_p_values_of_the_registered_metric_match_caltests():
    from calbench.caltests import ks_calibration_test
    from calbench.functional import softmax
    from calbench.metrics import METRICS

    rng = np.random.default_rng(0)
    p = softmax(rng.normal(size=(2000, 5)) * 3)
    y = (p.cumsum(1) > rng.random((2000, 1))).argmax(1)
    assert METRICS[VERDICT_TEST](p, y) == pytest.approx(ks_calibration_test(p, y).p_value)
    assert METRICS[VERDICT_TEST](p, y) > 0.01  # labels drawn from p: calibrated
