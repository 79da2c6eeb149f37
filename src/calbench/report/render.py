"""The self-contained HTML report: findings first, tables, figures and provenance.

The report opens on a summary computed from the results (:mod:`calbench.report.summary`:
winner counts, average ranks with the Friedman test and a critical-difference diagram after
Demšar 2006, headline findings and anomalies), then the result tables (rows = models, columns =
calibrators; :mod:`calbench.report.tables`), the fitted temperatures, the paired comparisons
(Holm-adjusted p-values), the reliability diagrams (Guo et al. 2017, fig. 1; uncalibrated,
temperature scaling and the model's best calibrator shown, the rest one click away) and the
provenance of the run. Every figure is embedded (base64 PNG or SVG) and every table carries its
CSV as a ``data:`` URI, so the single file works offline. The Jinja2 environment autoescapes
every value: names from the configuration are shown as text, never interpreted as HTML.
"""

from __future__ import annotations

import base64
import csv
import io
import math
import os
import platform
import re
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

    Returns ``{"metrics": [Table...], "losses": [Table...], "losses_ts": [Table...]}`` in the
    order of the spec: the by-loss tables of the uncalibrated models and after temperature
    scaling (``losses_ts``, shown in the report; ``calbench aggregate`` writes ``losses``).
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
    out["losses_ts"] = []
    if any(d.get("loss") for d in displays.values()):
        for metric in spec.get("losses_metrics") or ["ece", "cwece"]:
            if metric in available:
                out["losses"].append(
                    T.losses_table(
                        rows,
                        metric,
                        displays,
                        dataset_labels=dataset_labels,
                        method_label=method_labels.get("uncalibrated", "uncalibrated"),
                    )
                )
                if "ts" in present_methods:
                    out["losses_ts"].append(
                        T.losses_table(
                            rows,
                            metric,
                            displays,
                            method="ts",
                            dataset_labels=dataset_labels,
                            method_label=method_labels.get("ts", "ts"),
                        )
                    )
    return out


#: The works the report cites (author-year keys in the text); no URLs, the report fetches nothing.
BIBLIOGRAPHY = {
    "Davison & Hinkley 1997": "A. C. Davison, D. V. Hinkley. Bootstrap Methods and their "
    "Application. Cambridge University Press, 1997.",
    "Demšar 2006": "J. Demšar. Statistical comparisons of classifiers over multiple data sets. "
    "Journal of Machine Learning Research 7, 2006.",
    "Guo et al. 2017": "C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger. On calibration of modern "
    "neural networks. ICML 2017.",
    "Holm 1979": "S. Holm. A simple sequentially rejective multiple test procedure. Scandinavian "
    "Journal of Statistics 6, 1979.",
    "Kull et al. 2019": "M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song, "
    "P. Flach. Beyond temperature scaling: obtaining well-calibrated multiclass probabilities "
    "with Dirichlet calibration. NeurIPS 2019.",
    "Kumar et al. 2019": "A. Kumar, P. Liang, T. Ma. Verified uncertainty calibration. "
    "NeurIPS 2019.",
    "Naeini et al. 2015": "M. P. Naeini, G. F. Cooper, M. Hauskrecht. Obtaining well calibrated "
    "probabilities using Bayesian binning. AAAI 2015.",
    "Roelofs et al. 2022": "R. Roelofs, N. Cain, J. Shlens, M. C. Mozer. Mitigating bias in "
    "calibration error estimation. AISTATS 2022.",
    "Vasilev 2021": "Post-hoc calibration of neural networks: the protocol this workflow "
    "reproduces (coursework, Moscow State University, 2021).",
}

#: What the fields of a dataset manifest mean (provenance section).
MANIFEST_FIELDS = {
    "source": "where the file came from: a mirror path, 'download', or 'existing' (already "
    "in place and re-verified)",
    "sha256": "pinned SHA-256 of the decompressed file; the file was refused unless it matched",
    "bytes": "size of the decompressed file",
    "gz_md5": "MD5 of the .gz archive the file was decompressed from",
    "gz_md5_matches_torchvision": "whether that archive is byte-identical to the one "
    "torchvision downloads. 'false' is harmless: the archive was recompressed (e.g. by a "
    "Linux distribution), but the decompressed content matched the pinned SHA-256",
    "n": "number of samples in the split",
    "label_counts": "samples per class (checked against the published class balance)",
    "order_hash": "hash of the samples in their order: logits and splits made from other files "
    "or another order are refused",
    "manifest_sha256": "SHA-256 over the pinned file hashes: one fingerprint of the dataset",
    "torchvision_class": "the torchvision class that reads the files",
    "root": "folder of the files",
    "dataset": "dataset name",
}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "table"


def csv_data_uri(text: str) -> str:
    """``data:text/csv`` URI of ``text`` (UTF-8, base64): a download link that works offline."""
    return "data:text/csv;charset=utf-8;base64," + base64.b64encode(text.encode()).decode("ascii")


def _csv(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _cell(text, sort=None, **extra) -> dict:
    """A table cell for the template: ``text``; ``sort`` (number) orders numeric columns."""
    out = {"text": str(text), "sort": "" if sort is None else repr(float(sort))}
    out.update({"ci": "", "bold": False, "mark": "", "bad": False})
    out.update(extra)
    return out


def table_view(
    key: str,
    title: str,
    header: Sequence[str],
    rows: Sequence[Sequence[dict]],
    *,
    n_labels: int,
    caption: str = "",
    csv_text: str | None = None,
) -> dict:
    """Everything the template needs to draw one sortable, downloadable table.

    Label columns (the first ``n_labels``) holding one value in every row are dropped and named
    in the caption instead (no constant columns); ``csv_text`` (default: the printed cells,
    all columns) becomes the table's download link.
    """
    header = list(header)
    if csv_text is None:
        csv_text = _csv(header, [[c["text"] for c in r] for r in rows])
    keep = list(range(len(header)))
    notes = []
    if len(rows) > 1:
        for c in range(n_labels):
            values = {r[c]["text"] for r in rows}
            if len(values) == 1:
                keep.remove(c)
                notes.append(f"{header[c]}: {next(iter(values))}")
    n_kept_labels = sum(1 for c in keep if c < n_labels)
    return {
        "key": key,
        "id": f"t-{_slug(key)}",
        "title": title,
        "caption": caption,
        "constant": "; ".join(notes),
        "header": [header[c] for c in keep],
        "numeric": [c >= n_labels for c in keep],
        "n_labels": n_kept_labels,
        "rows": [[r[c] for c in keep] for r in rows],
        "csv": csv_data_uri(csv_text),
        "csv_name": f"{_slug(key)}.csv",
    }


def metric_view(table: T.Table, key: str) -> dict:
    """A metric table (models x calibrators) as a :func:`table_view`; estimates outside their
    interval are marked with a dagger."""
    scale = T.display_spec(table.metric)[0]
    rows = []
    for i in range(len(table.row_keys)):
        cells = [_cell(x) for x in table.row_labels[i]]
        for j in range(len(table.col_keys)):
            v, lo, hi = (float(a[i, j]) for a in (table.values, table.ci_low, table.ci_high))
            outside = math.isfinite(lo) and math.isfinite(hi) and not lo <= v <= hi
            cells.append(
                _cell(
                    table.cell(i, j),
                    v * scale if math.isfinite(v) else None,
                    ci=table.ci(i, j),
                    bold=bool(table.bold[i, j]),
                    mark="†" if outside else "",
                )
            )
        rows.append(cells)
    view = table_view(
        key,
        table.title,
        [*table.row_header, *table.col_labels],
        rows,
        n_labels=len(table.row_header),
        csv_text=T.to_csv(table),
    )
    view["metric"] = table.metric
    return view


def study_view(t) -> dict:
    """A calibration-during-training table (:class:`calbench.report.studies.StudyTable`)."""
    from calbench.report.studies import _display, study_to_csv

    rows = []
    for i, row in enumerate(t.rows()):
        cells = [_cell(x) for x in row["labels"]]
        for j, c in enumerate(row["cells"]):
            v = float(t.mean[i, j])
            scale = _display(t.columns[j].metric)[0]
            cells.append(_cell(c["text"], v * scale if math.isfinite(v) else None, bold=c["bold"]))
        rows.append(cells)
    return table_view(
        t.key,
        t.title,
        [*t.row_header, *t.col_labels],
        rows,
        n_labels=len(t.row_header),
        csv_text=study_to_csv(t),
    )


def _labels(spec: Mapping) -> tuple[dict, dict, dict, dict]:
    """Display names: models (with the dataset when there are several), calibrators, datasets,
    and each model's dataset label."""
    models = spec.get("models", {})
    datasets = spec.get("datasets", {})
    dl = {d: str((v or {}).get("display") or d) for d, v in datasets.items()}
    used = {v.get("dataset") for v in models.values()}
    ml = {}
    for m, v in models.items():
        label = model_label(m, (v or {}).get("display"))
        if len(used) > 1:
            label = f"{dl.get(v.get('dataset'), v.get('dataset'))} {label}"
        ml[m] = label
    cl = {c: str((v or {}).get("display") or c) for c, v in spec.get("calibrators", {}).items()}
    mdl = {m: dl.get(v.get("dataset"), v.get("dataset", "")) for m, v in models.items()}
    return ml, cl, dl, mdl


def compare_view(compare: Sequence[Mapping], spec: Mapping, level: float) -> dict | None:
    """Paired comparisons with Holm-adjusted p-values over all rows of the report."""
    from calbench import stats as S
    from calbench.report.summary import format_p, metric_name

    if not compare:
        return None
    ml, cl, _, mdl = _labels(spec)
    holm = S.holm([float(r["p_value"]) for r in compare])
    rows = []
    for r, p_adj in zip(compare, holm, strict=True):
        m = r["metric"]
        scale = T.display_spec(m)[0]
        d, lo, hi = float(r["difference"]), float(r["ci_low"]), float(r["ci_high"])
        rows.append(
            [
                _cell(mdl.get(r["model"], r["dataset"])),
                _cell(ml.get(r["model"], r["model"])),
                _cell(T.display_spec(m)[2]),
                _cell(cl.get(r["method"], r["method"])),
                _cell(cl.get(r["baseline"], r["baseline"])),
                _cell(T.format_value(m, float(r["value"])), float(r["value"]) * scale),
                _cell(
                    T.format_value(m, float(r["baseline_value"])),
                    float(r["baseline_value"]) * scale,
                ),
                _cell(T.format_value(m, d), d * scale, bold=bool(p_adj < 1 - level)),
                _cell(f"[{T.format_value(m, lo)}, {T.format_value(m, hi)}]", lo * scale),
                _cell(format_p(float(r["p_value"])), float(r["p_value"])),
                _cell(format_p(float(p_adj)), float(p_adj)),
            ]
        )
    header = [
        "Dataset",
        "Model",
        "Metric",
        "Best on validation",
        "Baseline",
        "Best",
        "Baseline value",
        "Difference",
        f"{level * 100:g}% interval",
        "p",
        "p (Holm)",
    ]
    view = table_view("comparisons", "Best calibrator versus baselines", header, rows, n_labels=5)
    view["n"] = len(rows)
    view["resamples"] = sorted({str(r.get("n_resamples", "")) for r in compare} - {""})
    view["metrics"] = sorted({metric_name(r["metric"]) for r in compare})
    view["selected_on"] = sorted({str(r.get("selected_on", "")) for r in compare} - {""})
    return view


def temperature_view(temperatures: Mapping[str, float], spec: Mapping) -> dict | None:
    if not temperatures:
        return None
    ml, _, _, mdl = _labels(spec)
    order = [m for m in spec.get("models", {}) if m in temperatures] or list(temperatures)
    rows = [
        [
            _cell(mdl.get(m, "")),
            _cell(ml.get(m, m)),
            _cell(f"{temperatures[m]:.3f}", temperatures[m]),
        ]
        for m in order
    ]
    return table_view(
        "temperatures",
        "Fitted temperature per model",
        ["Dataset", "Model", "Temperature T"],
        rows,
        n_labels=2,
        caption="T > 1 softens over-confident predictions, T < 1 sharpens under-confident ones.",
    )


def reliability_figures(plots: Mapping, grids: Mapping, rows, spec) -> list[dict]:
    """Per model: the default panels (uncalibrated, temperature scaling and the calibrator with
    the lowest validation ECE) and the others; falls back to the per-model grid."""
    ml, cl, _, _ = _labels(spec)
    order = list(spec.get("calibrators", {}))
    val_ece = {
        (r["model"], r["method"]): float(r["value"])
        for r in rows
        if r["metric"] == "ece" and r.get("half") == "val"
    }
    out = []
    keys = list(plots) or list(grids)
    for key in keys:
        model = key.split("/", 1)[-1]
        entry = {"id": f"rd-{_slug(key)}", "model": ml.get(model, model), "shown": [], "more": []}
        per = plots.get(key) or {}
        if per:
            methods = [c for c in order if c in per] + [c for c in per if c not in order]
            scored = [c for c in methods if (model, c) in val_ece]
            best = min(scored, key=lambda c: val_ece[(model, c)]) if scored else None
            default = [c for c in ("uncalibrated", "ts", best) if c in per]
            default = list(dict.fromkeys(default))
            for c in methods:
                fig = {
                    "label": cl.get(c, c) + (" (lowest validation ECE)" if c == best else ""),
                    "src": png_data_uri(per[c]),
                }
                (entry["shown"] if c in default else entry["more"]).append(fig)
        elif key in grids:
            entry["shown"].append({"label": "all calibrators", "src": png_data_uri(grids[key])})
        out.append(entry)
    return out


def _provenance_view(provenance: Mapping) -> dict:
    """Logits and split hashes with repeated values shown once; manifests as explained fields."""
    logits = [{"source": "", **x} for x in provenance.get("logits") or []]
    orders = {str(x.get("order_hash", "")) for x in logits}
    shared_order = next(iter(orders)) if len(orders) == 1 and len(logits) > 1 else None
    manifests = []
    for d in provenance.get("datasets") or []:
        import json

        try:
            content = json.loads(d["content"])
        except (ValueError, TypeError):
            content = None
        fields = []
        if isinstance(content, dict):
            for path, value in _flatten(content):
                last = path.rsplit(" / ", 1)[-1]
                fields.append(
                    {"field": path, "value": value, "meaning": MANIFEST_FIELDS.get(last, "")}
                )
        manifests.append({"path": d["path"], "fields": fields, "content": d["content"]})
    return {
        "checksums": provenance.get("checksums") or {},
        "logits": logits,
        "shared_order": shared_order,
        "splits": list(provenance.get("splits") or []),
        "manifests": manifests,
    }


def _flatten(d, prefix=""):
    for k, v in d.items():
        path = f"{prefix} / {k}" if prefix else str(k)
        if isinstance(v, dict):
            yield from _flatten(v, path)
        else:
            yield path, (str(v).lower() if isinstance(v, bool) else str(v))


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
) -> dict:
    """Everything the template needs, as plain data (strings, lists, dicts).

    ``plots`` maps ``dataset/model`` to ``{calibrator: reliability PNG}``; ``grids`` maps it to
    the per-model grid PNG (used when ``plots`` lacks the model); ``temperatures`` maps model
    to the fitted temperature of temperature scaling.
    """
    from calbench.report import summary as SU

    tables = build_tables(rows, spec)
    protocol = dict(spec.get("protocol") or {})
    level = float(protocol.get("level", 0.95))
    ml, cl, dl, mdl = _labels(spec)
    present_models = {r["model"] for r in rows}
    present_methods = {r["method"] for r in rows}
    model_order = [m for m in spec.get("models", {}) if m in present_models] or sorted(
        present_models
    )
    method_order = [c for c in spec.get("calibrators", {}) if c in present_methods] or sorted(
        present_methods
    )
    ranked = [t.metric for t in tables["metrics"]]
    ranks = SU.rank_summaries(rows, ranked, model_order, method_order, cl)
    found = SU.findings(rows, ranks, model_order, method_order, ml, cl)
    for entry in ranks:
        fr = entry["friedman"]
        entry["friedman_text"] = (
            ""
            if fr is None
            else f"Friedman χ² = {fr.chi2:.2f}, Iman-Davenport F = "
            + ("∞" if math.isinf(fr.f) else f"{fr.f:.2f}")
            + f", p {SU._p_phrase(fr.p_f)}; Nemenyi critical difference "
            f"{entry['cd']:.2f} (α = {SU.ALPHA})"
        )
    metric_views = [metric_view(t, t.metric) for t in tables["metrics"]]
    losses_views = [metric_view(t, f"losses-uncalibrated-{t.metric}") for t in tables["losses"]]
    losses_views += [metric_view(t, f"losses-ts-{t.metric}") for t in tables["losses_ts"]]
    ref_view = None
    if reference:
        ref_rows = []
        for r in reference:
            m = r["metric"]
            scale = T.display_spec(m)[0]
            within = "–" if r["within"] is None else ("yes" if r["within"] else "no")
            ref_rows.append(
                [
                    _cell(dl.get(r["dataset"], r["dataset"])),
                    _cell(ml.get(r["model"], r["model"])),
                    _cell(cl.get(r["method"], r["method"])),
                    _cell(T.display_spec(m)[2]),
                    _cell(T.format_value(m, r["ours"]), r["ours"] * scale),
                    _cell(T.format_value(m, r["theirs"]), r["theirs"] * scale),
                    _cell(T.format_value(m, r["difference"]), r["difference"] * scale),
                    _cell("" if r["tolerance"] is None else T.format_value(m, r["tolerance"])),
                    _cell(within, bad=within == "no"),
                ]
            )
        ref_view = table_view(
            "published",
            "Ours versus published numbers",
            [
                "Dataset",
                "Model",
                "Calibrator",
                "Metric",
                "Ours",
                "Published",
                "Difference",
                "Tolerance",
                "Within",
            ],
            ref_rows,
            n_labels=4,
        )
    studies = study_sections(rows, spec)
    studies["views"] = [study_view(t) for t in studies["tables"]]
    figures = reliability_figures(plots or {}, grids, rows, spec)
    cmp_view = compare_view(compare, spec, level)
    temp_view = temperature_view(temperatures or {}, spec)
    n_outside = sum(1 for v in metric_views for r in v["rows"] for c in r if c.get("mark"))
    toc = [{"id": "findings", "title": "Findings", "children": []}]
    toc.append({"id": "protocol", "title": "Protocol", "children": []})
    toc.append(
        {
            "id": "tables",
            "title": "Results",
            "children": [
                {"id": v["id"], "title": SU.metric_name(t.metric)}
                for v, t in zip(metric_views, tables["metrics"], strict=True)
            ],
        }
    )
    if temp_view:
        toc.append({"id": "temperatures", "title": "Temperatures", "children": []})
    if losses_views:
        toc.append(
            {
                "id": "losses",
                "title": "By training loss",
                "children": [
                    {"id": v["id"], "title": f"{SU.metric_name(t.metric)}, {method}"}
                    for v, (t, method) in zip(
                        losses_views,
                        [(t, cl.get("uncalibrated", "uncalibrated")) for t in tables["losses"]]
                        + [(t, cl.get("ts", "ts")) for t in tables["losses_ts"]],
                        strict=True,
                    )
                ],
            }
        )
    if cmp_view:
        toc.append({"id": "compare", "title": "Paired comparisons", "children": []})
    if ref_view:
        toc.append({"id": "reference", "title": "Published numbers", "children": []})
    if studies["tables"] or studies["dece"] or studies["reliability"]:
        toc.append({"id": "objectives", "title": "Calibration during training", "children": []})
    toc.append(
        {
            "id": "diagrams",
            "title": "Reliability diagrams",
            "children": [{"id": f["id"], "title": f["model"]} for f in figures],
        }
    )
    toc.append({"id": "provenance", "title": "Provenance", "children": []})
    toc.append({"id": "bibliography", "title": "References", "children": []})
    return {
        "studies": studies,
        "title": spec.get("title") or "Calibration study",
        "description": spec.get("description") or "",
        "protocol": protocol,
        "level_pct": f"{level * 100:g}",
        "metric_tables": metric_views,
        "losses_tables": losses_views,
        "compare": cmp_view,
        "reference": ref_view,
        "temperatures": temp_view,
        "figures": figures,
        "ranks": ranks,
        "findings": found,
        "n_outside": n_outside,
        "provenance": {**provenance, **_provenance_view(provenance)},
        "bibliography": BIBLIOGRAPHY,
        "toc": toc,
        "n_models": len(present_models),
        "n_methods": len(present_methods),
        "methods": [cl.get(c, c) for c in method_order],
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
