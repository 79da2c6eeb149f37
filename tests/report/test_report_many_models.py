"""A study of many models renders: every statistic over models (ranks, Friedman and the
critical difference, the robustness section's signed-rank test) works for 80 models, beyond the
20 of the old exact enumeration."""

from __future__ import annotations

import re
from pathlib import Path

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


def _png(path, shade: int):
    """A tiny valid PNG (PIL), one per model so that each embedded image can be told apart."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 3), (shade, 0, 0)).save(path)
    return str(path)


def test_a_study_of_many_models_embeds_the_first_diagrams_and_links_the_rest(tmp_path):
    """Past EMBEDDED_MODELS models the page links each model's grid, relative to the report's
    folder, instead of embedding it (100 grids made an 82 MB page)."""
    from calbench.report.figures import EMBEDDED_MODELS

    rows, robust, spec = _study(N_MODELS)
    grids = {
        f"ds/m{i:03d}": _png(tmp_path / "results/plots/ds" / f"m{i:03d}/grid.png", i)
        for i in range(N_MODELS)
    }
    prov = {"config": "", "packages": {}, "logits": [], "splits": [], "datasets": []}
    ctx = build_context(
        rows=rows, compare=[], spec=spec, grids=grids, provenance=prov, robustness=robust,
        report_dir=str(tmp_path / "reports"),
    )  # fmt: skip
    html = render.render_html(ctx)
    assert html.count('src="data:image/png;base64,') == EMBEDDED_MODELS < N_MODELS
    linked = re.findall(r'<a href="([^"]+)">all calibrators</a>', html)
    assert linked == [
        f"../results/plots/ds/m{i:03d}/grid.png" for i in range(EMBEDDED_MODELS, N_MODELS)
    ]
    assert (tmp_path / "reports" / linked[0]).resolve() == Path(grids["ds/m012"]).resolve()
    assert f"{N_MODELS - EMBEDDED_MODELS} more models: their diagrams are files" in html
    assert "Shown per model: one grid of\nevery calibrator's diagram" in html
    # the contents list the embedded models and one entry for the rest
    (toc,) = [s for s in ctx["toc"] if s["id"] == "diagrams"]
    assert [c["title"] for c in toc["children"]] == [
        f"net {i} (CE)" for i in range(EMBEDDED_MODELS)
    ] + [f"{N_MODELS - EMBEDDED_MODELS} more models"]
    # a study within the limit embeds every model's grid and links none
    few = {k: grids[k] for k in list(grids)[:3]}
    spec3 = {**spec, "models": dict(list(spec["models"].items())[:3])}
    ctx = build_context(
        rows=[r for r in rows if r["model"] in spec3["models"]], compare=[], spec=spec3,
        grids=few, provenance=prov, report_dir=str(tmp_path / "reports"),
    )  # fmt: skip
    html = render.render_html(ctx)
    assert html.count('src="data:image/png;base64,') == 3 and "more models: their" not in html


def _compare_rows(n_models: int) -> list[dict]:
    """ts and iso against uncalibrated on ece_ub and nll, every model, ts significantly
    better."""
    out = []
    for i in range(n_models):
        for metric in ("ece_ub", "nll"):
            for method in ("ts", "iso"):
                out.append(
                    {"dataset": "ds", "model": f"m{i:03d}", "half": "test", "metric": metric,
                     "method": method, "baseline": "uncalibrated", "value": 0.02,
                     "baseline_value": 0.06, "difference": -0.04, "ci_low": -0.05,
                     "ci_high": -0.03, "p_value": 0.001 if method == "ts" else 0.4,
                     "n_resamples": 20, "interval": "percentile", "selected_on": "",
                     "family": "vs:uncalibrated", "family_size": 2, "test": "paired_t",
                     "n_permutations": 0, "p_holm": 0.002 if method == "ts" else 0.4,
                     "min_p_holm": 0.0, "alpha": 0.05, "direction": "better", "p_floor": 0.0,
                     "null_hypothesis": "equal expected per-sample score"}
                )  # fmt: skip
    return out


def test_the_comparisons_of_many_models_leave_out_the_heatmaps_and_cap_the_page_table(
    monkeypatch,
):
    """Past HEATMAP_MODELS models no heatmap is drawn (one column per model) and the page says
    why; past COMPARE_TABLE_ROWS rows the page's table holds the first ones and says so, while
    its CSV keeps every row."""
    import base64

    from calbench.report import views

    rows, robust, spec = _study(N_MODELS)
    compare = _compare_rows(N_MODELS)
    monkeypatch.setattr(views, "COMPARE_TABLE_ROWS", 100)  # 320 rows: the cap is reached
    view = views.compare_view(compare, spec, 0.95)
    assert N_MODELS > views.HEATMAP_MODELS and view["figures"] == []
    assert view["n"] == len(compare) == 320 and len(view["rows"]) == view["n_rows_shown"] == 100
    csv_text = base64.b64decode(view["csv"].split(",", 1)[1]).decode()
    assert len(csv_text.strip().splitlines()) == 1 + len(compare)  # header + every row
    prov = {"config": "", "packages": {}, "logits": [], "splits": [], "datasets": []}
    ctx = build_context(
        rows=rows, compare=compare, spec=spec, grids={}, provenance=prov, robustness=robust
    )
    html = render.render_html(ctx)
    assert f"With\n{N_MODELS} models the heatmaps are left out" in html
    assert "The table's first 100 of 320 comparisons" in html
    # a study within both limits draws its heatmaps and its whole table
    few = [r for r in compare if r["model"] < "m003"]
    view = views.compare_view(few, {**spec, "models": dict(list(spec["models"].items())[:3])}, 0.95)
    assert view["figures"] and len(view["rows"]) == view["n"] == len(few)
