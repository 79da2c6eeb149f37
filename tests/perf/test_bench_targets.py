"""The arithmetic of the perf scripts that print the issue's targets (perf/bench_workflow.py,
perf/bench_coursework_logits.py), on hand-made job costs; no timing is asserted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

PERF = Path(__file__).resolve().parents[2] / "perf"


def _load(name):
    sys.path.insert(0, str(PERF))  # bench_coursework_logits imports bench_workflow
    try:
        spec = importlib.util.spec_from_file_location(name, PERF / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(PERF))


@pytest.fixture(scope="module")
def cw():
    return _load("bench_coursework_logits")


@pytest.fixture(scope="module")
def wf():
    return _load("bench_workflow")


def test_makespan_longest_first(cw):
    jobs = [(4.0, 1), (3.0, 1), (2.0, 1), (1.0, 1)]
    # 2 cores: 4 and 3 start; 2 starts at 3 (ends 5), 1 at 4 (ends 5)
    assert cw.makespan(jobs, 2) == pytest.approx(5.0)
    assert cw.makespan(jobs, 16) == pytest.approx(4.0)
    assert cw.makespan(jobs, 1) == pytest.approx(10.0)
    # a 4-thread job of 8 CPU-s holds both cores of a 2-core machine for 4 s
    assert cw.makespan([(8.0, 4)], 2) == pytest.approx(4.0)


def _rec(job, cpu, s=1.0):
    return {"job": job, "cpu_s": cpu, "s": s, "peak_mb": 10.0}


def test_extrapolation_is_models_times_job_cost(cw, capsys):
    cfg = {"models": {f"a{i}": {"dataset": "a"} for i in range(3)}
           | {f"b{i}": {"dataset": "b"} for i in range(2)}}  # fmt: skip
    by_rule = {
        "import_logits": [_rec("a/a0", 1.0), _rec("b/b0", 2.0)],
        "split": [_rec("a", 0.5), _rec("b", 0.5)],
        "calibrate": [_rec("a/a0", 10.0), _rec("b/b0", 20.0)],
        "aggregate": [_rec("aggregate", 3.0)],
    }
    fig = cw.extrapolate(cfg, by_rule, {"b0": 5.0})  # b's calibrate job: 20 + 5 capped CPU-s
    out = capsys.readouterr().out
    # 3 x (1 + 10) + 0.5 + 2 x (2 + 25) + 0.5 + 3 = 33.5 + 54.5 + 3
    assert "total 91 CPU-s" in out and "for 5 of 5 models" in out
    assert fig["full"] and fig["models"] == 5
    # 2 cores: stage 1 {2, 2, 1, 1, 1, 0.5, 0.5} = 4, stage 2 {25, 25, 10, 10, 10} = 45, + 3
    assert fig["span"][2] == pytest.approx(4.0 + 45.0 + 3.0)
    assert fig["span"][16] == pytest.approx(2.0 + 25.0 + 3.0)
    partial = cw.extrapolate(cfg, {k: v[:1] if k != "aggregate" else v
                                   for k, v in by_rule.items()}, {})  # fmt: skip
    assert not partial["full"] and partial["models"] == 3
    assert "b                2 models: not measured" in capsys.readouterr().out


def test_logged_only_reads_the_rules_without_benchmark_files(cw, tmp_path):
    log = tmp_path / "logs" / "replication_tables" / "replication.log"
    log.parent.mkdir(parents=True)
    log.write_text("x\ncalbench replication-tables: 0.42 CPU-s, 43 MB peak memory\n")
    (tmp_path / "logs" / "calibrate").mkdir()
    (tmp_path / "logs" / "calibrate" / "m.log").write_text("no resource line\n")
    found = cw.logged_only(tmp_path, {"aggregate": []})
    assert list(found) == ["replication_tables"]
    (rec,) = found["replication_tables"]
    assert (rec["job"], rec["cpu_s"], rec["peak_mb"]) == ("replication", 0.42, 43.0)
    lines = cw.per_rule_table(found)
    assert lines[1].split() == ["replication_tables", "1", "0.4", "-", "-", "43"]


def test_scenario_targets(wf):
    jobs = {"train_model": [{"cpu_s": 100.0, "s": 30.0}],
            "cache_logits": [{"cpu_s": 4.0, "s": 5.0}]}  # fmt: skip
    assert wf.scenario_target("rebuild", jobs, 2, 2.4)[0] == pytest.approx(62.5)
    assert wf.scenario_target("no-op", {}, 2, 2.4)[0] == pytest.approx(2.9)
    assert wf.scenario_target("add a model", jobs, 2, 2.4)[0] == pytest.approx(55.0)
    assert wf.scenario_target("add a calibrator", {}, 2, 2.4)[0] == 30.0


def test_spec_override_leaves_the_config_alone(cw):
    cfg = {"calibrators": {"ms_b": {"params": {"precision": "float32"}}},
           "evaluation": {}, "compare": dict.fromkeys(
               ("metrics", "baselines", "n_bootstrap", "select_folds", "select_exclude")),
           "plots": {"n_bins": 10, "style": "coursework"}}  # fmt: skip
    spec = cw.spec_of(cfg, ms_b={"max_iter": 5})
    assert spec["calibrators"]["ms_b"]["params"] == {"precision": "float32", "max_iter": 5}
    assert cfg["calibrators"]["ms_b"]["params"] == {"precision": "float32"}


def test_makespan_backfills_and_scales_by_amdahl(cw):
    # a 4-thread job on 5 cores leaves one: the 1-thread jobs run beside it, not after it
    jobs = [(40.0, 4), (3.0, 1), (3.0, 1)]
    assert cw.makespan(jobs, 5) == pytest.approx(10.0)
    # half the work on the threads: 8 CPU-s on 4 threads take 4 + 1 s
    assert cw.job_seconds(8.0, 4, 0.5) == pytest.approx(5.0)
    assert cw.makespan([(8.0, 4, 0.5)], 16) == pytest.approx(5.0)
    assert cw.makespan([(8.0, 4, 0.5)], 2) == pytest.approx(6.0)  # capped at the 2 cores


def test_calibrate_threads_follow_the_rules_sizing(cw):
    assert cw.calibrate_threads(10_000, 10) == 1
    assert cw.calibrate_threads(50_000, 1000) == cw.sizing()["CALIBRATE_MAX_THREADS"]
    assert cw.calibrate_threads(50_000, 1000, cores=2) == 1
    assert cw.calibrate_threads(50_000, 1000, cores=16) == 4
