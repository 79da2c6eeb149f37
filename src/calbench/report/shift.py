"""The dataset-shift section of the report (Ovadia et al. 2019, "Can you trust your model's
uncertainty?", figs. 2-3 style) and its summary tables.

From the per-model outputs of ``evaluate-shift`` (:mod:`calbench.shift.evaluate`):

* box plots of accuracy, ECE and NLL against severity (0 = clean test half, 1-5 = corrupted),
  one box per calibrator and severity over the corruptions; each point is a corruption's value
  averaged over the dataset's models;
* a table of mean ECE per severity (rows calibrators; mean over corruptions and models);
* the paired comparisons of "TS vs uncalibrated" and "best vs TS" (best cross-fitted inside
  the clean validation half) per model and severity, with counts of significant differences
  and their direction: differences of means with a bootstrap interval, differences of unbiased
  calibration errors (``ece_ub``) with the p-value of the test of equal calibration error and
  no interval (:data:`calbench.shift.evaluate.NO_INTERVAL_REASON`);
* a plain-language summary whose every number and verb is computed from these tables.

The section is data (:func:`section_file`, written as ``section.json``; figures embedded as
base64 PNG), rendered with the report's templates (``calbench/templates/report/sections/shift.html.j2``), which
escape every text taken from the data or the configuration.
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from calbench.display import calibrator_labels, dataset_labels, display_spec, format_value
from calbench.io import atomic_write_text
from calbench.results import (
    SHIFT_COMPARE_COLUMNS,
    SHIFT_METRIC_COLUMNS,
    SHIFT_SEVERITY_LEVELS,
    SHIFT_SUMMARY_COLUMNS,
    read_long_csv,
    write_long_csv,
)
from calbench.shift.evaluate import NO_INTERVAL_REASON
from calbench.stats import spearman

BOX_METRICS = ("accuracy", "ece", "nll")


def _fmt(metric: str, value: float) -> str:
    return format_value(metric, float(value))


def _signed(metric: str, value: float) -> str:
    text = _fmt(metric, abs(value))
    return ("-" if value < 0 else "+") + text


def read_rows(metrics_paths, compare_paths) -> tuple[list[dict], list[dict]]:
    rows = read_long_csv(metrics_paths, required=SHIFT_METRIC_COLUMNS)
    compare = read_long_csv(compare_paths, required=SHIFT_COMPARE_COLUMNS) if compare_paths else []
    for r in rows:
        r["severity"] = int(float(r["severity"]))
    for r in compare:
        r["severity"] = int(float(r["severity"]))
        # blank for a difference without an interval (ECE)
        r["p_value"] = float(r["p_value"]) if r["p_value"] != "" else math.nan
    return rows, compare


def _has_interval(r: Mapping) -> bool:
    return math.isfinite(float(r["ci_low"])) and math.isfinite(float(r["ci_high"]))


def _significant(r: Mapping, alpha: float) -> bool:
    """A difference is significant when its interval excludes 0 or, for a difference tested
    without an interval (unbiased calibration errors), when its p-value is below ``alpha``."""
    if _has_interval(r):
        return float(r["ci_low"]) > 0 or float(r["ci_high"]) < 0
    p = float(r["p_value"])
    return math.isfinite(p) and p < alpha


def calibration_metric(rows: Sequence[Mapping]) -> str:
    """The calibration error the findings, the table and the summary use: ``ece_ub`` (unbiased,
    whose bias does not depend on sharpness) when the rows hold it, else the plug-in ``ece``."""
    return "ece_ub" if any(r["metric"] == "ece_ub" for r in rows) else "ece"


def corruption_means(rows: Sequence[Mapping], metric: str, dataset: str) -> dict:
    """``{(method, severity): {corruption: mean over models}}`` on the test half."""
    acc: dict = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["dataset"] == dataset and r["half"] == "test" and r["metric"] == metric:
            acc[(r["method"], r["severity"])][r["corruption"]].append(float(r["value"]))
    return {k: {c: float(np.mean(v)) for c, v in d.items()} for k, d in acc.items()}


def mean_table(rows: Sequence[Mapping], metric: str, dataset: str, methods: Sequence[str]) -> dict:
    """``{method: [mean over corruptions and models at severity 0..5]}`` (NaN where absent)."""
    means = corruption_means(rows, metric, dataset)
    out = {}
    for m in methods:
        out[m] = [
            float(np.mean(list(means[(m, s)].values()))) if (m, s) in means else math.nan
            for s in SHIFT_SEVERITY_LEVELS
        ]
    return out


def box_figure(rows, dataset: str, methods: Sequence[str], labels: Mapping[str, str]) -> bytes:
    """PNG: accuracy, ECE and NLL against severity, boxes over corruptions per calibrator."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab10" if len(methods) <= 10 else "tab20")
    fig, axes = plt.subplots(1, len(BOX_METRICS), figsize=(6.0 * len(BOX_METRICS), 4.6))
    width = 0.8 / max(len(methods), 1)
    for ax, metric in zip(axes, BOX_METRICS, strict=True):
        means = corruption_means(rows, metric, dataset)
        scale = display_spec(metric)[0]
        for k, m in enumerate(methods):
            data, pos = [], []
            for s in SHIFT_SEVERITY_LEVELS:
                vals = list((means.get((m, s)) or {}).values())
                if vals:
                    data.append(np.asarray(vals) * scale)
                    pos.append(s - 0.4 + width * (k + 0.5))
            if not data:
                continue
            colour = cmap(k % cmap.N)
            ax.boxplot(
                data,
                positions=pos,
                widths=width * 0.9,
                patch_artist=True,
                showfliers=True,
                manage_ticks=False,
                boxprops={"facecolor": colour, "edgecolor": colour, "alpha": 0.8},
                medianprops={"color": "black", "linewidth": 0.8},
                whiskerprops={"color": colour},
                capprops={"color": colour},
                flierprops={"markeredgecolor": colour, "markersize": 2},
            )
        ax.set_xticks(list(SHIFT_SEVERITY_LEVELS))
        ax.set_xticklabels(["clean", "1", "2", "3", "4", "5"])
        ax.set_xlabel("severity")
        ax.set_ylabel(display_spec(metric)[2])
        ax.grid(axis="y", alpha=0.3)
    handles = [
        matplotlib.patches.Patch(color=cmap(k % cmap.N), label=labels.get(m, m))
        for k, m in enumerate(methods)
    ]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(methods), 10), frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def findings(
    rows, compare, dataset: str, methods: Sequence[str], labels: Mapping, alpha: float = 0.05
) -> list[str]:
    """Plain sentences about ``dataset`` computed from the tables (never fixed text); the
    calibration error is :func:`calibration_metric`'s."""
    out = []
    cm = calibration_metric(rows)
    ece = mean_table(rows, cm, dataset, methods)
    acc = mean_table(rows, "accuracy", dataset, methods)
    lab = lambda m: labels.get(m, m)  # noqa: E731
    en = "unbiased ECE" if cm == "ece_ub" else "ECE"
    if "uncalibrated" in acc and not math.isnan(acc["uncalibrated"][0]):
        a = acc["uncalibrated"]
        out.append(
            f"Accuracy falls from {_fmt('accuracy', a[0])}% on the clean test half to "
            f"{_fmt('accuracy', a[-1])}% at severity 5 (mean over corruptions and models)."
        )
    if "uncalibrated" in ece and "ts" in ece:
        u, t = np.array(ece["uncalibrated"]), np.array(ece["ts"])
        gain = u - t
        if np.all(np.isfinite(gain)):
            rho = spearman(np.array(SHIFT_SEVERITY_LEVELS, float), gain)
            trend = "shrinks" if gain[-1] < gain[0] else "grows" if gain[-1] > gain[0] else "stays"
            ratio = [tt / uu if uu > 0 else math.nan for tt, uu in zip(t, u, strict=True)]
            out.append(
                f"{lab('ts')} lowers mean {en} from {_fmt(cm, u[0])}% to {_fmt(cm, t[0])}% "
                f"on clean data (gain {_fmt(cm, gain[0])} points) and from {_fmt(cm, u[-1])}% "
                f"to {_fmt(cm, t[-1])}% at severity 5 (gain {_fmt(cm, gain[-1])} points): its "
                f"absolute gain {trend} with severity (Spearman rho of gain against severity "
                f"{rho:.2f}); relative to the uncalibrated {en} it keeps "
                f"{100 * (1 - ratio[0]):.0f}% of the error removed on clean data and "
                f"{100 * (1 - ratio[-1]):.0f}% at severity 5."
            )
    finite = {m: v for m, v in ece.items() if np.isfinite(v[0]) and np.isfinite(v[-1])}
    if len(finite) >= 2:
        rise = {m: v[-1] - v[0] for m, v in finite.items()}
        order = sorted(rise, key=lambda m: rise[m])
        best5 = min(finite, key=lambda m: finite[m][-1])
        out.append(
            f"Most graceful degradation: {lab(order[0])} (mean {en} {_signed(cm, rise[order[0]])} "
            f"points from clean to severity 5); least graceful: {lab(order[-1])} "
            f"({_signed(cm, rise[order[-1]])} points). Lowest mean {en} at severity 5: "
            f"{lab(best5)} ({_fmt(cm, finite[best5][-1])}%)."
        )
    names = {
        "ece": "ECE",
        "ece_ub": "unbiased ECE",
        "nll": "NLL",
        "accuracy": "accuracy",
        "brier": "Brier score",
    }
    for comp, text in (
        ("ts_vs_uncalibrated", f"{lab('ts')} vs {lab('uncalibrated')}"),
        ("best_vs_ts", f"best vs {lab('ts')}"),
    ):
        sel = [r for r in compare if r["dataset"] == dataset and r["comparison"] == comp]
        for metric in sorted({r["metric"] for r in sel}):
            cells = [r for r in sel if r["metric"] == metric and r["severity"] > 0]
            if not cells:
                continue
            if not all(_has_interval(r) or math.isfinite(float(r["p_value"])) for r in cells):
                out.append(
                    f"{text}, {names.get(metric, metric)} under shift: differences only, "
                    "without interval or significance (see the note above)."
                )
                continue
            sig = [r for r in cells if _significant(r, alpha)]
            better = sum(float(r["difference"]) < 0 for r in sig)
            worse = len(sig) - better
            if metric == "accuracy":
                better, worse = worse, better
            picks = sorted({r["method"] for r in sel if r["metric"] == metric})
            extra = (
                " (best cross-fitted inside the clean validation half: "
                f"{', '.join(lab(p) for p in picks)})"
                if comp == "best_vs_ts"
                else ""
            )
            out.append(
                f"{text}{extra}, {names.get(metric, metric)} under shift: significantly better in {better}, "
                f"significantly worse in {worse}, not distinguishable in "
                f"{len(cells) - better - worse} of {len(cells)} (model, severity) cells."
            )
    return out


def _ece_table(rows, dataset: str, dl: str, methods: Sequence[str], labels: Mapping) -> dict:
    """Mean calibration error (:func:`calibration_metric`) per calibrator and severity; the
    lowest of each column in bold."""
    cm = calibration_metric(rows)
    ece = mean_table(rows, cm, dataset, methods)
    col_best = [
        min((v[i] for v in ece.values() if math.isfinite(v[i])), default=math.nan)
        for i in range(len(SHIFT_SEVERITY_LEVELS))
    ]
    return {
        "caption": f"{dl}: mean {display_spec(cm)[2]}, by severity; lowest of each column in bold",
        "header": ["Calibrator", "clean", "1", "2", "3", "4", "5"],
        "rows": [
            {
                "label": labels[m],
                "cells": [
                    {"text": _fmt(cm, v), "bold": math.isfinite(v) and v == col_best[i]}
                    for i, v in enumerate(ece[m])
                ],
            }
            for m in methods
        ],
    }


def _compare_rows(sel, models: Mapping, labels: Mapping, alpha: float) -> dict:
    """The paired comparison rows of one dataset (folded in the section)."""
    out = []
    for r in sel:
        mdisp = (models.get(r["model"]) or {}).get("display") or {}
        name = str(mdisp.get("name") or r["model"])
        if mdisp.get("loss"):
            name += f" ({mdisp['loss']})"
        ok = _has_interval(r)
        has_p = math.isfinite(float(r["p_value"]))
        m = r["metric"]
        num = [
            (_fmt(m, r["value"]), "num"),
            (_fmt(m, r["baseline_value"]), "num"),
            (_fmt(m, r["difference"]), "num sig" if _significant(r, alpha) else "num"),
            (f"[{_fmt(m, r['ci_low'])}, {_fmt(m, r['ci_high'])}]" if ok else "none", "num"),
            (f"{float(r['p_value']):.3f}" if has_p else "–", "num"),
        ]
        out.append(
            {
                "text": [
                    name,
                    "clean" if r["severity"] == 0 else str(r["severity"]),
                    m,
                    labels.get(r["method"], r["method"]),
                    labels.get(r["baseline"], r["baseline"]),
                ],
                "num": [{"text": t, "cls": c} for t, c in num],
            }
        )
    header = ["Model", "Severity", "Metric", "Method", "Baseline", "Value", "Baseline value",
              "Difference", "Interval", "p"]  # fmt: skip
    return {"header": header, "rows": out, "alpha": f"{alpha:g}"}


def _dataset_part(rows, compare, dataset: str, spec: Mapping, methods, labels, alpha) -> dict:
    """One dataset's part of the section: findings, box plots, ECE table, comparisons."""
    dl = dataset_labels(spec).get(dataset, dataset)
    corr = sorted({r["corruption"] for r in rows if r["dataset"] == dataset} - {"clean"})
    png = box_figure(rows, dataset, methods, labels)
    sel = [r for r in compare if r["dataset"] == dataset]
    return {
        "label": dl,
        "n_models": len({r["model"] for r in rows if r["dataset"] == dataset}),
        "n_corruptions": len(corr),
        "corruptions": ", ".join(corr),
        "findings": findings(rows, compare, dataset, methods, labels, alpha),
        "figure": "data:image/png;base64," + base64.b64encode(png).decode("ascii"),
        "ece": _ece_table(rows, dataset, dl, methods, labels),
        "compare": _compare_rows(sel, spec.get("models", {}), labels, alpha) if sel else None,
    }


#: The section's anchor and title (its entry in the report's contents).
SECTION_ID, SECTION_TITLE = "shift", "Calibration under dataset shift"
#: The section's partial (calbench/templates/report/sections/).
SECTION_TEMPLATE = "shift.html.j2"


def section_view(rows, compare, manifests: Sequence[Mapping], spec: Mapping) -> dict:
    """The section's data (rendered by ``templates/report/sections/shift.html.j2``), one part per
    dataset."""
    datasets = spec.get("datasets", {})
    cal_spec = spec.get("calibrators", {})
    present = {r["method"] for r in rows}
    methods = [c for c in cal_spec if c in present] + sorted(present - set(cal_spec))
    cl = calibrator_labels(spec)
    labels = {c: cl.get(c, c) for c in methods}
    level = float(spec.get("level", 0.95))
    order = [d for d in datasets if any(r["dataset"] == d for r in rows)]
    order += sorted({r["dataset"] for r in rows} - set(datasets))
    keys = ("dataset", "corruption", "source", "n", "sha256")
    return {
        "level": f"{level * 100:g}",
        "no_interval": NO_INTERVAL_REASON if any(not _has_interval(r) for r in compare) else "",
        "datasets": [
            _dataset_part(rows, compare, d, spec, methods, labels, 1.0 - level) for d in order
        ],
        "provenance": [{k: str(m.get(k, "")) for k in keys} for m in manifests if m],
    }


def section_file(rows, compare, manifests: Sequence[Mapping], spec: Mapping) -> dict:
    """The section as the report reads it (``section.json``: id, title, partial and data;
    :func:`calbench.report.build.read_section`)."""
    return {
        "id": SECTION_ID,
        "title": SECTION_TITLE,
        "template": SECTION_TEMPLATE,
        "data": section_view(rows, compare, manifests, spec),
    }


def section_html(rows, compare, manifests: Sequence[Mapping], spec: Mapping) -> str:
    """The section rendered on its own (an HTML fragment), as the report shows it."""
    from calbench.report.render import render_partial  # lazy: code inputs
    from calbench.report.sections import Section  # lazy: code inputs

    got = section_file(rows, compare, manifests, spec)
    section = Section(got["id"], got["title"], got["template"], data=got["data"])
    return render_partial(f"sections/{SECTION_TEMPLATE}", section=section)


def summary_rows(rows, spec: Mapping) -> list[dict]:
    """Mean ECE per severity per (dataset, calibrator), for ``mean_ece.csv``."""
    out = []
    cal_spec = spec.get("calibrators", {})
    present = {r["method"] for r in rows}
    methods = [c for c in cal_spec if c in present] + sorted(present - set(cal_spec))
    for d in sorted({r["dataset"] for r in rows}):
        for m, vals in mean_table(rows, "ece", d, methods).items():
            out.append(
                {
                    "dataset": d,
                    "method": m,
                    **{
                        f"severity_{s}": v for s, v in zip(SHIFT_SEVERITY_LEVELS, vals, strict=True)
                    },
                }
            )
    return out


def shift_report(*, metrics, compare, manifests, spec: Mapping, out_section, out_dir) -> None:
    """Write the report section ``out_section`` (JSON, :func:`section_file`) and
    ``out_dir``/{metrics,compare,mean_ece}.csv."""
    rows, comp = read_rows(metrics, compare)
    if not rows:
        raise ValueError("the shift metrics CSVs hold no rows; run evaluate-shift first")
    mans = []
    for path in manifests:
        try:
            mans.append(json.loads(Path(path).read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read corrupted-set manifest {path} ({exc})") from None
    out_dir = Path(out_dir)
    write_long_csv(out_dir / "metrics.csv", rows, SHIFT_METRIC_COLUMNS)
    write_long_csv(out_dir / "compare.csv", comp, SHIFT_COMPARE_COLUMNS)
    write_long_csv(out_dir / "mean_ece.csv", summary_rows(rows, spec), SHIFT_SUMMARY_COLUMNS)
    atomic_write_text(
        out_section, json.dumps(section_file(rows, comp, mans, spec), indent=1) + "\n"
    )
