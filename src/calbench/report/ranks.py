"""Average ranks of calibrators over models (Demšar 2006), rendered: per verdict-eligible metric
(``Metric.verdicts``), each calibrator's winner count and average rank, the Friedman test in
Iman and Davenport's F form and the Nemenyi critical difference with its diagram (its bars only
when that omnibus test rejects), as Kull et al. 2019 compare calibrators over datasets and
models. The statistics are :func:`calbench.stats.rank_comparison`'s; this module picks the
metrics, arranges the values and draws. A plug-in calibration error gives no ranks: its upward bias shrinks as
predictions get coarser, so its ranks reward a coarse calibrator.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence

import numpy as np

from calbench import plots
from calbench import stats as S
from calbench.display import HIGHER_IS_BETTER, best_mask, display_spec
from calbench.metrics import METRICS
from calbench.results import HEADLINE_HALVES

#: Significance level of the Iman-Davenport (Friedman) test and the Nemenyi critical difference.
ALPHA = 0.05


def metric_name(metric: str) -> str:
    """The display name of a metric without its unit ("ECE", "Accuracy")."""
    return display_spec(metric)[2].split(",")[0].split(" (")[0]


def matrix(
    rows: Sequence[Mapping], metric: str, models: Sequence[str], methods: Sequence[str]
) -> np.ndarray:
    """Test-half values ``models x methods`` of one metric (NaN where missing)."""
    pos_m = {m: i for i, m in enumerate(models)}
    pos_c = {c: j for j, c in enumerate(methods)}
    out = np.full((len(models), len(methods)), np.nan)
    for r in rows:
        if r["metric"] != metric or r.get("half", "test") not in HEADLINE_HALVES:
            continue
        i, j = pos_m.get(r["model"]), pos_c.get(r["method"])
        if i is not None and j is not None:
            out[i, j] = float(r["value"])
    return out


def _signed(x, s, metric: str, models, methods) -> np.ndarray:
    """The signed values ``s`` where ``x`` has a value, each checked to clip to it."""
    bad = np.isfinite(x) & ~(np.isfinite(s) & np.isclose(np.maximum(s, 0.0), x, rtol=0, atol=1e-9))
    if bad.any():
        i, j = (int(v[0]) for v in np.nonzero(bad))
        raise ValueError(
            f"{metric} of {models[i]}/{methods[j]}: the robustness rows' signed value "
            f"{float(s[i, j])!r} does not clip to the reported {float(x[i, j])!r}; rerun the "
            "calibrate step"
        )
    return np.where(np.isfinite(x), s, np.nan)


def rank_summaries(
    rows: Sequence[Mapping],
    metrics: Sequence[str],
    models: Sequence[str],
    methods: Sequence[str],
    method_labels: Mapping[str, str],
    signed_rows: Sequence[Mapping] = (),
) -> list[dict]:
    """Winner counts, average ranks, Friedman test and critical difference per metric of
    ``metrics`` whose ``verdicts`` fact is true (the others are skipped).

    Models lacking a value of some method are left out of that metric's ranks (``n`` says how
    many remain). The Friedman test and the diagram need at least 2 models and 2 methods; with
    fewer, ``friedman`` is ``None``. A metric with ``signed_rows``
    (:func:`calbench.stats.robustness.signed_estimates`: the unbiased errors' signed roots) is
    ranked on those, the estimate the robustness section ranks on, instead of the reported
    ``sqrt(max(T, 0))`` that ties every ``T <= 0`` at 0; each must clip to the reported value.
    """
    out = []
    signed = {r["metric"] for r in signed_rows}
    for metric in metrics:
        if metric not in METRICS or not METRICS[metric].verdicts:
            continue  # no rank from a plug-in estimate whose bias depends on sharpness
        x = matrix(rows, metric, models, methods)
        if metric in signed:
            x = _signed(x, matrix(signed_rows, metric, models, methods), metric, models, methods)
        complete = np.all(np.isfinite(x), axis=1)
        if not complete.any() or len(methods) < 2:
            continue
        xc = x[complete]
        higher = metric in HIGHER_IS_BETTER
        comp = S.rank_comparison(xc, higher, ALPHA)
        ranks = comp.average_ranks
        wins = best_mask(xc, metric).sum(axis=0)
        entry = {
            "metric": metric,
            "label": metric_name(metric),
            "n": comp.n,
            "methods": sorted(
                (
                    {
                        "key": c,
                        "label": method_labels.get(c, c),
                        "rank": ranks[j],
                        "wins": int(wins[j]),
                    }
                    for j, c in enumerate(methods)
                ),
                key=lambda d: d["rank"],
            ),
            "friedman": comp.friedman,
            "cd": comp.cd,
            "figure": "",
        }
        if comp.friedman is not None:
            fig = plots.critical_difference_diagram(
                {method_labels.get(c, c): ranks[j] for j, c in enumerate(methods)},
                comp.cd,
                display_spec(metric)[2],
                n_models=comp.n,
                bars=comp.rejects,  # Nemenyi groups only after the omnibus test rejects
            )
            entry["figure"] = "data:image/svg+xml;base64," + base64.b64encode(
                plots.figure_svg(fig)
            ).decode("ascii")
            worse = set(comp.worse_than_best)
            entry["worse_than_best"] = [
                d["label"] for d in entry["methods"][1:] if methods.index(d["key"]) in worse
            ]
        out.append(entry)
    return out
