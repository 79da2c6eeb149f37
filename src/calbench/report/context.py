"""The report's context: every table, finding and figure as plain data for the template.

:func:`build_tables` makes the study's tables (:mod:`calbench.report.tables`), :func:`build_context`
the whole report: findings first (winner counts, average ranks with the Friedman test and a
critical-difference diagram after Demšar 2006; :mod:`calbench.report.summary`), the result
tables, fitted temperatures, paired comparisons (families with Holm 1979 within each),
published numbers, the
calibration-during-training sections (:func:`study_sections`), reliability diagrams (Guo et al.
2017, fig. 1) and the provenance (:mod:`calbench.report.provenance`). Views of single tables
live in :mod:`calbench.report.views`.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence

from calbench.calibrators.scaling import fitted_temperature
from calbench.display import (
    calibrator_labels,
    dataset_labels,
    format_value,
    losses_calibrators,
    model_dataset_labels,
    model_label,
    spec_labels,
)
from calbench.io import png_data_uri
from calbench.plots import FEW_SAMPLES
from calbench.plots.reliability import SMOOTH_LEVEL
from calbench.report import tables as T
from calbench.report.figures import reliability_figures
from calbench.report.over_models import over_models_view
from calbench.report.overview import findings_view, glossary, rank_overview
from calbench.report.partitions import partition_finding
from calbench.report.provenance import provenance_view
from calbench.report.references import bibliography
from calbench.report.sections import Section, contents, report_sections
from calbench.report.verdicts import add_findings, robustness_view, verdict_view
from calbench.report.views import (
    compare_view,
    comparison_families,
    metric_view,
    reference_view,
    study_view,
    temperature_view,
)
from calbench.results import HEADLINE_HALVES, headline_half


def build_tables(rows: Sequence[Mapping], spec: Mapping) -> dict:
    """Every table of the study from long rows and the study ``spec`` (see cli/report.py).

    Returns ``{"metrics": [Table...], "losses": [Table...], "losses_ts": [Table...]}`` in the
    order of the spec: the by-loss tables of the uncalibrated models and after temperature
    scaling (``losses_ts``, shown in the report; ``calbench aggregate`` writes ``losses``), for
    the calibrators of :func:`calbench.display.losses_calibrators`.
    """
    models = spec.get("models", {})
    calibrators = spec.get("calibrators", {})
    present_models = {r["model"] for r in rows}
    present_methods = {r["method"] for r in rows}
    model_order = [m for m in models if m in present_models] or None
    method_order = [c for c in calibrators if c in present_methods] or None
    mdl = model_dataset_labels(spec)
    labels = {m: [mdl[m], model_label(m, v.get("display"))] for m, v in models.items()}
    method_labels = calibrator_labels(spec)
    available = {r["metric"] for r in rows}
    metric_names = [m for m in spec.get("table_metrics") or sorted(available) if m in available]
    half = headline_half(rows)  # test, or oof for a cross-fitted study
    out = {"metrics": [], "losses": []}
    for metric in metric_names:
        out["metrics"].append(
            T.metric_table(
                rows,
                metric,
                half=half,
                models=model_order,
                methods=method_order,
                model_labels=labels,
                method_labels=method_labels,
            )
        )
    displays = {m: (v.get("display") or {}) for m, v in models.items() if m in present_models}
    dl = dataset_labels(spec)
    out["losses_ts"] = []
    by_loss = losses_calibrators(displays.values(), present_methods)
    if by_loss:
        for metric in spec.get("losses_metrics") or ["ece", "cwece"]:
            if metric in available:
                if "uncalibrated" in by_loss:
                    out["losses"].append(
                        T.losses_table(
                            rows,
                            metric,
                            displays,
                            half=half,
                            dataset_labels=dl,
                            method_label=method_labels.get("uncalibrated", "uncalibrated"),
                        )
                    )
                if "ts" in by_loss:
                    out["losses_ts"].append(
                        T.losses_table(
                            rows,
                            metric,
                            displays,
                            method="ts",
                            half=half,
                            dataset_labels=dl,
                            method_label=method_labels.get("ts", "ts"),
                        )
                    )
    return out


def _coverage_of(rows: Sequence[Mapping], metric: str) -> tuple[str, dict] | None:
    """For a conformal set size (``aps_size``, ``lac_size``): ``("coverage", {(model,
    calibrator): "91.2%"})`` from its coverage metric (``aps_coverage`` ...) on the test half,
    printed under the size: a small set is worth nothing without its coverage."""
    if not metric.endswith("_size"):
        return None
    cov = metric[: -len("_size")] + "_coverage"
    got = {
        (r["model"], r["method"]): f"{format_value(cov, float(r['value']))}%"
        for r in rows
        if r["metric"] == cov and r.get("half", "test") in HEADLINE_HALVES
    }
    return ("coverage", got) if got else None


def calibrator_glossary(methods: Sequence[str], spec: Mapping) -> list[dict]:
    """One line per calibrator shown: its printed name and its source (the registry class's
    ``reference``), the citations the bibliography is derived from."""
    from calbench.calibrators import REGISTRY  # lazy: code inputs

    cl = calibrator_labels(spec)
    cal_spec = spec.get("calibrators") or {}
    out = []
    for key in methods:
        name = str((cal_spec.get(key) or {}).get("method") or key)
        cls = REGISTRY.get(name)
        ref = str(getattr(cls, "reference", "") or "") if cls is not None else ""
        out.append({"label": cl.get(key, key), "reference": ref})
    return out


def _rank_summaries(
    rows, tables, spec, model_order, method_order, compare=(), signed_rows=()
) -> tuple:
    """Average ranks with the Friedman test per verdict-eligible metric of the tables and the
    comparisons (the unbiased errors on their signed values ``signed_rows``), and the findings
    (:func:`calbench.report.summary.findings`)."""
    from calbench.report import summary as SU  # lazy: code inputs
    from calbench.report.ranks import ALPHA, rank_summaries  # lazy: code inputs

    ml, cl, _, _ = spec_labels(spec)
    ranked = list(
        dict.fromkeys([t.metric for t in tables["metrics"]] + [r["metric"] for r in compare])
    )
    ranks = rank_summaries(rows, ranked, model_order, method_order, cl, signed_rows)
    found = SU.findings(rows, ranks, model_order, method_order, ml, cl, compare)
    for entry in ranks:
        fr = entry["friedman"]
        if fr is None:
            entry["friedman_text"] = ""
            continue
        f = "∞" if math.isinf(fr.f) else f"{fr.f:.2f}"
        rejects = fr.p_f < ALPHA
        entry["friedman_text"] = (
            f"Omnibus test: Iman-Davenport F = {f}, p {SU.p_phrase(fr.p_f)} (the p-value used; "
            f"Iman & Davenport 1980), from Friedman's χ² = {fr.chi2:.2f} (p "
            f"{SU.p_phrase(fr.p_chi2)} by the χ² approximation; Friedman 1937). "
            + (
                f"It rejects at α = {ALPHA}: bars join calibrators within the Nemenyi "
                f"critical difference {entry['cd']:.2f} (Nemenyi 1963)."
                if rejects
                else f"It does not reject at α = {ALPHA}: no post-hoc (Nemenyi) groups are "
                "drawn; the average ranks do not differ significantly."
            )
        )
        entry["rejects"] = rejects
    return ranks, found


def build_context(
    *,
    rows: Sequence[Mapping],
    compare: Sequence[Mapping],
    spec: Mapping,
    grids: Mapping[str, str],
    provenance: Mapping,
    reference: Sequence[Mapping] | None = None,
    plots: Mapping[str, Mapping[str, str]] | None = None,
    temperatures: Mapping[str, float] | None = None,
    robustness: Sequence[Mapping] | None = None,
    extra_sections: Sequence[Section] = (),
    arena: Mapping | None = None,
    over_models: Mapping | None = None,
    partitions: Mapping | None = None,
    report_dir: str | None = None,
) -> dict:
    """Everything the template needs, as plain data (strings, lists, dicts).

    ``reference`` are the rows of ``results/tables/reference.csv`` (ours versus published,
    :func:`calbench.report.published.reference_comparison`); ``plots`` maps ``dataset/model`` to
    ``{calibrator: reliability PNG}``; ``grids`` maps it to the per-model grid PNG (used when
    ``plots`` lacks the model); ``temperatures`` maps model to the fitted temperature of
    temperature scaling; ``robustness`` the rows of the robustness CSVs
    (:func:`calbench.stats.robustness.robustness_rows`: the robustness section, and the unbiased
    errors' signed values that rank them); ``extra_sections`` the sections other steps computed
    (:class:`calbench.report.sections.Section`); ``arena`` the implementations side by side
    (:func:`calbench.report.arena.arena_context`); ``over_models`` the verdicts over models the
    aggregate step wrote (:func:`calbench.report.over_models.read_over_models`; ``None``: no
    section); ``partitions`` the spread of a cross-fitted study's verdicts over its partitions
    (:func:`calbench.report.partitions.partitions_view`; ``None``: no section); ``report_dir``
    the folder the report is written to, which the links to the diagrams it does not embed are
    relative to (:func:`calbench.report.figures.reliability_figures`). ``ctx["sections"]`` lists the report's
    sections in page order and ``ctx["toc"]`` is its contents, drawn from that list
    (:mod:`calbench.report.sections`); the bibliography lists the works of the calibrators and
    metrics in ``rows`` and of the sections present (:func:`calbench.report.references.bibliography`),
    each with what it is cited for.
    """
    from calbench.report.ranks import metric_name  # lazy: code inputs

    signed_rows: Sequence[Mapping] = ()
    if robustness:  # the unbiased errors rank on their signed values, as robustness does
        from calbench.stats.robustness import signed_estimates  # lazy: code inputs

        signed_rows = signed_estimates(robustness, headline_half(rows))
    # one Holm family per model and metric, each pair once: the findings and the comparison
    # table read the same verdicts
    compare = comparison_families(compare)
    tables = build_tables(rows, spec)
    protocol = dict(spec.get("protocol") or {})
    level = float(protocol.get("level", 0.95))
    cl = calibrator_labels(spec)
    present_models = {r["model"] for r in rows}
    present_methods = {r["method"] for r in rows}
    model_order = [m for m in spec.get("models", {}) if m in present_models] or sorted(
        present_models
    )
    method_order = [c for c in spec.get("calibrators", {}) if c in present_methods] or sorted(
        present_methods
    )
    ranks, found = _rank_summaries(
        rows, tables, spec, model_order, method_order, compare, signed_rows
    )
    metric_views = [
        metric_view(t, t.metric, _coverage_of(rows, t.metric)) for t in tables["metrics"]
    ]
    losses_views = [metric_view(t, f"losses-uncalibrated-{t.metric}") for t in tables["losses"]]
    losses_views += [metric_view(t, f"losses-ts-{t.metric}") for t in tables["losses_ts"]]
    studies = study_sections(rows, spec)
    studies["views"] = [study_view(t) for t in studies["tables"]]
    n_outside = sum(1 for v in metric_views for r in v["rows"] for c in r if c.get("mark"))
    ctx = {
        "studies": studies,
        "title": spec.get("title") or "Calibration study",
        "description": spec.get("description") or "",
        "protocol": protocol,
        # what the headline numbers are computed on (the evaluation scheme's samples)
        "evaluated_on": (
            "the out-of-fold predictions of all samples"
            if protocol.get("scheme") == "crossfit"
            else "the test half"
        ),
        "level_pct": f"{level * 100:g}",
        "metric_tables": metric_views,
        "losses_tables": losses_views,
        "compare": compare_view(compare, spec, level),
        "reference": reference_view(reference or [], spec),
        "temperatures": temperature_view(temperatures or {}, spec),
        "figures": reliability_figures(plots or {}, grids, rows, spec, report_dir),
        "ranks": ranks,
        "rank_overview": rank_overview(ranks),
        "findings": found,  # as summary gives them (the view: findings_view)
        "glossary": glossary([t.metric for t in tables["metrics"]]),
        "calibrator_glossary": calibrator_glossary(method_order, spec),
        "n_outside": n_outside,
        "provenance": {**provenance, **provenance_view(provenance)},
        "few_samples": FEW_SAMPLES,
        "smooth_level": f"{SMOOTH_LEVEL:.0%}",
    }
    # verdicts over models: read from the aggregate step's files (studies of 5 models or more)
    ctx["over_models"] = over_models_view(over_models, spec)
    ctx["partitions"] = partitions
    spread = partition_finding(partitions)
    if spread:  # first among the findings: how far every verdict below depends on the partition
        found["items"].insert(0, spread)
        found["headlines"].insert(0, spread["text"])
    ctx["robustness"] = robustness_view(robustness, spec) if robustness else None
    ctx["verdicts"] = verdict_view(rows, spec)
    add_findings(found, ctx["verdicts"], ctx["robustness"])
    ctx["arena"] = arena
    ctx["sections"] = report_sections(ctx, tables, cl, extra_sections)
    ctx["toc"] = contents(ctx["sections"])
    ctx.update(
        n_models=len(present_models),
        n_methods=len(present_methods),
        methods=[cl.get(c, c) for c in method_order],
    )
    cal_spec = spec.get("calibrators") or {}
    keys = list(dict.fromkeys(r["method"] for r in rows))
    methods = {k: str((cal_spec.get(k) or {}).get("method") or k) for k in keys}
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    labels = {**{m: metric_name(m) for m in metrics}, **cl}
    cited = ["dece_history"] if studies["dece"] else []
    cited += ["robustness"] if ctx["robustness"] else []
    cited += ["verdicts"] if ctx["verdicts"] else []
    cited += ["over_models"] if ctx["over_models"] else []
    cited += ["proper_scores"] if (ctx["compare"] or {}).get("n_proper") else []
    ctx["bibliography"], ctx["cited_for"] = bibliography(methods, metrics, labels, cited)
    # what the first screen shows: the findings by family, "To check" apart
    ctx["findings_view"] = findings_view(found, cl)
    return ctx


def study_sections(rows: Sequence[Mapping], spec: Mapping) -> dict:
    """Sections of the calibration-during-training studies (:mod:`calbench.report.studies`).

    ``spec["studies"]`` lists the sections (``metacal``, ``softcal``, ``dece_history``,
    ``reliability_by_objective``); ``spec["ts_files"]`` maps model -> fitted ``ts`` JSON (the
    temperature column), ``spec["histories"]`` model -> history CSV and ``spec["reliability"]``
    model -> uncalibrated reliability diagram PNG (one per objective is shown: its first seed).
    """
    from calbench.report import studies as S  # lazy: code inputs

    wanted = list(spec.get("studies") or [])
    out = {"tables": [], "dece": None, "dece_figure": "", "reliability": []}
    if not wanted:
        return out
    models = spec.get("models", {})
    dl = dataset_labels(spec)
    if "metacal" in wanted:
        temps = {m: fitted_temperature(p) for m, p in (spec.get("ts_files") or {}).items()}
        out["tables"] += S.metacal_tables(rows, models, temperatures=temps, dataset_labels=dl)
    if "softcal" in wanted:
        out["tables"] += S.softcal_tables(rows, models, dataset_labels=dl)
    if "dece_history" in wanted and spec.get("histories"):
        labels = {m: model_label(m, (v or {}).get("display")) for m, v in models.items()}
        dece = S.dece_history(spec["histories"], labels)
        if dece is not None:
            out["dece"] = {
                "rows": [
                    {
                        **r,
                        "pearson": f"{r['pearson']:.3f}",
                        "spearman": f"{r['spearman']:.3f}",
                        "last_ece": format_value("ece", r["last_ece"]),
                        "last_dece": format_value("dece", r["last_dece"]),
                    }
                    for r in dece["rows"]
                ],
                "pooled": [f"{x:.3f}" for x in dece["pooled"]],
            }
            out["dece_figure"] = "data:image/png;base64," + base64.b64encode(
                S.dece_figure_png(dece["points"])
            ).decode("ascii")
    if "reliability_by_objective" in wanted and spec.get("reliability"):
        groups = S.objective_groups(models, set(spec["reliability"]))
        for (d, name, loss), members in groups.items():
            out["reliability"].append(
                {
                    "label": f"{dl.get(d, d)} {name}" + (f" ({loss})" if loss else ""),
                    "src": png_data_uri(spec["reliability"][members[0]]),
                }
            )
    return out
