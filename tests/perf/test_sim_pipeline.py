"""perf/sim_pipeline.py runs one tiny cell end to end through ``CalibrateSpec.run`` in both
evaluation schemes and summarises it (so the script cannot rot); its helpers on known values."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

PERF = Path(__file__).resolve().parents[2] / "perf"


@pytest.fixture(scope="module")
def sim():
    spec = importlib.util.spec_from_file_location("sim_pipeline", PERF / "sim_pipeline.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_one_tiny_cell_through_the_calibrate_step_in_both_schemes(sim, tmp_path, capsys):
    out = tmp_path / "sim.jsonl"
    sim.main(["--cells", "tiny", "--studies", "1", "--n-bootstrap", "20", "--fits", "3",
              "--out", str(out)])  # fmt: skip
    text = capsys.readouterr().out
    recs = [__import__("json").loads(line) for line in out.read_text().splitlines()]
    assert [(r["scheme"], r["n"]) for r in recs] == [("holdout", 200), ("crossfit", 200)]
    holdout, crossfit = recs
    assert {r["test"] for r in holdout["compare"]} >= {"paired_t"}
    assert {r["test"] for r in crossfit["compare"]} == {"corrected_repeated_cv_t"}
    assert holdout["temperature"] > 1.0  # gamma 1.6: over-confident, ts softens
    assert "| tiny | crossfit | ts | nll |" in text
    assert "| tiny | holdout | ts vs uncalibrated | ece_ub |" in text
    sim.main(["--cells", "tiny", "--studies", "1", "--fits", "3", "--out", str(out)])
    assert len(out.read_text().splitlines()) == 2  # resumed: nothing rerun


def test_the_holdout_ts_estimand_is_the_population_value_at_the_fitted_temperature(sim):
    from calbench.synthetic import SyntheticModel, population_scores

    model = SyntheticModel(gamma=1.6)
    got = sim.population(model, 1.3)
    assert got["nll"] == pytest.approx(
        population_scores(model, temperature=1.3, points=sim.POINTS)["nll"]
    )
    # a ts fit on a large sample finds the population-optimal temperature
    p, y = model.sample(100_000, np.random.default_rng(0))
    assert sim.fitted_temperature(np.log(p), y) == pytest.approx(
        sim.optimal_temperature(model), abs=0.02
    )


def test_over_models_coverage_is_of_the_pools_values(sim):
    pool = np.array([[0.0, 1.0]] * 3 + [[1.0, 0.0]] + [[0.5, 0.5]])
    true_win, win, true_imp, imp = sim.over_models_coverage(pool, models=5, groups=4)
    assert true_win == pytest.approx((3 + 0.5) / 5)
    assert true_imp == pytest.approx((3 - 1) / 5)
    assert win[2] == imp[2] == 4 and 0.0 <= win[0] <= 1.0
