"""The self-contained HTML report: Jinja2 template, tables, embedded figures and provenance.

The report gathers the study's result tables (Vasilev 2021 tables 1-14 layout, see
:mod:`calbench.report.tables`), the per-model reliability-diagram grids (Guo et al. 2017,
fig. 1 style, embedded as base64 PNG so the file stands alone), the paired-bootstrap comparison of
calibrators and the provenance of the run (configuration, package versions, data hashes).
The Jinja2 environment autoescapes every value, so names from the configuration are shown as
text, never interpreted as HTML.
"""

from __future__ import annotations

import base64
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path

from calbench.report import tables as T

#: Distributions whose versions the provenance section lists (read from metadata, not imported).
PACKAGES = (
    "calbench",
    "numpy",
    "scipy",
    "scikit-learn",
    "torch",
    "torchvision",
    "matplotlib",
    "jinja2",
    "snakemake",
)


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str]:
    """Installed version of each distribution (``"not installed"`` if missing)."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def png_data_uri(path: str | os.PathLike) -> str:
    """``data:image/png;base64,...`` for a PNG file (refuses anything that is not a PNG)."""
    data = Path(path).read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError(f"{path} is not a PNG file; regenerate it with calbench plot-reliability")
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def model_label(name: str, display: Mapping | None) -> str:
    """Row label of a model: ``display.name`` plus ``(display.loss)`` when given."""
    display = display or {}
    label = str(display.get("name") or name)
    if display.get("loss"):
        label += f" ({display['loss']})"
    if display.get("seed") is not None:
        label += f" seed {display['seed']}"
    return label


def build_tables(rows: Sequence[Mapping], spec: Mapping) -> dict:
    """Every table of the study from long rows and the study ``spec`` (see cli/report.py).

    Returns ``{"metrics": [Table...], "losses": [Table...]}`` in the order of the spec.
    """
    models = spec.get("models", {})
    calibrators = spec.get("calibrators", {})
    datasets = spec.get("datasets", {})
    present_models = {r["model"] for r in rows}
    present_methods = {r["method"] for r in rows}
    model_order = [m for m in models if m in present_models] or None
    method_order = [c for c in calibrators if c in present_methods] or None
    labels = {
        m: [
            str((datasets.get(v.get("dataset"), {}) or {}).get("display") or v.get("dataset", "")),
            model_label(m, v.get("display")),
        ]
        for m, v in models.items()
    }
    method_labels = {c: str((v or {}).get("display") or c) for c, v in calibrators.items()}
    available = {r["metric"] for r in rows}
    metric_names = [m for m in spec.get("table_metrics") or sorted(available) if m in available]
    out = {"metrics": [], "losses": []}
    for metric in metric_names:
        out["metrics"].append(
            T.metric_table(
                rows,
                metric,
                models=model_order,
                methods=method_order,
                model_labels=labels,
                method_labels=method_labels,
            )
        )
    displays = {m: (v.get("display") or {}) for m, v in models.items() if m in present_models}
    dataset_labels = {d: str((v or {}).get("display") or d) for d, v in datasets.items()}
    if any(d.get("loss") for d in displays.values()):
        for metric in spec.get("losses_metrics") or ["ece", "cwece"]:
            if metric in available:
                out["losses"].append(
                    T.losses_table(rows, metric, displays, dataset_labels=dataset_labels)
                )
    return out


def build_context(
    *,
    rows: Sequence[Mapping],
    compare: Sequence[Mapping],
    spec: Mapping,
    grids: Mapping[str, str],
    provenance: Mapping,
    reference: Sequence[Mapping] | None = None,
) -> dict:
    """Everything the template needs, as plain data (strings, lists, dicts)."""
    tables = build_tables(rows, spec)
    models = spec.get("models", {})
    compare_rows = []
    for r in compare:
        m = r["metric"]
        compare_rows.append(
            {
                "dataset": r["dataset"],
                "model": model_label(r["model"], (models.get(r["model"]) or {}).get("display")),
                "metric": m,
                "method": r["method"],
                "baseline": r["baseline"],
                "value": T.format_value(m, float(r["value"])),
                "baseline_value": T.format_value(m, float(r["baseline_value"])),
                "difference": T.format_value(m, float(r["difference"])),
                "ci": f"[{T.format_value(m, float(r['ci_low']))}, {T.format_value(m, float(r['ci_high']))}]",
                "p_value": f"{float(r['p_value']):.3f}",
                "significant": float(r["ci_low"]) > 0 or float(r["ci_high"]) < 0,
            }
        )
    ref_rows = []
    for r in reference or []:
        m = r["metric"]
        ref_rows.append(
            {
                **{k: r[k] for k in ("dataset", "method", "metric")},
                "model": model_label(r["model"], (models.get(r["model"]) or {}).get("display")),
                "ours": T.format_value(m, r["ours"]),
                "theirs": T.format_value(m, r["theirs"]),
                "difference": T.format_value(m, r["difference"]),
                "tolerance": "" if r["tolerance"] is None else T.format_value(m, r["tolerance"]),
                "within": r["within"],
            }
        )
    figures = [
        {
            "model": model_label(
                key.split("/", 1)[-1], (models.get(key.split("/", 1)[-1]) or {}).get("display")
            ),
            "key": key,
            "src": png_data_uri(path),
        }
        for key, path in grids.items()
    ]
    return {
        "studies": study_sections(rows, spec),
        "title": spec.get("title") or "Calibration study",
        "description": spec.get("description") or "",
        "protocol": spec.get("protocol") or {},
        "metric_tables": tables["metrics"],
        "losses_tables": tables["losses"],
        "compare": compare_rows,
        "reference": ref_rows,
        "figures": figures,
        "provenance": provenance,
        "n_models": len({r["model"] for r in rows}),
        "n_methods": len({r["method"] for r in rows}),
    }


def fitted_temperature(path) -> float:
    """Temperature ``T`` of a fitted ``ts`` / ``ts_sbece`` calibrator JSON."""
    from calbench.calibrators import load_calibrator

    cal = load_calibrator(path)
    if not hasattr(cal, "temperature_"):
        raise ValueError(f"{path} is not a temperature-scaling calibrator; pass a ts JSON file")
    return float(cal.temperature_)


def study_sections(rows: Sequence[Mapping], spec: Mapping) -> dict:
    """Sections of the calibration-during-training studies (:mod:`calbench.report.studies`).

    ``spec["studies"]`` lists the sections (``metacal``, ``softcal``, ``dece_history``,
    ``reliability_by_objective``); ``spec["ts_files"]`` maps model -> fitted ``ts`` JSON (the
    temperature column), ``spec["histories"]`` model -> history CSV and ``spec["reliability"]``
    model -> uncalibrated reliability diagram PNG (one per objective is shown: its first seed).
    """
    from calbench.report import studies as S

    wanted = list(spec.get("studies") or [])
    out = {"tables": [], "dece": None, "dece_figure": "", "reliability": []}
    if not wanted:
        return out
    models = spec.get("models", {})
    datasets = spec.get("datasets", {})
    dl = {d: str((v or {}).get("display") or d) for d, v in datasets.items()}
    if "metacal" in wanted:
        temps = {m: fitted_temperature(p) for m, p in (spec.get("ts_files") or {}).items()}
        out["tables"] += S.metacal_tables(rows, models, temperatures=temps, dataset_labels=dl)
    if "softcal" in wanted:
        out["tables"] += S.softcal_tables(rows, models, dataset_labels=dl)
    if "dece_history" in wanted and spec.get("histories"):
        labels = {m: model_label(m, (v or {}).get("display")) for m, v in models.items()}
        for _m, v in models.items():
            seed = ((v or {}).get("display") or {}).get("seed")
            if seed is not None:
                pass
        dece = S.dece_history(spec["histories"], labels)
        if dece is not None:
            out["dece"] = {
                "rows": [
                    {
                        **r,
                        "pearson": f"{r['pearson']:.3f}",
                        "spearman": f"{r['spearman']:.3f}",
                        "last_ece": T.format_value("ece", r["last_ece"]),
                        "last_dece": T.format_value("dece", r["last_dece"]),
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


def render_html(template_path: str | os.PathLike, context: Mapping) -> str:
    """Render ``template_path`` with Jinja2 (autoescape on, undefined names are errors)."""
    import jinja2

    path = Path(template_path)
    if not path.is_file():
        raise FileNotFoundError(f"report template {path} does not exist; pass --template PATH")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(path.parent)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    try:
        return env.get_template(path.name).render(**context)
    except jinja2.TemplateError as exc:
        raise ValueError(f"report template {path} failed to render: {exc}") from exc
