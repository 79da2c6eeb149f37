"""The findings that open the report, computed from the results (never written by hand).

* :func:`rank_summaries`: per metric, each calibrator's winner count (models on which its printed
  test-half value is the best, ties shared) and average rank over models, the Friedman test and
  the Nemenyi critical difference with its diagram (Demšar 2006, §3.2.2; as Kull et al. 2019
  compare calibrators over datasets and models).
* :func:`findings`: two or three headline findings, each with the counts behind it, and the
  anomalies a reader should check: a calibrator that moves accuracy by more than
  :data:`ACCURACY_POINTS` points, a model already calibrated before calibration, calibrators a
  metric cannot tell apart, plug-in estimates that lie outside their interval.

Everything works on the long metric rows (``dataset, model, method, half, metric, value,
ci_low, ci_high``) and the study spec's display names.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence

import numpy as np

from calbench import plots
from calbench import stats as S
from calbench.report.display import HIGHER_IS_BETTER, best_mask, display_spec, format_value
from calbench.stats import interval_method

#: A calibrator that changes test accuracy by more than this many percentage points is flagged.
ACCURACY_POINTS = 2.0
#: An uncalibrated model whose test ECE is at most this (a fraction) counts as already calibrated.
CALIBRATED_ECE = 0.01
#: Significance level of the Friedman test and the Nemenyi critical difference.
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
    """Winner counts, average ranks, Friedman test and critical difference per metric.

    Models lacking a value of some method are left out of that metric's ranks (``n`` says how
    many remain). The Friedman test and the diagram need at least 2 models and 2 methods; with
    fewer, ``friedman`` is ``None``.
    """
    out = []
    for metric in metrics:
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


def format_p(p: float) -> str:
    """``p < 0.001`` below one in a thousand, else three decimals (NaN: en dash)."""
    if p is None or not math.isfinite(p):
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _rank_headline(ranks: Sequence[Mapping]) -> list[str]:
    """The overall winner of the first calibration error among the ranked metrics."""
    for entry in ranks:
        if entry["metric"] in HIGHER_IS_BETTER or entry["metric"] in ("nll", "brier"):
            continue
        best = entry["methods"][0]
        text = (
            f"{best['label']} has the best average rank on {entry['label']} "
            f"({best['rank']:.2f} over {entry['n']} models; best on {best['wins']}/{entry['n']})"
        )
        fr = entry["friedman"]
        if fr is not None:
            text += f"; Friedman test p {_p_phrase(fr.p_f)}"
            worse = entry.get("worse_than_best") or []
            if worse and fr.p_f < ALPHA:
                text += (
                    f"; significantly better than {', '.join(worse)} "
                    f"(Nemenyi critical difference {entry['cd']:.2f})"
                )
            elif fr.p_f >= ALPHA:
                text += "; the calibrators cannot be told apart on this metric"
        return [text + "."]
    return []


def _accuracy_findings(rows, models, methods, ml, cl) -> tuple[list[str], list[str]]:
    """Which calibrators never change accuracy, which do, and by how much (anomalies)."""
    headlines: list[str] = []
    anomalies: list[str] = []
    acc = matrix(rows, "accuracy", models, methods)
    if "uncalibrated" not in methods or not np.isfinite(acc).any():
        return headlines, anomalies
    j0 = list(methods).index("uncalibrated")
    have = np.isfinite(acc[:, j0])
    same, moved = [], []
    for j, c in enumerate(methods):
        if c == "uncalibrated":
            continue
        ok = have & np.isfinite(acc[:, j])
        if not ok.any():
            continue
        eq = int(np.sum(acc[ok, j] == acc[ok, j0]))
        (same if eq == ok.sum() else moved).append((c, eq, int(ok.sum())))
        for i in np.flatnonzero(ok):
            delta = 100 * (acc[i, j] - acc[i, j0])
            if abs(delta) > ACCURACY_POINTS:
                anomalies.append(
                    f"{cl(c)} moves the accuracy of {ml(models[i])} from "
                    f"{_pct(acc[i, j0])} to {_pct(acc[i, j])} ({delta:+.1f} points): a "
                    "post-hoc calibrator should rarely change predictions this much; check "
                    "its fit on the validation half."
                )
    if same:
        n = same[0][2]
        names = ", ".join(cl(c) for c, _, _ in same)
        headlines.append(
            f"{names} never change{'s' if len(same) == 1 else ''} accuracy: "
            f"{n}/{n} models identical to uncalibrated."
        )
    if moved:
        parts = [f"{cl(c)} on {k - eq}/{k}" for c, eq, k in moved]
        headlines.append("Accuracy changes with " + ", ".join(parts) + " models.")
    return headlines, anomalies


def _ece_findings(rows, models, methods, ml, cl) -> tuple[list[str], list[str]]:
    """Temperature scaling against no calibration on ECE; models calibrated already."""
    headlines: list[str] = []
    anomalies: list[str] = []
    ece = matrix(rows, "ece", models, methods)
    if "uncalibrated" not in methods or "ts" not in methods or not np.isfinite(ece).any():
        return headlines, anomalies
    j0, jt = list(methods).index("uncalibrated"), list(methods).index("ts")
    ok = np.isfinite(ece[:, j0]) & np.isfinite(ece[:, jt])
    if ok.any():
        lower = int(np.sum(ece[ok, jt] < ece[ok, j0]))
        headlines.append(
            f"{cl('ts')} lowers ECE on {lower}/{int(ok.sum())} models (median "
            f"{format_value('ece', float(np.median(ece[ok, j0])))}% → "
            f"{format_value('ece', float(np.median(ece[ok, jt])))}%)."
        )
    for i in np.flatnonzero(np.isfinite(ece[:, j0]) & (ece[:, j0] <= CALIBRATED_ECE)):
        anomalies.append(
            f"{ml(models[i])} is already calibrated before calibration (ECE "
            f"{format_value('ece', float(ece[i, j0]))}%): calibrators can only add noise."
        )
    return headlines, anomalies


def _precision_anomalies(rows, ranks, models, methods) -> list[str]:
    """Metrics on which the calibrators cannot be ranked, winners not established, estimates
    outside their interval."""
    anomalies = []
    flat = [
        f"{e['label']} (p = {format_p(e['friedman'].p_f)})"
        for e in ranks
        if e["friedman"] is not None and e["friedman"].p_f >= ALPHA
    ]
    if flat:
        n = max(e["n"] for e in ranks)
        anomalies.append(
            f"Too close to rank over {n} models: the calibrators' average ranks do not differ "
            f"significantly on {', '.join(flat)} (Friedman test)."
        )
    wide = _overlapping_best(rows, "ece", models, methods)
    if wide:
        anomalies.append(
            f"ECE: on {wide[0]}/{wide[1]} models the best calibrator's interval overlaps the "
            "runner-up's, so the per-model winner is not established."
        )
    outside = [
        r
        for r in rows
        if r.get("half", "test") == "test"
        and math.isfinite(float(r.get("ci_low", math.nan)))
        and not float(r["ci_low"]) <= float(r["value"]) <= float(r["ci_high"])
    ]
    if outside:
        anomalies.append(
            f"In {len(outside)} cells (marked †) the printed estimate lies outside its "
            "interval: the error is too small to measure with this many test samples, so the "
            "estimate is inflated by its known upward bias; read these values as 'small', "
            "not exact."
        )
    return anomalies


def findings(
    rows: Sequence[Mapping],
    ranks: Sequence[Mapping],
    models: Sequence[str],
    methods: Sequence[str],
    model_labels: Mapping[str, str],
    method_labels: Mapping[str, str],
) -> dict:
    """``{"headlines": [...], "anomalies": [...]}``: sentences with the evidence in them."""
    ml = lambda m: model_labels.get(m, m)  # noqa: E731
    cl = lambda c: method_labels.get(c, c)  # noqa: E731
    headlines = _rank_headline(ranks)
    acc_h, acc_a = _accuracy_findings(rows, models, methods, ml, cl)
    ece_h, ece_a = _ece_findings(rows, models, methods, ml, cl)
    anomalies = acc_a + ece_a + _precision_anomalies(rows, ranks, models, methods)
    return {"headlines": headlines + acc_h + ece_h, "anomalies": anomalies}


def _p_phrase(p: float) -> str:
    text = format_p(p)
    return text if text.startswith("<") else f"= {text}"


def _overlapping_best(rows, metric, models, methods) -> tuple[int, int] | None:
    """How many models' best and second-best intervals of ``metric`` overlap, of how many;
    ``None`` for a metric whose intervals are not two-sided (a one-sided ``[0, U]`` bound
    always overlaps another, which says nothing)."""
    if interval_method(metric) not in ("percentile", "basic"):
        return None
    vals = {}
    for r in rows:
        if r["metric"] == metric and r.get("half", "test") == "test" and r["method"] in methods:
            lo, hi = float(r.get("ci_low", math.nan)), float(r.get("ci_high", math.nan))
            if math.isfinite(lo) and math.isfinite(hi):
                vals.setdefault(r["model"], []).append((float(r["value"]), lo, hi))
    n = overlap = 0
    for m in models:
        v = sorted(vals.get(m, []), reverse=metric in HIGHER_IS_BETTER)
        if len(v) < 2:
            continue
        n += 1
        (_, lo1, hi1), (_, lo2, hi2) = v[0], v[1]
        overlap += lo1 <= hi2 and lo2 <= hi1
    return (overlap, n) if overlap else None
