"""The conformance suite (calbench.conformance): every built-in calibrator and metric and every
adapter passes it; each deliberately broken calibrator fails the check it breaks, with a message
saying what is wrong; the CLI exits non-zero on failure."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

from calbench.adapters import ADAPTERS
from calbench.calibrators import REGISTRY
from calbench.conformance import (
    Check,
    calibrator_checks,
    layout_variants,
    metric_checks,
    overconfident_logits,
    run,
)
from calbench.metrics import METRICS

HERE = Path(__file__).resolve().parent
#: cheap hyperparameters for the built-ins whose defaults are slow (grids, long optimisations)
CHEAP = {
    "ts_sbece": {"n_steps": 5},
    "dir_odir_cv": {"lambdas": [1e-3], "mus": [1e-3], "n_folds": 2, "max_iter": 30},
    "ms_odir_cv": {"lambdas": [1e-3], "mus": [1e-3], "n_folds": 2, "max_iter": 30},
    "dir_l2_cv": {"lambdas": [1e-3], "n_folds": 2, "max_iter": 30},
}
BUILTINS = sorted(
    n for n, c in REGISTRY.items() if c.__module__.startswith("calbench.calibrators.")
)
#: adapters whose suite takes more than ~15 s on a loaded 2-core machine
SLOW_ADAPTERS = {"netcal.ts", "probmetrics.svs", "probmetrics.sms", "betacal.beta"}


def _failures(checks) -> list[str]:
    return [c.line() for c in checks if c.ok is False]


def _params(name):
    params = dict(CHEAP.get(name, {}))
    if "device" in REGISTRY[name].accepted_params():
        params["device"] = "cpu"
    return params


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_calibrator_conforms(name):
    assert _failures(calibrator_checks(name, _params(name), timing=False)) == []


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_ADAPTERS else n for n in ADAPTERS]
)
def test_every_adapter_conforms(name):
    pytest.importorskip(name.split(".")[0] if name.split(".")[0] != "sklearn" else "sklearn")
    assert _failures(calibrator_checks(name, timing=False)) == []


@pytest.mark.parametrize("name", sorted(METRICS))
def test_every_builtin_metric_conforms(name):
    assert _failures(metric_checks(name, timing=False)) == []


@pytest.mark.parametrize(
    ("cls", "check", "message"),
    [
        ("NotNormalised", "probabilities", "max |row sum - 1| = 1.0e-01"),
        ("Random", "deterministic", "two fits differ by up to"),
        ("LossyState", "round trip", "the loaded calibrator differs by up to"),
        ("LayoutDependent", "layout and dtype", "differs from C-ordered float64 for fortran"),
        ("AcceptsProbabilities", "refuses probabilities", "fit(probabilities): accepted"),
        ("SilentOnNaN", "bad input", "NaN logits at predict: accepted"),
        ("Crashes", "shapes", "fit/predict_proba failed: RuntimeError: the solver diverged"),
    ],
)
def test_a_broken_calibrator_fails_the_check_it_breaks(cls, check, message, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    results = list(calibrator_checks(f"broken_calibrators:{cls}", timing=False))
    failed = {c.name: c.detail for c in results if c.ok is False}
    assert check in failed, results
    assert message in failed[check]
    # exactly the broken property (a random fit also differs between layouts: it differs anyway)
    assert set(failed) - {check} == ({"layout and dtype"} if cls == "Random" else set())


def test_the_baseline_of_the_broken_ones_conforms(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    assert _failures(calibrator_checks("broken_calibrators:Shrink")) == []
    sys.modules.pop("broken_calibrators", None)


def test_cli_exit_status_and_lines(monkeypatch, capsys):
    from calbench.cli import main

    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.chdir(HERE)
    assert main(["check-calibrator", "broken_calibrators:NotNormalised", "--no-timing"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  probabilities: finite, in [0, 1], max |row sum - 1| = 1.0e-01" in out
    assert out.rstrip().endswith("broken_calibrators:NotNormalised: FAILS the conformance suite")
    assert main(["check-calibrator", "ts", "--params", '{"device": "cpu"}']) == 0
    out = capsys.readouterr().out
    assert "INFO  fit time 5000 x 10:" in out and "INFO  fit time 5000 x 100:" in out
    assert main(["check-calibrator", "ts", "--params", '{"nope": 1}']) == 2
    assert "has no parameter(s) ['nope']" in capsys.readouterr().err


def test_check_line_format():
    assert Check("x", True, "d").line() == "PASS  x: d"
    assert Check("x", False).line() == "FAIL  x"
    assert Check("t", None, "1 s").line() == "INFO  t: 1 s"
    assert run(iter([Check("a", True), Check("b", None)]), emit=lambda s: None)
    assert not run(iter([Check("a", True), Check("b", False)]), emit=lambda s: None)


def test_layout_variants_hold_the_same_values():
    z, y = overconfident_logits(20, 3)
    for label, zv, yv, _ in layout_variants(z, y):
        assert np.array_equal(np.asarray(zv.detach() if hasattr(zv, "detach") else zv), z), label
        assert np.array_equal(np.asarray(yv).astype(np.int64), y), label


def test_overconfident_logits_are_overconfident():
    from calbench.functional import softmax

    z, y = overconfident_logits(20000, 5, seed=0)
    p = softmax(z)
    conf, acc = p.max(1).mean(), (p.argmax(1) == y).mean()
    assert conf > acc + 0.05  # labels drawn at T = 2.5: the raw softmax is over-confident


# --- isolation, direction and the time limit (issue 39, groups 1, 8, 10) ---------------------
@pytest.mark.parametrize(
    ("cls", "message"),
    [
        ("ScalesInPlace", "fit changes its logits in place"),
        ("ReusedBuffer", "predict_proba returns one reused output buffer (its second output "
                         "shares memory with the first, which it overwrote)"),
    ],
)  # fmt: skip
def test_in_place_changes_and_reused_buffers_fail_the_isolation_check(cls, message, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    results = list(calibrator_checks(f"careless_plugins:{cls}", timing=False))
    failed = {c.name: c.detail for c in results if c.ok is False}
    assert "isolation" in failed and message in failed["isolation"], results
    # (scaled logits also fit another map per layout and are no longer probability rows)
    assert set(failed) <= {"isolation", "layout and dtype", "refuses probabilities"}


def test_a_tensor_output_fails_the_shapes_check(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    results = list(calibrator_checks("careless_plugins:ReturnsTensor", timing=False))
    failed = {c.name: c.detail for c in results if c.ok is False}
    assert set(failed) == {"shapes"} and "gave torch.Tensor" in failed["shapes"], results


@pytest.mark.parametrize(
    ("name", "check", "message"),
    [
        ("wipes_probs", "value", "metric 'wipes_probs' wrote into a read-only array"),
        ("ece_backwards", "direction", "NOT as declared: calibrated"),
        ("nan_metric", "value", "metric 'nan_metric' returned nan"),
    ],
)
def test_a_careless_metric_fails_the_check_it_breaks(name, check, message, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    results = list(metric_checks(f"careless_plugins:{name}", timing=False))
    failed = {c.name: c.detail for c in results if c.ok is False}
    assert check in failed and message in failed[check], results


def test_a_metric_built_without_the_decorator_that_writes_its_input_is_named(monkeypatch):
    """A plug-in's own Metric (no read-only views): the check compares its inputs after."""
    from calbench.metrics import Metric
    from calbench.plugins import register_metric

    def core(p, y, dtype=None):
        value = float(p.max(axis=1).mean())
        p[...] = 0.25
        return value

    m = Metric("scribbler", core, display="x", scale=1.0, decimals=3, higher_is_better=False,
               interval=None, no_interval_reason="none", paired_test="sign_flip",
               reference="a test metric, 2026", verdicts=False)  # fmt: skip
    register_metric(m)
    failed = {c.name: c.detail for c in metric_checks("scribbler", timing=False) if c.ok is False}
    assert "the metric changes its probabilities in place" in failed["inputs unchanged"]


def test_the_coverage_checks_direction_is_printed_not_judged():
    (c,) = [c for c in metric_checks("lac_coverage", timing=False) if c.name == "direction"]
    assert c.ok is None and "a coverage check" in c.detail


def test_a_hanging_fit_or_metric_fails_its_check_within_the_limit(monkeypatch, capsys):
    from calbench.cli import main

    monkeypatch.syspath_prepend(str(HERE))
    t0 = time.perf_counter()
    assert main(["check-calibrator", "careless_plugins:HangsInFit", "--timeout", "0.5"]) == 1
    assert main(["check-metric", "careless_plugins:hangs_metric", "--timeout", "0.5"]) == 1
    assert time.perf_counter() - t0 < 30
    out = capsys.readouterr().out.splitlines()
    limit = "did not finish within 0.5 s (the per-check limit, --timeout)"
    assert [line for line in out if line.startswith("FAIL")] == [
        f"FAIL  shapes: {limit}; the fit or metric hangs or is far too slow",
        f"FAIL  value: {limit}; the fit or metric hangs or is far too slow",
    ]
    assert out[-1] == "careless_plugins:hangs_metric: FAILS the conformance suite"
    assert main(["check-metric", "ece", "--timeout", "-1"]) == 2
    assert "--timeout must be a number of seconds >= 0" in capsys.readouterr().err
