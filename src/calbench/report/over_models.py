"""Verdicts over a study's models (studies of :data:`MIN_MODELS` models or more): how often each
calibrator beats each other one, and how much each improves NLL and Brier score over
uncalibrated, each with a bootstrap interval over models (:mod:`calbench.stats.over_models`).

:func:`over_models_rows` computes both from the aggregated metric rows (test half), in one
place: the aggregate step writes them as ``results/tables/win_rates.csv`` and
``improvement.csv`` (columns :data:`calbench.results.WIN_RATE_COLUMNS`,
:data:`calbench.results.IMPROVEMENT_COLUMNS`; a header alone below :data:`MIN_MODELS` models), and
the report's section (:func:`over_models_view`) reads those files back
(:func:`read_over_models`): the report never computes a result.

Both use the proper scores NLL and Brier score (:data:`METRICS_OVER_MODELS`): their reported
value is the estimate every other section uses (no clipped or signed variant), and a lower
value is better on every model. The unit of resampling is the model (Efron & Tibshirani 1993):
the intervals say how the mean over the population of models the study stands for is known,
not how well each model's values are measured. Below 5 models no interval over models is
reliable (coverage 78-88%, docs/statistics.md, "Verdicts over models"), so the section is
absent and small studies' reports are unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from calbench.display import spec_labels
from calbench.report.overview import svg_data_uri
from calbench.report.ranks import matrix, metric_name
from calbench.report.views import table_view
from calbench.results import (
    HEADLINE_HALVES,
    IMPROVEMENT_COLUMNS,
    WIN_RATE_COLUMNS,
    long_csv_text,
    read_long_csv,
)
from calbench.stats.over_models import WIN_RATE_INTERVAL_MODELS, improvement, win_rates

#: the fewest models a study needs for its verdicts over models
MIN_MODELS = 5
#: the metrics of the win rates and improvements (proper scores: lower is better)
METRICS_OVER_MODELS = ("nll", "brier")
#: the calibrator the improvements are measured from
BASELINE = "uncalibrated"
#: bootstrap resamples of the models (seeded: the same rows give the same bytes)
N_BOOT = 2000


def scored_models(rows: Sequence[Mapping], models: Sequence[str]) -> list[str]:
    """The models of ``models`` with a test-half value of a metric of
    :data:`METRICS_OVER_MODELS`."""
    have = {
        r["model"]
        for r in rows
        if r["metric"] in METRICS_OVER_MODELS and r.get("half", "test") in HEADLINE_HALVES
    }
    return [m for m in models if m in have]


def study_over_models(rows: Sequence[Mapping], spec: Mapping) -> dict | None:
    """:func:`over_models_rows` of a study: its models and calibrators in the spec's order (those
    present in ``rows``; sorted when the spec names none), at the protocol's confidence level.
    The one call the aggregate step's CSVs and the report's section both come from."""
    present_models = {r["model"] for r in rows}
    present_methods = {r["method"] for r in rows}
    models = [m for m in spec.get("models", {}) if m in present_models] or sorted(present_models)
    methods = [c for c in spec.get("calibrators", {}) if c in present_methods] or sorted(
        present_methods
    )
    level = float((spec.get("protocol") or {}).get("level", 0.95))
    return over_models_rows(rows, models, methods, level=level)


def over_models_rows(
    rows: Sequence[Mapping],
    models: Sequence[str],
    methods: Sequence[str],
    *,
    level: float = 0.95,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> dict | None:
    """``{"win_rates": [...], "improvement": [...]}`` (rows of the columns named in the module
    docstring) for the models and calibrators given, or ``None`` for fewer than
    :data:`MIN_MODELS` scored models. Win rates: every ordered pair of calibrators, on each
    metric of :data:`METRICS_OVER_MODELS` with values (BCa interval, Efron 1987);
    improvements: every calibrator against :data:`BASELINE` when it is among ``methods``
    (bootstrap-t interval, Efron & Tibshirani 1993, ch. 12.5)."""
    models = scored_models(rows, models)
    if len(models) < MIN_MODELS:
        return None
    methods = list(methods)
    wins, gains = [], []
    for metric in METRICS_OVER_MODELS:
        scores = matrix(rows, metric, models, methods)
        if not np.isfinite(scores).any():
            continue
        w = win_rates(scores, methods, level=level, n_boot=n_boot, seed=seed)
        for a in methods:
            for b in methods:
                if a == b:
                    continue
                rate, lo, hi = w.of(a, b)
                i, j = methods.index(a), methods.index(b)
                wins.append(
                    {
                        "metric": metric,
                        "calibrator": a,
                        "against": b,
                        "win_rate": rate,
                        "ci_low": lo,
                        "ci_high": hi,
                        "n_models": int(w.n_models[i, j]),
                        "level": level,
                        "interval": w.interval.method if np.isfinite(lo) else "none",
                    }  # fmt: skip
                )
        if BASELINE not in methods:
            continue
        g = improvement(scores, methods, BASELINE, level=level, n_boot=n_boot, seed=seed)
        for c in methods:
            if c == BASELINE:
                continue
            mean, lo, hi = g.of(c)
            gains.append(
                {
                    "metric": metric,
                    "calibrator": c,
                    "baseline": BASELINE,
                    "improvement": mean,
                    "ci_low": lo,
                    "ci_high": hi,
                    "n_models": int(g.n_models[methods.index(c)]),
                    "level": level,
                    "interval": g.interval.method,
                }  # fmt: skip
            )
    return {"win_rates": wins, "improvement": gains, "n_models": len(models)}


def read_over_models(win_rates_csv, improvement_csv) -> dict | None:
    """The rows the aggregate step wrote (:func:`over_models_rows`), read back as strictly as
    every result file (:func:`calbench.results.read_long_csv`), or ``None`` when both files hold
    a header alone (a study of fewer than :data:`MIN_MODELS` models: no section). ``n_models``
    is the largest count of models behind a row (every scored model)."""
    wins = read_long_csv(
        [win_rates_csv],
        WIN_RATE_COLUMNS,
        numeric=("win_rate", "ci_low", "ci_high", "n_models", "level"),
        blank_ok=("ci_low", "ci_high"),
    )
    gains = read_long_csv(
        [improvement_csv],
        IMPROVEMENT_COLUMNS,
        numeric=("improvement", "ci_low", "ci_high", "n_models", "level"),
        blank_ok=("ci_low", "ci_high"),
    )
    if not wins and not gains:
        return None
    for r in (*wins, *gains):
        r["n_models"] = int(r["n_models"])
    return {
        "win_rates": wins,
        "improvement": gains,
        "n_models": max(r["n_models"] for r in (*wins, *gains)),
    }


def _cell(text: str, sort: float | None = None) -> dict:
    key = None if sort is None else (repr(float(sort)) if np.isfinite(sort) else "")
    return {"text": text, "sort": key, "ci": "", "bold": False, "tie": False, "mark": "",
            "bad": False}  # fmt: skip


def _interval_cell(row: Mapping, fmt: str) -> dict:
    """The cell of a row's interval ``[ci_low, ci_high]`` in ``fmt`` ("–" when either bound is
    not finite), sorted by its lower bound."""
    lo, hi = row["ci_low"], row["ci_high"]
    text = f"[{lo:{fmt}}, {hi:{fmt}}]" if np.isfinite(lo) and np.isfinite(hi) else "–"
    return _cell(text, lo)


def over_models_view(result: Mapping | None, spec: Mapping) -> dict | None:
    """The report's section of :func:`over_models_rows`'s ``result`` (``None``: no section):
    one win-rate matrix per metric and one heatmap of the improvements with their intervals
    (:mod:`calbench.plots.compare`), the improvements and the win rates as sortable tables whose
    CSV downloads are the bytes the aggregate step writes."""
    from calbench.plots.compare import interval_heatmap, win_rate_heatmap  # lazy: code inputs

    if not result:
        return None
    _, cl, _, _ = spec_labels(spec)
    name = lambda c: cl.get(c, c)  # noqa: E731
    wins, gains = result["win_rates"], result["improvement"]
    level = float(wins[0]["level"]) if wins else 0.95
    pct = f"{level * 100:g}%"
    figures = []
    for metric in dict.fromkeys(r["metric"] for r in wins):
        rs = [r for r in wins if r["metric"] == metric]
        names = list(dict.fromkeys([r["calibrator"] for r in rs] + [r["against"] for r in rs]))
        n = len(names)
        rate, lo, hi = (np.full((n, n), np.nan) for _ in range(3))
        for r in rs:
            i, j = names.index(r["calibrator"]), names.index(r["against"])
            rate[i, j], lo[i, j], hi[i, j] = r["win_rate"], r["ci_low"], r["ci_high"]
        title = f"{metric_name(metric)}: share of models on which the row beats the column"
        note = (
            f"ties count one half; * the {pct} interval over models (BCa) excludes 1/2"
            if np.isfinite(lo).any()
            else f"ties count one half; intervals from {WIN_RATE_INTERVAL_MODELS} models"
        )
        fig = win_rate_heatmap(rate, lo, hi, [name(c) for c in names], title=title, note=note)
        figures.append({"figure": svg_data_uri(fig), "alt": f"Win-rate matrix, {title}"})
    if gains:
        metrics = list(dict.fromkeys(r["metric"] for r in gains))
        names = list(dict.fromkeys(r["calibrator"] for r in gains))
        m, lo, hi = (np.full((len(names), len(metrics)), np.nan) for _ in range(3))
        for r in gains:
            i, j = names.index(r["calibrator"]), metrics.index(r["metric"])
            m[i, j], lo[i, j], hi[i, j] = r["improvement"], r["ci_low"], r["ci_high"]
        base = name(gains[0]["baseline"])
        title = f"Mean improvement over {base} ({base} − calibrator; positive: better)"
        fig = interval_heatmap(
            m, lo, hi, [name(c) for c in names], [metric_name(x) for x in metrics],
            title=title, note=f"[{pct} bootstrap-t interval over models]; * it excludes 0",
        )  # fmt: skip
        figures.append({"figure": svg_data_uri(fig), "alt": title})
    rows = [
        [
            _cell(metric_name(r["metric"])),
            _cell(name(r["calibrator"])),
            _cell(f"{r['improvement']:+.4f}", r["improvement"]),
            _interval_cell(r, "+.4f"),
            _cell(str(r["n_models"]), r["n_models"]),
        ]
        for r in gains
    ]
    table = table_view(
        "improvement",
        f"Mean improvement over {name(BASELINE)}",
        ["Metric", "Calibrator", "Improvement", f"{pct} interval", "Models"],
        rows,
        n_labels=2,
        csv_text=long_csv_text(gains, IMPROVEMENT_COLUMNS),
    ) if gains else None  # fmt: skip
    win_table = table_view(
        "win-rates",
        "Win rates over models",
        ["Metric", "Calibrator", "Against", "Win rate", f"{pct} interval", "Models"],
        [
            [
                _cell(metric_name(r["metric"])),
                _cell(name(r["calibrator"])),
                _cell(name(r["against"])),
                _cell(f"{r['win_rate']:.3f}", r["win_rate"]),
                _interval_cell(r, ".3f"),
                _cell(str(r["n_models"]), r["n_models"]),
            ]
            for r in wins
        ],
        n_labels=3,
        csv_text=long_csv_text(wins, WIN_RATE_COLUMNS),
    ) if wins else None  # fmt: skip
    return {
        "n_models": result["n_models"],
        "win_table": win_table,
        "metrics": [metric_name(x) for x in METRICS_OVER_MODELS],
        "figures": figures,
        "table": table,
        "level": pct,
        "win_interval_models": WIN_RATE_INTERVAL_MODELS,
    }
