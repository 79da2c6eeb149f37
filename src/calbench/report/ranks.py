"""Average ranks of calibrators over models (Demšar 2006): per verdict-eligible metric
(``Metric.verdicts``), each calibrator's winner count and average rank, the Friedman test in
Iman and Davenport's F form and the Nemenyi critical difference with its diagram (its bars only
when that omnibus test rejects), as Kull et al. 2019 compare calibrators over datasets and
models. A plug-in calibration error gives no ranks: its upward bias shrinks as
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
        if r["metric"] != metric or r.get("half", "test") != "test":
            continue
        i, j = pos_m.get(r["model"]), pos_c.get(r["method"])
        if i is not None and j is not None:
            out[i, j] = float(r["value"])
    return out


def rank_summaries(
    rows: Sequence[Mapping],
    metrics: Sequence[str],
    models: Sequence[str],
    methods: Sequence[str],
    method_labels: Mapping[str, str],
) -> list[dict]:
    """Winner counts, average ranks, Friedman test and critical difference per metric of
    ``metrics`` whose ``verdicts`` fact is true (the others are skipped).

    Models lacking a value of some method are left out of that metric's ranks (``n`` says how
    many remain). The Friedman test and the diagram need at least 2 models and 2 methods; with
    fewer, ``friedman`` is ``None``.
    """
    out = []
    for metric in metrics:
        if metric not in METRICS or not METRICS[metric].verdicts:
            continue  # no rank from a plug-in estimate whose bias depends on sharpness
        x = matrix(rows, metric, models, methods)
        complete = np.all(np.isfinite(x), axis=1)
        if not complete.any() or len(methods) < 2:
            continue
        xc = x[complete]
        higher = metric in HIGHER_IS_BETTER
        ranks = S.rank_rows(xc, higher).mean(axis=0)
        wins = best_mask(xc, metric).sum(axis=0)
        entry = {
            "metric": metric,
            "label": metric_name(metric),
            "n": int(xc.shape[0]),
            "methods": sorted(
                (
                    {
                        "key": c,
                        "label": method_labels.get(c, c),
                        "rank": float(ranks[j]),
                        "wins": int(wins[j]),
                    }
                    for j, c in enumerate(methods)
                ),
                key=lambda d: d["rank"],
            ),
            "friedman": None,
            "cd": None,
            "figure": "",
        }
        if xc.shape[0] >= 2:
            fr = S.friedman_test(xc, higher)
            cd = S.nemenyi_cd(len(methods), xc.shape[0], ALPHA)
            entry["friedman"] = fr
            entry["cd"] = cd
            fig = plots.critical_difference_diagram(
                {method_labels.get(c, c): float(ranks[j]) for j, c in enumerate(methods)},
                cd,
                display_spec(metric)[2],
                n_models=xc.shape[0],
                bars=fr.p_f < ALPHA,  # Nemenyi groups only after the omnibus test rejects
            )
            entry["figure"] = "data:image/svg+xml;base64," + base64.b64encode(
                plots.figure_svg(fig)
            ).decode("ascii")
            best = entry["methods"][0]
            entry["worse_than_best"] = [
                d["label"] for d in entry["methods"][1:] if d["rank"] - best["rank"] > cd
            ]
        out.append(entry)
    return out
