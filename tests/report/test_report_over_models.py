"""Verdicts over models: a section of studies with 5 models or more (win rates and improvements
over uncalibrated with bootstrap intervals over models), its CSVs written by the aggregate step
and its numbers the report's, absent from smaller studies."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from calbench.report import render
from calbench.report.build import aggregate
from calbench.report.context import build_context
from calbench.report.over_models import MIN_MODELS, read_over_models, study_over_models
from calbench.results import IMPROVEMENT_COLUMNS, WIN_RATE_COLUMNS, write_long_csv

METHODS = ("uncalibrated", "ts", "good")
PROV = {"config": "", "packages": {}, "logits": [], "splits": [], "datasets": []}


def _spec(n):
    return {
        "title": "Over models",
        "description": "",
        "protocol": {"n_bins": 15, "plot_bins": 10, "n_bootstrap": 20, "level": 0.95},
        "datasets": {"ds": {"display": "DS"}},
        "models": {f"m{i}": {"dataset": "ds", "display": {"name": f"net {i}"}} for i in range(n)},
        "calibrators": {m: {"display": m.upper()} for m in METHODS},
        "table_metrics": ["nll", "brier"],
        "losses_metrics": [],
        "reference": None,
    }


def _rows(n):
    """``good`` below ``ts`` below ``uncalibrated`` on NLL on every model; on Brier ``good``
    and ``ts`` tie on every even model."""
    rng = np.random.default_rng(n)
    rows = []
    for i in range(n):
        base = 1.0 + rng.uniform(0, 0.5)
        nll = {
            "uncalibrated": base,
            "ts": base - 0.2 - rng.uniform(0, 0.02),
            "good": base - 0.3 - rng.uniform(0, 0.1),
        }
        brier = {"uncalibrated": 0.3, "ts": 0.25, "good": 0.25 if i % 2 == 0 else 0.24}
        for metric, vals in (("nll", nll), ("brier", brier)):
            for m in METHODS:
                v = float(vals[m])
                rows.append({"dataset": "ds", "model": f"m{i}", "method": m, "half": "test",
                             "metric": metric, "value": v, "ci_low": v - 0.01,
                             "ci_high": v + 0.01})  # fmt: skip
    return rows


def _context(tmp_path, n):
    """The report's context as the workflow builds it: from the files aggregate wrote."""
    tables = _aggregate(tmp_path, n)
    over = read_over_models(tables / "win_rates.csv", tables / "improvement.csv")
    return build_context(rows=_rows(n), compare=[], spec=_spec(n), grids={},
                         provenance=PROV, over_models=over)  # fmt: skip


def _aggregate(tmp_path, n):
    rows = _rows(n)
    paths = []
    for i in range(n):
        for m in METHODS:
            p = tmp_path / "metrics" / f"m{i}" / f"{m}.csv"
            write_long_csv(p, [r for r in rows if r["model"] == f"m{i}" and r["method"] == m],
                           ("dataset", "model", "method", "half", "metric", "value", "ci_low",
                            "ci_high"))  # fmt: skip
            paths.append(p)
    tables = tmp_path / "tables"
    aggregate(paths, [], _spec(n), tmp_path / "all.csv", None, tables)
    return tables


def test_below_five_models_no_section_and_header_only_files(tmp_path):
    n = MIN_MODELS - 1
    stale = tmp_path / "tables" / "win_rates.csv"  # left by an earlier run of more models
    stale.parent.mkdir(parents=True)
    stale.write_text("metric\n1\n")
    ctx = _context(tmp_path, n)
    assert ctx["over_models"] is None
    assert "over-models" not in [e["id"] for e in ctx["toc"]]
    assert "Verdicts over models" not in render.render_html(ctx)
    # declared outputs of the aggregate rule: always written, a header alone below 5 models
    tables = tmp_path / "tables"
    assert (tables / "win_rates.csv").read_text() == ",".join(WIN_RATE_COLUMNS) + "\n"
    assert (tables / "improvement.csv").read_text() == ",".join(IMPROVEMENT_COLUMNS) + "\n"


def test_six_models_section_figures_and_the_aggregate_csvs_are_the_reports(tmp_path):
    ctx = _context(tmp_path, 6)
    view = ctx["over_models"]
    assert view["n_models"] == 6
    assert "over-models" in [e["id"] for e in ctx["toc"]]
    assert len(view["figures"]) == 3  # a win-rate matrix per metric, the improvements
    assert all(f["figure"].startswith("data:image/svg+xml;base64,") for f in view["figures"])
    tables = tmp_path / "tables"
    win = (tables / "win_rates.csv").read_text()
    assert win.splitlines()[0] == ",".join(WIN_RATE_COLUMNS)
    assert base64.b64decode(view["win_table"]["csv"].split("base64,", 1)[1]).decode() == win
    assert len(view["win_table"]["rows"]) == len(win.splitlines()) - 1
    imp = (tables / "improvement.csv").read_text()
    assert imp.splitlines()[0] == ",".join(IMPROVEMENT_COLUMNS)
    got = base64.b64decode(view["table"]["csv"].split("base64,", 1)[1]).decode()
    assert got == imp
    html = render.render_html(ctx)
    assert "Verdicts over models" in html and "Efron &amp; Tibshirani 1993" in html


@pytest.mark.parametrize("n", [6, 80])
def test_win_rates_and_improvements_known_answers(n):
    rows = _rows(n)
    got = study_over_models(rows, _spec(n))
    assert got["n_models"] == n
    win = {(r["metric"], r["calibrator"], r["against"]): r for r in got["win_rates"]}
    assert len(win) == 2 * 3 * 2
    r = win[("nll", "good", "uncalibrated")]
    assert r["win_rate"] == 1.0 and r["n_models"] == n
    if n >= 20:  # win rates get their BCa interval from 20 models (WIN_RATE_INTERVAL_MODELS)
        assert r["ci_high"] == 1.0 and r["interval"] == "bca"
    else:
        assert np.isnan(r["ci_low"]) and np.isnan(r["ci_high"]) and r["interval"] == "none"
    assert win[("nll", "uncalibrated", "good")]["win_rate"] == 0.0
    # Brier: good ties ts on the even models (one half each) and wins on the odd ones
    expected = (n // 2 * 1.0 + (n - n // 2) * 0.5) / n
    assert win[("brier", "good", "ts")]["win_rate"] == pytest.approx(expected)
    assert win[("brier", "ts", "good")]["win_rate"] == pytest.approx(1 - expected)
    imp = {(r["metric"], r["calibrator"]): r for r in got["improvement"]}
    assert set(imp) == {(m, c) for m in ("nll", "brier") for c in ("ts", "good")}
    assert imp[("nll", "ts")]["improvement"] == pytest.approx(0.21, abs=0.01)
    nll = {(r["model"], r["method"]): r["value"] for r in rows if r["metric"] == "nll"}
    want = np.mean([nll[(f"m{i}", "uncalibrated")] - nll[(f"m{i}", "good")] for i in range(n)])
    r = imp[("nll", "good")]
    assert r["improvement"] == pytest.approx(want) and r["ci_low"] < want < r["ci_high"]
    assert r["ci_low"] > 0.3  # every model improves by at least 0.3
