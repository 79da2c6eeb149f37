"""A study of many models renders: every statistic over models (ranks, Friedman and the
critical difference, the robustness section's signed-rank test) works for 80 models, beyond the
20 of the old exact enumeration."""

from __future__ import annotations

import numpy as np

from calbench.report import render
from calbench.report.context import build_context
from calbench.stats.robustness import DEFAULT_VARIANT, VARIANTS

N_MODELS = 80
METHODS = ("uncalibrated", "ts", "iso")


def _study(n_models: int):
    """Metric rows, robustness rows and a spec of ``n_models`` synthetic models: ts the best
    on most models, iso second, the uncalibrated model last."""
    rng = np.random.default_rng(0)
    rows, robust = [], []
    base = {"uncalibrated": 0.06, "ts": 0.012, "iso": 0.018}
    for i in range(n_models):
        model = f"m{i:03d}"
        ece = {m: b + rng.normal(0, 0.004) for m, b in base.items()}
        for method in METHODS:
            reported = max(ece[method], 0.0)  # sqrt(max(T, 0)); robustness: the signed root
            for metric, v in (("ece_ub", reported), ("accuracy", 0.9 + i / 1e4)):
                rows.append(
                    {"dataset": "ds", "model": model, "method": method, "half": "test",
                     "metric": metric, "value": v, "ci_low": v - 0.002, "ci_high": v + 0.002}
                )  # fmt: skip
        order = np.argsort([ece[m] for m in METHODS])
        rank = {METHODS[j]: float(k + 1) for k, j in enumerate(order)}
        for variant in VARIANTS:
            for method in METHODS:
                default = variant == DEFAULT_VARIANT
                robust.append(
                    {"dataset": "ds", "model": model, "method": method, "variant": variant,
                     "value": ece[method], "rank": rank[method],
                     "p_first": (1.0 if rank[method] == 1 else 0.0) if default else float("nan"),
                     "p_runner_up": 0.01 if default and rank[method] == 1 else float("nan")}
                )  # fmt: skip
    spec = {
        "title": "Many models",
        "description": "",
        "protocol": {"n_bins": 15, "plot_bins": 10, "n_bootstrap": 20, "level": 0.95},
        "datasets": {"ds": {"display": "DS"}},
        "models": {
            f"m{i:03d}": {"dataset": "ds", "display": {"name": f"net {i}", "loss": "CE"}}
            for i in range(n_models)
        },
        "calibrators": {m: {"display": m.upper()} for m in METHODS},
        "table_metrics": ["accuracy", "ece_ub"],
        "losses_metrics": [],
        "reference": None,
    }
    return rows, robust, spec


def test_a_study_of_80_models_renders_with_its_tests_over_models():
    rows, robust, spec = _study(N_MODELS)
    prov = {"config": "", "packages": {}, "logits": [], "splits": [], "datasets": []}
    ctx = build_context(
        rows=rows, compare=[], spec=spec, grids={}, provenance=prov, robustness=robust
    )
    ece = next(r for r in ctx["ranks"] if r["metric"] == "ece_ub")
    assert ece["n"] == N_MODELS and ece["friedman"].p_f < 1e-10
    assert [m["key"] for m in ece["methods"]] == ["ts", "iso", "uncalibrated"]
    view = ctx["robustness"]
    assert f"exact signed-rank test over {N_MODELS} models" in view["sentence"]
    assert view["robust"]
    html = render.render_html(ctx)
    assert f"exact signed-rank test over {N_MODELS} models" in html
    assert "net 79" in html


def test_the_calibrated_within_finding_names_a_bounded_number_of_pairs():
    """At 80 models the finding counts the pairs beyond the first few instead of listing them
    all in one sentence (the section's table lists every one)."""
    from calbench.report.verdicts import LISTED_PAIRS

    rows, robust, spec = _study(N_MODELS)
    prov = {"config": "", "packages": {}, "logits": [], "splits": [], "datasets": []}
    ctx = build_context(
        rows=rows, compare=[], spec=spec, grids={}, provenance=prov, robustness=robust
    )
    text = next(i["text"] for i in ctx["findings"]["items"] if i["family"] == "calibrated")
    n_within = int(text.split("points (upper bound of the unbiased ECE below it): ")[1].split()[0])
    assert n_within > LISTED_PAIRS
    assert text.count(" on net ") == LISTED_PAIRS
    assert f"and {n_within - LISTED_PAIRS} more, listed in the section's table" in text
