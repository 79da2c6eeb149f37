"""The verdicts of the report that go beyond its tables: "calibrated within delta?" per model and
calibrator (:func:`verdict_view`; the unbiased calibration error of Kumar et al. 2019 with its
jackknife bound, Efron & Stein 1981) and the robustness of the ranking to other evaluation
choices (:func:`robustness_view`; Nixon et al. 2019), each with its finding for the first screen
(:func:`add_findings`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from calbench.display import calibrator_labels, display_spec, format_value, spec_labels
from calbench.results import HEADLINE_HALVES


def add_findings(found: dict, verdicts: dict | None, robustness: dict | None) -> None:
    """Add the findings of the "calibrated within delta" table and of the robustness section
    (views of :func:`verdict_view` and :func:`robustness_view`; ``None`` when absent) to
    ``found`` (:func:`calbench.report.summary.finding_items`' structure)."""
    if verdicts:
        add_finding(found, _within_item(verdicts))
    if robustness:
        item = {
            "family": "robustness",
            "text": robustness["sentence"],
            "direction": "",
            "size": None,
            "support": "supported" if robustness["robust"] else "to check",
            "pairs": [],
        }
        add_finding(found, item)


def add_finding(found: dict, item: dict) -> None:
    """Add one finding (:func:`calbench.report.summary.finding_items`' structure): a supported
    one after the other supported ones, one to check at the end."""
    items = found.setdefault("items", [])
    at = next((i for i, d in enumerate(items) if d["support"] != "supported"), len(items))
    items.insert(at if item["support"] == "supported" else len(items), item)
    found["headlines" if item["support"] == "supported" else "anomalies"].append(item["text"])


#: a finding names at most this many calibrator-model pairs; the rest are counted (a study of
#: many models would otherwise list hundreds in one sentence; the table lists every one)
LISTED_PAIRS = 8


def _listed(names: list[str]) -> str:
    """``names`` joined, the first :data:`LISTED_PAIRS` of them and a count of the rest."""
    if len(names) <= LISTED_PAIRS:
        return ", ".join(names)
    rest = len(names) - LISTED_PAIRS
    return ", ".join(names[:LISTED_PAIRS]) + f" and {rest} more, listed in the section's table"


def _within_item(v: dict) -> dict:
    """The finding of the "calibrated within delta" table: how many were shown, and the
    smallest error the test halves can show."""
    shown = [
        f"{h} on {r['label']}"
        for r in v["rows"]
        for h, c in zip(v["header"], r["cells"], strict=True)
        if c["ok"]
    ]
    detect = sorted(
        (r["detectable"] for r in v["rows"] if r["detectable"] != "–"),
        key=lambda t: float(t.rstrip("%")),
    )
    text = (
        f"Calibrated within {v['delta']} points (upper bound of the unbiased ECE below it): "
        f"{v['n_within']} of {v['n']} calibrator-model pairs"
        + (f" ({_listed(shown)})" if shown else "")
        + "."
    )
    if detect:
        text += (
            f" The smallest error {v.get('samples', 'these test halves')} can show is "
            f"{detect[0]} to {detect[-1]}"
            " (per model); a smaller one cannot be shown at this sample size."
        )
    return {
        "family": "calibrated",
        "text": text,
        "direction": "",
        "size": None,
        "support": "supported" if v["n_within"] else "to check",
        "pairs": [],
    }


#: the calibration error behind the report's "calibrated within delta" table
VERDICT_METRIC = "ece_ub"


def detectable_error(value: float, high: float) -> float:
    """The smallest calibration error these samples can show, read off one calibrator's
    interval of the unbiased error: its interval's upper bound had its estimate been 0,
    ``sqrt(max(high^2 - value^2, 0))`` (``high^2 - value^2 = z se`` of the squared error
    ``T`` when ``T >= 0``, :func:`calbench.stats.ub_interval`); NaN without an interval."""
    if not (math.isfinite(value) and math.isfinite(high)):
        return math.nan
    return math.sqrt(max(high * high - value * value, 0.0))


def verdict_view(rows, spec: Mapping) -> dict | None:
    """ "Calibrated within delta?" per model and calibrator (test half).

    A calibrator is shown calibrated within ``delta`` (``protocol.calibrated_within``, a
    fraction; config ``evaluation.calibrated_within``) only when the upper bound of the
    interval of its unbiased top-label calibration error (:data:`VERDICT_METRIC`, ``ci_high``:
    the jackknife interval at the study's level, a one-sided bound at level ``(1 + level) / 2``)
    lies below ``delta``. No multiplicity adjustment: each claim stands at its own level, and
    an adjustment over the calibrators (Holm) would make the claim easier, not harder. A
    bound at or above ``delta`` says "not shown within delta" (never "miscalibrated": the
    data may simply be too few). Each model also gets the smallest error its test half can
    show (:func:`detectable_error`, the smallest over its calibrators: the one nearest to
    calibrated has the standard error of a calibrated predictor; a miscalibrated one's is
    larger). ``None`` when the rows
    have no interval of :data:`VERDICT_METRIC`.
    """
    from calbench.report.summary import scheme_words  # lazy: code inputs

    delta = float((spec.get("protocol") or {}).get("calibrated_within", 0.01))
    level = float((spec.get("protocol") or {}).get("level", 0.95))
    if not 0.0 < delta < 1.0:
        raise ValueError(
            f"evaluation.calibrated_within must lie in (0, 1) (a fraction, e.g. 0.01), got {delta}"
        )
    rated = [
        r
        for r in rows
        if r["metric"] == VERDICT_METRIC
        and r.get("half", "test") in HEADLINE_HALVES
        and math.isfinite(float(r.get("ci_high", math.nan)))
    ]
    if not rated:
        return None
    cl = calibrator_labels(spec)
    ml = spec_labels(spec)[0]
    methods = list(dict.fromkeys(r["method"] for r in rated))
    models = list(dict.fromkeys((r["dataset"], r["model"]) for r in rated))
    pct = lambda x: format_value(VERDICT_METRIC, x)  # noqa: E731
    table, n_within, n = [], 0, 0
    for dataset, model in models:
        mine = {r["method"]: r for r in rated if (r["dataset"], r["model"]) == (dataset, model)}
        cells, detect = [], []
        for m in methods:
            r = mine.get(m)
            if r is None:
                cells.append({"text": "–", "ok": None})
                continue
            value, high = float(r["value"]), float(r["ci_high"])
            within = high < delta
            n_within += within
            n += 1
            detect.append(detectable_error(value, high))
            word = "within" if within else "not shown within"
            cells.append({"text": f"{word} (bound {pct(high)}%)", "ok": within})
        finite = [d for d in detect if math.isfinite(d)]
        table.append(
            {
                "label": ml.get(model, model),
                "cells": cells,
                "detectable": f"{pct(min(finite))}%" if finite else "–",
            }
        )
    return {
        "header": [cl.get(m, m) for m in methods],
        "rows": table,
        "delta": pct(delta),
        "metric": display_spec(VERDICT_METRIC)[2],
        "level": f"{(1 + level) / 2 * 100:g}",
        "n_within": n_within,
        "n": n,
        "m": len(methods),
        # what each model's bound is computed on: its test half, or (cross-fitted) all its
        # labelled samples' out-of-fold predictions
        "samples": scheme_words(rows).samples,
    }


def robustness_view(rows, spec: Mapping) -> dict:
    """The robustness section (:func:`calbench.stats.robustness.summarise` of the per-model rows):
    one table row per evaluation choice with the calibrator of best average rank there, one
    row per model with its winner, runner-up and their test, and a findings sentence: robust
    only when the winner beats the runner-up (a paired test that rejects) and ranks first under
    every evaluation choice; otherwise which choices disagree, or that the data cannot separate
    the two."""
    from calbench.report.summary import format_p  # lazy: code inputs
    from calbench.stats.robustness import ALPHA, DEFAULT_VARIANT, summarise  # lazy: code inputs

    s = summarise(rows)
    cl = calibrator_labels(spec)
    ml = spec_labels(spec)[0]
    name = lambda keys: " = ".join(cl.get(k, k) for k in keys)  # noqa: E731
    head, up = name(s["headline"]), name(s["runner_up"])
    table = [
        {
            "label": v["label"]
            + (" (the tables' choice)" if v["variant"] == DEFAULT_VARIANT else ""),
            "best": name(v["best"]),
            "rank": v["mean_ranks"].get(s["headline"][0], float("nan")),
            "same": v["best"] == s["headline"],
        }
        for v in s["variants"]
    ]
    labels = {v["variant"]: v["label"] for v in s["variants"]}
    first = sorted(s["p_first"].items(), key=lambda kv: -kv[1])
    n_var = len(s["variants"])
    test = (
        "its paired test on the one model"
        if s["models"] == 1
        else f"signed-rank test over {s['models']} models, normal approximation with the tie "
        "correction"
        if s["p_method"] == "normal"
        else f"exact signed-rank test over {s['models']} models"
    )
    p_text = format_p(s["p"])  # exact (counted) or normal approximation: no resolution floor
    p_text = p_text if p_text[0] in "<≤" else f"= {p_text}"
    if s["robust"]:
        sentence = (
            f"Robust: {head} has the best average rank on the unbiased ECE under all {n_var} "
            f"evaluation choices (bin count, binning scheme, top-label and classwise) and is "
            f"better than the runner-up {up} ({test}, p {p_text})."
        )
    else:
        why = []
        if s["disagree"]:
            flips = [
                f"{labels[v]} ({name(next(x['best'] for x in s['variants'] if x['variant'] == v))})"
                for v in s["disagree"]
            ]
            why.append(f"other calibrators rank first under {'; '.join(flips)}")
        if not s["separated"]:
            floor = (
                f"; the smallest p-value {s['models']} models allow is {s['p_floor']:.3g}"
                if s["p_floor"] >= ALPHA
                else ""
            )
            why.append(
                f"its difference from the runner-up {up} is not significant ({test}, p "
                f"{p_text}{floor})"
            )
        sentence = (
            f"Not shown robust: {head} has the best average rank on the unbiased ECE under the "
            f"tables' choice, but {' and '.join(why)}: the data cannot separate these "
            "calibrators."
        )
    per_model = [
        {
            "label": ml.get(d["model"], d["model"]),
            "winner": cl.get(d["winner"], d["winner"]),
            "runner_up": cl.get(d["runner_up"], d["runner_up"]),
            "p": "tied" if d["tied"] else format_p(d["p"]),
            "disagree": ", ".join(labels.get(v, v) for v in d["disagree"]) or "none",
            "robust": d["robust"],
        }
        for d in s["per_model"]
    ]
    return {
        "sentence": sentence,
        "robust": s["robust"],
        "headline": head,
        "models": s["models"],
        "table": table,
        "per_model": per_model,
        "n_robust": sum(d["robust"] for d in s["per_model"]),
        "p_first": [{"label": cl.get(m, m), "p": p} for m, p in first],
        "over_models": "the Wilcoxon 1945 signed-rank test of the per-model differences, its "
        "normal approximation with the tie correction"
        if s["p_method"] == "normal"
        else "the exact Wilcoxon 1945 signed-rank test of the\nper-model differences",  # as before
    }
