"""The findings that open the report, computed from the results (never written by hand).

* :func:`rank_summaries` (:mod:`calbench.report.ranks`, re-exported): per verdict-eligible
  metric (``Metric.verdicts``: accuracy, NLL, Brier score, the unbiased calibration errors;
  never a plug-in ECE, whose bias rewards coarse predictions), each calibrator's winner count
  (models on which its printed test-half value is the best, ties shared) and average rank over
  models, the Iman-Davenport F form of the Friedman test and the Nemenyi critical difference
  with its diagram (Demšar 2006, §3.2.2; as Kull et al. 2019 compare calibrators over datasets
  and models).
* :func:`finding_items`: the findings as data (the one structure the report's layout reads):
  supported results with their size and direction first (a calibrator that significantly
  lowers or raises a metric against a baseline on most models and never the other way), then
  what to check (fragile or mixed results, a "best" pick beaten on the test half, anomalies).
  :func:`findings` splits them into the template's two lists.

Everything works on the long metric rows (``dataset, model, method, half, metric, value,
ci_low, ci_high``), the comparison rows (``calbench.stats.comparisons.compare_rows``) and the study
spec's display names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from calbench.display import HIGHER_IS_BETTER, display_spec, format_value
from calbench.metrics import METRICS
from calbench.report.ranks import (
    ALPHA,
    matrix,
    metric_name,
)
from calbench.results import HEADLINE_HALVES, OOF_HALF, headline_half
from calbench.stats import interval_method

#: A calibrator that changes test accuracy by more than this many percentage points is flagged.
ACCURACY_POINTS = 2.0
#: An uncalibrated model whose unbiased ECE has an upper confidence bound below this (a fraction)
#: is already calibrated within it.
CALIBRATED_ECE = 0.01
#: the calibration error of the findings: unbiased, so its ranks and tests do not reward coarse
#: predictions
CAL_METRIC = "ece_ub"


def format_p(p: float, floor: float = 0.0) -> str:
    """``p < 0.001`` below one in a thousand, else three decimals (NaN: en dash). A p-value at
    the resolution floor of a resampling test (``floor = m / (B + 1)``, ``p <= floor``) prints as
    ``≤ floor``: no resample was as extreme, so the p-value is at most that, not equal to it."""
    if p is None or not math.isfinite(p):
        return "–"
    if floor and math.isfinite(floor) and floor > 0 and p <= floor * (1 + 1e-9):
        return f"≤ {floor:.2g}" if floor < 0.001 else f"≤ {floor:.3g}"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _rank_headline(ranks: Sequence[Mapping]) -> list[str]:
    """The overall winner of the first unbiased calibration error among the ranked metrics."""
    for entry in ranks:
        if METRICS[entry["metric"]].paired_test != "jackknife_z":
            continue  # the first unbiased calibration error
        best = entry["methods"][0]
        text = (
            f"{best['label']} has the best average rank on {entry['label']} "
            f"({best['rank']:.2f} over {entry['n']} models; best on {best['wins']}/{entry['n']})"
        )
        fr = entry["friedman"]
        if fr is not None:
            text += f"; Iman-Davenport test of equal average ranks p {p_phrase(fr.p_f)}"
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


@dataclass(frozen=True)
class SchemeWords:
    """How the findings name the samples of the rows' evaluation scheme: ``fitted_on`` (where a
    calibrator is fitted), ``judged_on`` (where it is judged), ``samples`` (what one model's
    bound is computed on, in the plural) and whether the scheme is cross-fitted."""

    crossfit: bool
    fitted_on: str
    judged_on: str
    samples: str


def scheme_words(rows: Sequence[Mapping]) -> SchemeWords:
    """:class:`SchemeWords` of the rows' evaluation scheme: the cross-fitted scheme's rows
    (``half`` ``oof``) are predictions of every labelled sample by fits that never saw it; the
    holdout scheme fits on the validation half and reports the test half."""
    if headline_half(rows) == OOF_HALF:
        return SchemeWords(True, "the folds it was trained on", "the out-of-fold predictions",
                           "these samples")  # fmt: skip
    return SchemeWords(False, "the validation half", "the test half", "these test halves")


def _accuracy_findings(rows, models, methods, ml, cl) -> tuple[list[str], list[str]]:
    """Which calibrators never change accuracy, which do, and by how much (anomalies)."""
    headlines: list[str] = []
    anomalies: list[str] = []
    fitted_on = scheme_words(rows).fitted_on
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
        d = 100 * (acc[ok, j] - acc[ok, j0])
        span = (float(d.min()), float(d.max()))  # the change over models, in points
        (same if eq == ok.sum() else moved).append((c, eq, int(ok.sum()), span))
        for i in np.flatnonzero(ok):
            delta = 100 * (acc[i, j] - acc[i, j0])
            if abs(delta) > ACCURACY_POINTS:
                anomalies.append(
                    f"{cl(c)} moves the accuracy of {ml(models[i])} from "
                    f"{_pct(acc[i, j0])} to {_pct(acc[i, j])} ({delta:+.1f} points): a "
                    "post-hoc calibrator should rarely change predictions this much; check "
                    f"its fit on {fitted_on}."
                )
    if same:
        n = same[0][2]
        names = ", ".join(cl(c) for c, _, _, _ in same)
        headlines.append(
            f"{names} never change{'s' if len(same) == 1 else ''} accuracy: "
            f"{n}/{n} models identical to uncalibrated."
        )
    if moved:
        parts = [
            f"{cl(c)} on {k - eq}/{k} ({lo:+.2f} to {hi:+.2f})" for c, eq, k, (lo, hi) in moved
        ]
        headlines.append(
            "Accuracy changes with "
            + ", ".join(parts)
            + " models (the change over models in points; not tested)."
        )
    return headlines, anomalies


def _calibrated_already(rows, models, ml, delta: float = CALIBRATED_ECE) -> list[str]:
    """Models whose uncalibrated predictions are calibrated within ``delta`` already: the
    upper confidence bound of the unbiased ECE (``ci_high`` of :data:`CAL_METRIC`) is below it."""
    out = []
    for r in rows:
        if (
            r["metric"] == CAL_METRIC
            and r["method"] == "uncalibrated"
            and r.get("half", "test") in HEADLINE_HALVES
            and r["model"] in models
            and math.isfinite(float(r.get("ci_high", math.nan)))
            and float(r["ci_high"]) < delta
        ):
            out.append(
                f"{ml(r['model'])} is calibrated within {format_value(CAL_METRIC, delta)} points "
                f"before calibration (unbiased ECE {format_value(CAL_METRIC, float(r['value']))}%, "
                f"upper bound {format_value(CAL_METRIC, float(r['ci_high']))}%): calibrators can "
                "only add noise."
            )
    return out


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
            f"significantly on {', '.join(flat)} (Iman-Davenport test)."
        )
    wide = _overlapping_best(rows, CAL_METRIC, models, methods)
    if wide:
        anomalies.append(
            f"{metric_name(CAL_METRIC)}: on {wide[0]}/{wide[1]} models the best calibrator's interval overlaps the "
            "runner-up's, so the per-model winner is not established."
        )
    outside = [
        r
        for r in rows
        if r.get("half", "test") in HEADLINE_HALVES
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


def _verb(metric: str, direction: str) -> str:
    """``lowers`` / ``raises``: what a ``better`` or ``worse`` change does to ``metric``."""
    up = METRICS[metric].higher_is_better if metric in METRICS else False
    return "raises" if (direction == "better") == bool(up) else "lowers"


def _significant(r: Mapping, alpha: float) -> bool:
    p = float(r.get("p_holm", math.nan))
    return math.isfinite(p) and p < alpha


def _diff(metric: str, x: float) -> str:
    """A signed difference as printed, with "points" for metrics printed in percent."""
    unit = " points" if display_spec(metric)[0] == 100.0 else ""
    return format_value(metric, x, signed=True) + unit


def _evidence(r: Mapping, alpha: float) -> dict:
    """What one comparison row says, for a finding's ``pairs``: the model, metric, the two
    calibrators and ``verdict`` (``better`` / ``worse`` for ``method`` against ``baseline`` when
    significant after Holm, else ``not significant``)."""
    said = str(r.get("direction") or "") if _significant(r, alpha) else "not significant"
    return {
        "dataset": r.get("dataset"),
        "model": r["model"],
        "metric": r["metric"],
        "method": r["method"],
        "baseline": r["baseline"],
        "verdict": said,
    }


def _baseline_items(compare, models, ml, cl, alpha) -> list[dict]:
    """Per (baseline, metric, calibrator): on how many models the calibrator is significantly
    better or worse than the baseline (Holm over the model and metric's distinct pairs:
    :func:`calbench.stats.comparisons.holm_family`), and the median difference. A pair two
    baselines' questions share (a baseline against the other) is stated once: against
    uncalibrated when that is one of the two, else under the first baseline.
    Supported results with the same baseline, metric, direction and count are one finding
    listing each calibrator's median difference (``size``: the median of those medians)."""
    groups: dict[tuple, list[Mapping]] = {}
    seen: set[tuple] = set()
    # a pair shared by two baselines is stated against uncalibrated (the model's own
    # probabilities) when that is one of them, else under the first baseline
    ordered = sorted(compare, key=lambda r: r.get("family") != "vs:uncalibrated")
    for r in ordered:
        fam = str(r.get("family") or "")
        if fam.startswith("vs:") and r["model"] in models:
            # a pair asked by two baselines' questions (ts vs uncalibrated, uncalibrated vs
            # ts) is one test with one verdict: stated once, under the first baseline
            pair = (r.get("dataset"), r["model"], r["metric"], frozenset((r["method"], fam[3:])))
            if pair in seen:
                continue
            seen.add(pair)
            groups.setdefault((fam[3:], r["metric"], r["method"]), []).append(r)
    supported: dict[tuple, list[tuple[str, float]]] = {}
    items = []
    for (base, metric, method), rs in groups.items():
        n = len(rs)
        better = sum(_significant(r, alpha) and r.get("direction") == "better" for r in rs)
        worse = sum(_significant(r, alpha) and r.get("direction") == "worse" for r in rs)
        if not better and not worse:
            continue
        size = float(np.median([float(r["difference"]) for r in rs]))
        if (better * 2 > n and not worse) or (worse * 2 > n and not better):
            way = "better" if better else "worse"
            key = (base, metric, way, max(better, worse), n)
            supported.setdefault(key, []).append((method, size, rs))
            continue
        items.append(
            {
                "family": f"vs:{base}",
                "text": f"{cl(method)} vs {cl(base)} on {metric_name(metric)}: significantly "
                f"better on {better}/{n} and worse on {worse}/{n} models (median difference "
                f"{_diff(metric, size)}); the models disagree or too few agree.",
                "direction": "mixed" if better and worse else ("better" if better else "worse"),
                "size": size,
                "support": "to check",
                "pairs": [_evidence(r, alpha) for r in rs],
            }
        )
    order = {m: i for i, m in enumerate(dict.fromkeys(r["metric"] for r in compare))}
    lead = []
    for (base, metric, way, k, n), members in supported.items():
        members.sort(key=lambda ms: ms[1] if way == "better" else -ms[1])
        verb = _verb(metric, way)
        if len(members) > 1:
            head = f"{len(members)} calibrators {verb[:-1]}"  # "lower", "raise"
        else:
            head = f"{cl(members[0][0])} {verb}"
        sizes = [x for _, x, _ in members]
        text = (
            f"{head} {metric_name(metric)} vs {cl(base)} on {k}/{n} models (significant after "
            "Holm; median difference "
        )
        if len(members) == 1:
            text += f"{_diff(metric, sizes[0])})."
        else:
            text += "; ".join(f"{cl(m)} {_diff(metric, x)}" for m, x, _ in members) + ")."
        lead.append(
            (
                (order.get(metric, 0), way != "better", -k),
                {
                    "family": f"vs:{base}",
                    "text": text,
                    "direction": way,
                    "size": float(np.median(sizes)),
                    "support": "supported",
                    "pairs": [_evidence(r, alpha) for _, _, rs in members for r in rs],
                },
            )
        )
    lead.sort(key=lambda t: t[0])
    return [d for _, d in lead] + items


def _best_items(compare, models, ml, cl, alpha, words: SchemeWords) -> list[dict]:
    """The cross-fitted "best" picks: beaten where they are judged (to check), or significantly
    better than every other calibrator (supported), per metric. ``words``:
    :func:`scheme_words` of the study's rows."""
    judged_on, nested = words.judged_on, words.crossfit
    by: dict[tuple, list[Mapping]] = {}
    for r in compare:
        if r.get("family") == "best" and r["model"] in models:
            by.setdefault((r["metric"], r["model"]), []).append(r)
    items, wins = [], {}
    for (metric, model), rs in by.items():
        label = metric_name(metric)
        beaten = [r for r in rs if _significant(r, alpha) and r.get("direction") == "worse"]
        for r in beaten:
            items.append(
                {
                    "family": "best",
                    "text": f"{ml(model)}: {cl(r['method'])}, the "
                    + ("nested cross-fitted pick" if nested else "best-on-validation pick")
                    + f" for {label}"
                    + ("" if nested else " (cross-fitted)")
                    + f", is significantly worse on {judged_on} than "
                    f"{cl(r['baseline'])} "
                    f"({format_value(metric, float(r['difference']), signed=True)}).",
                    "direction": "worse",
                    "size": float(r["difference"]),
                    "support": "to check",
                    "pairs": [_evidence(r, alpha)],
                }
            )
        all_better = all(_significant(r, alpha) and r.get("direction") == "better" for r in rs)
        k, n, ev = wins.get(metric, (0, 0, []))
        wins[metric] = (k + all_better, n + 1, ev + [_evidence(r, alpha) for r in rs])
    for metric, (k, n, ev) in wins.items():
        if k:
            items.append(
                {
                    "family": "best",
                    "text": (
                        f"The nested cross-fitted pick for {metric_name(metric)} (chosen inside "
                        "each fold's training part)"
                        if nested
                        else f"The best-on-validation pick for {metric_name(metric)} "
                        "(cross-fitted inside the validation half)"
                    )
                    + f" is significantly better than every other calibrator on {judged_on} "
                    f"on {k}/{n} models.",
                    "direction": "better",
                    "size": None,
                    "support": "supported" if k * 2 > n else "to check",
                    "pairs": ev,
                }
            )
    return items


def finding_items(
    rows: Sequence[Mapping],
    ranks: Sequence[Mapping],
    models: Sequence[str],
    methods: Sequence[str],
    model_labels: Mapping[str, str],
    method_labels: Mapping[str, str],
    compare: Sequence[Mapping] = (),
    alpha: float = ALPHA,
) -> list[dict]:
    """The report's findings as data, supported ones first.

    Each finding is a dict:

    * ``family``: what it is about: ``"ranks"`` (average ranks, Iman-Davenport / Nemenyi),
      ``"vs:<baseline>"`` (calibrators against a baseline), ``"best"`` (the cross-fitted
      best-on-validation pick tested on the test half), ``"accuracy"``, ``"calibrated"``
      (models calibrated before calibration), ``"precision"`` (what the data cannot resolve),
      ``"robustness"`` (added by :func:`calbench.report.context.build_context`);
    * ``text``: the sentence, with the counts and sizes behind it;
    * ``direction``: ``"better"``, ``"worse"``, ``"mixed"`` or ``""`` (no direction);
    * ``size``: the effect as a fraction in the metric's units (the median difference over
      models for a ``vs:`` finding, the average rank for ``ranks``), or ``None``;
    * ``pairs`` (empty but for findings drawn from comparison rows): the verdict of each comparison
      behind it (model, metric, ``method``, ``baseline``, ``verdict``: ``better``, ``worse`` or
      ``not significant``), so that a check can hold every statement about a pair against the
      comparison table;
    * ``support``: ``"supported"`` (significant on a majority of models after Holm's
      correction and never significant the other way; an Iman-Davenport test that rejects) or
      ``"to check"`` (mixed, a minority of models, or an anomaly).

    Only verdict-eligible metrics (``Metric.verdicts``) give findings: the comparison rows
    carry no others (:func:`calbench.stats.comparisons.check_verdict_metrics`), ``ranks`` come from
    :func:`rank_summaries`.
    """
    ml = lambda m: model_labels.get(m, m)  # noqa: E731
    cl = lambda c: method_labels.get(c, c)  # noqa: E731
    items: list[dict] = []
    for text in _rank_headline(ranks):
        entry = next(e for e in ranks if METRICS[e["metric"]].paired_test == "jackknife_z")
        fr = entry["friedman"]
        ok = fr is not None and fr.p_f < alpha and bool(entry.get("worse_than_best"))
        items.append(
            {
                "family": "ranks",
                "text": text,
                "direction": "",
                "size": entry["methods"][0]["rank"],
                "support": "supported" if ok else "to check",
                "pairs": [],
            }
        )
    items += _baseline_items(compare, set(models), ml, cl, alpha)
    items += _best_items(compare, set(models), ml, cl, alpha, scheme_words(rows))
    acc_h, acc_a = _accuracy_findings(rows, models, methods, ml, cl)
    items += [_plain("accuracy", t, "supported") for t in acc_h]
    items += [_plain("accuracy", t, "to check") for t in acc_a]
    items += [_plain("calibrated", t, "to check") for t in _calibrated_already(rows, models, ml)]
    items += [
        _plain("precision", t, "to check")
        for t in _precision_anomalies(rows, ranks, models, methods)
    ]
    return [d for d in items if d["support"] == "supported"] + [
        d for d in items if d["support"] != "supported"
    ]


def _plain(family: str, text: str, support: str) -> dict:
    return {
        "family": family,
        "text": text,
        "direction": "",
        "size": None,
        "support": support,
        "pairs": [],
    }


def findings(
    rows: Sequence[Mapping],
    ranks: Sequence[Mapping],
    models: Sequence[str],
    methods: Sequence[str],
    model_labels: Mapping[str, str],
    method_labels: Mapping[str, str],
    compare: Sequence[Mapping] = (),
) -> dict:
    """``{"items": finding_items(...), "headlines": [supported texts], "anomalies": [texts to
    check]}``: the template's two lists of :func:`finding_items`."""
    items = finding_items(rows, ranks, models, methods, model_labels, method_labels, compare)
    return {
        "items": items,
        "headlines": [d["text"] for d in items if d["support"] == "supported"],
        "anomalies": [d["text"] for d in items if d["support"] != "supported"],
    }


def p_phrase(p: float) -> str:
    """A p-value as the tail of a sentence: ``= 0.032`` or ``< 0.001``."""
    text = format_p(p)
    return text if text.startswith("<") else f"= {text}"


def _overlapping_best(rows, metric, models, methods) -> tuple[int, int] | None:
    """How many models' best and second-best intervals of ``metric`` overlap, of how many;
    ``None`` for a metric whose intervals are not two-sided (a one-sided ``[0, U]`` bound
    always overlaps another, which says nothing)."""
    if interval_method(metric) not in ("percentile", "basic", "jackknife"):
        return None
    vals = {}
    for r in rows:
        if (
            r["metric"] == metric
            and r.get("half", "test") in HEADLINE_HALVES
            and r["method"] in methods
        ):
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
