"""The study's tables and report from the evaluated results: steps ``aggregate`` and
``render-report``.

:func:`aggregate` concatenates the per-(model, calibrator) metric CSVs and per-model comparison
CSVs into one long CSV each and writes every table (:mod:`calbench.report.tables`). It is
strict: a missing, empty, truncated or NaN-holding result file, or a (model, calibrator) of the
spec without its metrics, is an error naming the file, so a "–" in a table means only "not
computed by design" (e.g. a metric without an interval);
:func:`render_report` renders the self-contained HTML report (:mod:`calbench.report.render`) with
its provenance (:func:`data_provenance`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from calbench.calibrators.scaling import fitted_temperature
from calbench.io import array_digest, atomic_write_text
from calbench.report import tables as T
from calbench.report.context import build_tables
from calbench.report.over_models import read_over_models, study_over_models
from calbench.report.provenance import package_versions, run_provenance
from calbench.report.published import read_reference_table, reference_comparison
from calbench.report.sections import Section
from calbench.results import (
    COMPARE_COLUMNS,
    IMPROVEMENT_COLUMNS,
    METRIC_COLUMNS,
    REFERENCE_COLUMNS,
    REFERENCE_TABLE_COLUMNS,
    ROBUSTNESS_COLUMNS,
    WIN_RATE_COLUMNS,
    read_long_csv,
    write_long_csv,
)
from calbench.split import HALVES


def _sort_rows(rows: list[dict], spec: dict) -> list[dict]:
    """Order rows by config order of models and calibrators, then half, then metric order."""
    models = {m: i for i, m in enumerate(spec.get("models", {}))}
    methods = {m: i for i, m in enumerate(spec.get("calibrators", {}))}
    metrics = {m: i for i, m in enumerate(spec.get("table_metrics") or [])}
    halves = {h: i for i, h in enumerate(HALVES)}
    big = 1 << 30

    def key(r):
        return (
            r["dataset"],
            models.get(r["model"], big),
            r["model"],
            methods.get(r["method"], big),
            r["method"],
            halves.get(r.get("half"), big),
            metrics.get(r["metric"], big),
            r["metric"],
            r.get("baseline", ""),
        )

    return sorted(rows, key=key)


def _load_reference(path, spec: dict) -> list[dict]:
    rows = read_long_csv([path], required=REFERENCE_COLUMNS)
    rename = (spec.get("reference") or {}).get("rename") or {}
    for r in rows:
        for col, key in (
            ("model", "models"),
            ("method", "methods"),
            ("metric", "metrics"),
            ("dataset", "datasets"),
        ):
            r[col] = (rename.get(key) or {}).get(r[col], r[col])
    return rows


def _check_complete(rows: list[dict], spec: dict) -> None:
    """Every (model, calibrator) of the spec has rows, holding every table metric: a missing
    per-job CSV is an error naming it, never a silent "–" in the tables."""
    have: dict[tuple[str, str], set[str]] = {}
    for r in rows:
        have.setdefault((r["model"], r["method"]), set()).add(r["metric"])
    wanted = list(spec.get("table_metrics") or [])
    for model, m in (spec.get("models") or {}).items():
        dataset = (m or {}).get("dataset", "{dataset}")
        for method in spec.get("calibrators") or {}:
            got = have.get((model, method))
            path = f"results/metrics/{dataset}/{model}/{method}.csv"
            if got is None:
                raise ValueError(
                    f"no metrics for model {model} with calibrator {method}: {path} is not among "
                    "the inputs; pass it (rerun calbench evaluate if it is missing)"
                )
            lost = [x for x in wanted if x not in got]
            if lost:
                raise ValueError(
                    f"{path} lacks the table metric(s) {lost}; rerun calbench evaluate with them"
                )


def aggregate(
    metrics_csvs, compare_csvs, spec: dict, out_csv, out_compare, tables_dir, reference_csv=None
) -> list[str]:
    """Concatenate results and write every table; returns the table files written."""
    rows = []
    for path in metrics_csvs:
        got = read_long_csv([path])
        if not got:
            raise ValueError(
                f"{path} holds no rows (an interrupted write?); rerun calbench evaluate"
            )
        rows += got
    rows = _sort_rows(rows, spec)
    if not rows:
        raise ValueError("the metrics CSVs hold no rows; rerun calbench evaluate")
    keys = [(r["dataset"], r["model"], r["method"], r["half"], r["metric"]) for r in rows]
    if len(set(keys)) != len(keys):
        raise ValueError(
            "the metrics CSVs repeat a (dataset, model, method, half, metric) row; pass each file once"
        )
    _check_complete(rows, spec)
    write_long_csv(out_csv, rows, METRIC_COLUMNS)
    comp = (
        _sort_rows(read_long_csv(compare_csvs, required=COMPARE_COLUMNS), spec)
        if compare_csvs
        else []
    )
    if out_compare:
        for r in comp:
            for k in ("baseline_value", "difference", "p_value"):
                r[k] = float(r[k])
        write_long_csv(out_compare, comp, COMPARE_COLUMNS)
    written = []
    tables_dir = Path(tables_dir)
    built = build_tables(rows, spec)
    for table in built["metrics"]:
        written += T.write_table(table, tables_dir / table.metric)
    for table in built["losses"]:
        written += T.write_table(table, tables_dir / f"losses_{table.metric}")
    over = study_over_models(rows, spec)  # studies of 5 models or more; a header alone below
    for name, columns in (("win_rates", WIN_RATE_COLUMNS), ("improvement", IMPROVEMENT_COLUMNS)):
        path = tables_dir / f"{name}.csv"
        write_long_csv(path, over[name] if over else [], columns)
        written.append(str(path))
    if reference_csv:
        ref = spec.get("reference") or {}
        cmp = reference_comparison(
            rows,
            _load_reference(reference_csv, spec),
            tolerances=ref.get("tolerances"),
            units=ref.get("units", "fraction"),
        )
        path = tables_dir / "reference.csv"
        write_long_csv(path, cmp, REFERENCE_TABLE_COLUMNS)
        written.append(str(path))
    return written


def data_provenance(manifests, logits, splits) -> dict:
    """Hashes identifying the data: dataset manifests, logits content, split indices."""
    import numpy as np

    out = {"datasets": [], "logits": [], "splits": []}
    for path in manifests or []:
        text = Path(path).read_text()
        try:
            content = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{path} is not a JSON manifest; rerun calbench download-dataset"
            ) from exc
        out["datasets"].append(
            {"path": str(path), "content": json.dumps(content, indent=1, sort_keys=True)}
        )
    for path in logits or []:
        with np.load(path, allow_pickle=False) as d:
            out["logits"].append(
                {
                    "path": str(path),
                    "shape": "x".join(map(str, d["logits"].shape)),
                    "content_sha256": array_digest(d["logits"], d["labels"]),
                    "order_hash": str(d["order_hash"]) if "order_hash" in d.files else "",
                }
            )
    from calbench.logits_sources import describe_source  # lazy: code inputs

    for row in out["logits"]:  # source: logits models: the file, its checksum and pin status
        side = Path(row["path"]).with_suffix(".source.json")
        row["source"] = describe_source(json.loads(side.read_text())) if side.is_file() else ""
    for path in splits or []:
        with np.load(path, allow_pickle=False) as d:
            out["splits"].append(
                {
                    "path": str(path),
                    "sizes": f"{len(d['val_idx'])} / {len(d['test_idx'])}",
                    "val_sorted_sha256": str(d["val_sorted_sha256"])
                    if "val_sorted_sha256" in d.files
                    else "",
                    "test_order_sha256": str(d["test_order_sha256"])
                    if "test_order_sha256" in d.files
                    else "",
                }
            )
    return out


def checksum_summary(config) -> dict:
    """Downloads without a published checksum (pinned on first use or not pinned)."""
    from calbench.logits_sources import plan_files  # lazy: code inputs
    from calbench.models.pretrained import checksum_provenance  # lazy: code inputs

    planners = {"logits": plan_files}
    return checksum_provenance(config, planners) if config else {"published": 0, "files": []}


def _grid_key(path) -> str:
    """``dataset/model`` from ``.../{dataset}/{model}/grid.png``."""
    p = Path(path)
    return f"{p.parent.parent.name}/{p.parent.name}"


def _model_of(path) -> str:
    """``model`` from ``.../{dataset}/{model}/{file}``."""
    return Path(path).parent.name


def _plot_files(paths) -> dict:
    """``{dataset/model: {calibrator: png}}`` from ``.../{dataset}/{model}/{calibrator}.png``
    (grids left out), in the order given."""
    out: dict = {}
    for path in paths or []:
        p = Path(path)
        if p.stem != "grid":
            out.setdefault(_grid_key(p), {})[p.stem] = str(p)
    return out


@dataclass(frozen=True)
class ReportInputs:
    """What the report is rendered from (the ``render_report`` rule's inputs, the
    ``render-report`` verb's options): ``metrics`` and ``compare`` the aggregated CSVs,
    ``spec`` the study spec (:mod:`calbench.report.spec`), ``config`` the full configuration
    (provenance), ``grids`` and ``plots`` the reliability diagrams, ``manifests``, ``logits``
    and ``splits`` the data to hash, ``reference_table`` the ours-versus-published CSV
    :func:`aggregate` wrote (``results/tables/reference.csv``, read rather than recomputed),
    ``sections`` the section files of other steps (shift-report's ``section.json``),
    ``ts_files`` the fitted temperatures, ``run_info`` what the workflow knows of the run
    (:data:`calbench.report.provenance.RUN_INFO_KEYS`), ``robustness`` the per-model CSVs of
    :mod:`calbench.stats.robustness`, ``over_models`` the win-rate and improvement CSVs of
    :func:`aggregate` (:func:`calbench.report.over_models.read_over_models`), ``arena`` the
    per-model CSVs of ``calbench compare-implementations`` (:mod:`calbench.report.arena`) and
    ``partitions`` the per-model partition CSVs of a cross-fitted study
    (:mod:`calbench.report.partitions`)."""

    metrics: str
    spec: Mapping
    compare: str | None = None
    config: Mapping | None = None
    grids: Sequence = ()
    manifests: Sequence = ()
    logits: Sequence = ()
    splits: Sequence = ()
    reference_table: str | None = None
    sections: Sequence = ()
    plots: Sequence = ()
    ts_files: Sequence = ()
    run_info: Mapping | None = None
    robustness: Sequence = ()
    arena: Sequence = ()
    over_models: Sequence | None = None
    partitions: Sequence = ()


def render_report(inputs: ReportInputs, out) -> None:
    """Render the HTML report of ``inputs`` to ``out``: one context pass
    (:func:`calbench.report.context.build_context`), one renderer
    (:func:`calbench.report.render.render_html`)."""
    from calbench.report import render  # lazy: code inputs
    from calbench.report.arena import arena_context  # lazy: code inputs
    from calbench.report.context import build_context  # lazy: code inputs
    from calbench.report.partitions import partitions_view, read_partition_rows  # lazy: code inputs
    from calbench.report.ranks import metric_name  # lazy: code inputs

    spec = inputs.spec
    rows = read_long_csv([inputs.metrics])
    comp = read_long_csv([inputs.compare], required=COMPARE_COLUMNS) if inputs.compare else []
    # ours versus published: computed once by aggregate (results/tables/reference.csv)
    reference = read_reference_table(inputs.reference_table) if inputs.reference_table else None
    import yaml

    config = inputs.config
    provenance = {
        "run": run_provenance(inputs.run_info),
        "config": yaml.safe_dump(config, sort_keys=False) if config is not None else "",
        "packages": package_versions(),
        **data_provenance(inputs.manifests, inputs.logits, inputs.splits),
        "checksums": checksum_summary(config),
    }
    context = build_context(
        rows=rows,
        compare=comp,
        spec=spec,
        grids={_grid_key(g): g for g in inputs.grids or []},
        provenance=provenance,
        reference=reference,
        plots=_plot_files(inputs.plots),
        temperatures={_model_of(p): fitted_temperature(p) for p in inputs.ts_files or []},
        robustness=read_robustness_rows(
            inputs.robustness, (spec.get("protocol") or {}).get("n_bootstrap")
        ),
        extra_sections=[read_section(p) for p in inputs.sections or []],
        arena=arena_context(list(inputs.arena or []), spec.get("models"), metric_name),
        over_models=read_over_models(*inputs.over_models) if inputs.over_models else None,
        partitions=partitions_view(read_partition_rows(inputs.partitions or []), spec),
        report_dir=os.path.dirname(os.path.abspath(out)),
    )
    atomic_write_text(out, render.render_html(context))


def read_section(path) -> Section:
    """A section another step computed (``section.json`` of shift-report:
    ``{"id", "title", "template", "data"}``, :func:`calbench.report.shift.section_file`)."""
    try:
        got = json.loads(Path(path).read_text())
        section = Section(got["id"], got["title"], got["template"], data=got["data"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"{path} is not a report section file ({exc!r}); rerun the step that wrote it"
        ) from None
    partials = section_templates()
    if section.template not in partials:
        raise ValueError(
            f"{path} names the section template {section.template!r}, not one of {partials}; "
            "rerun the step that wrote it"
        )
    if not (isinstance(section.id, str) and re.fullmatch(r"[a-z][a-z0-9-]*", section.id)):
        raise ValueError(f"{path}: section id {section.id!r} is not a lower-case anchor name")
    if not isinstance(section.title, str):
        raise ValueError(f"{path}: section title {section.title!r} is not text")
    return section


def section_templates() -> list[str]:
    """The section partials (files of ``calbench/templates/report/sections/``)."""
    from calbench.pages import environment  # lazy: code inputs

    prefix = "report/sections/"
    return sorted(n[len(prefix) :] for n in environment().list_templates() if n.startswith(prefix))


def read_robustness_rows(paths, n_bootstrap=None) -> list[dict] | None:
    """The rows of the ``results/robustness/...`` CSVs (:func:`calbench.stats.robustness.robustness_rows`),
    as strict as every other result file (:func:`calbench.results.read_long_csv`): every
    rank and value a finite number, ``p_first`` blank except for the default variant, where it
    is blank only when the study draws no resamples (``n_bootstrap`` 0: "no intervals")."""
    if not paths:
        return None
    from calbench.stats.robustness import DEFAULT_VARIANT  # lazy: code inputs

    rows = read_long_csv(
        paths,
        ROBUSTNESS_COLUMNS,
        numeric=("value", "rank", "p_first", "p_runner_up"),
        blank_ok=("p_first", "p_runner_up"),
        empty_ok=False,
    )
    for r in rows:
        if r["variant"] == DEFAULT_VARIANT and r["p_first"] != r["p_first"] and n_bootstrap != 0:
            raise ValueError(
                f"robustness of {r['dataset']}/{r['model']}: {r['method']} has no first-place "
                f"probability for {DEFAULT_VARIANT}; rerun the calibrate step"
            )
    return rows
