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

import html
import json
import re
from pathlib import Path

from calbench.calibrators.scaling import fitted_temperature
from calbench.io import array_digest, atomic_write_text
from calbench.report import tables as T
from calbench.report.context import build_tables
from calbench.report.over_models import study_over_models
from calbench.report.provenance import package_versions, run_provenance
from calbench.report.published import read_reference_table, reference_comparison
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
    over = study_over_models(rows, spec)  # studies of 5 models or more
    for name, columns in (("win_rates", WIN_RATE_COLUMNS), ("improvement", IMPROVEMENT_COLUMNS)):
        path = tables_dir / f"{name}.csv"
        if over is None:  # no file of an earlier, larger study left behind
            path.unlink(missing_ok=True)
            continue
        write_long_csv(path, over[name], columns)
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
    from calbench.models.pretrained import checksum_provenance  # lazy: code inputs

    return checksum_provenance(config) if config else {"published": 0, "files": []}


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


def render_report(
    template,
    metrics_csv,
    compare_csv,
    spec: dict,
    grids,
    out,
    *,
    config=None,
    manifests=(),
    logits=(),
    splits=(),
    reference_table=None,
    sections=(),
    plots=(),
    ts_files=(),
    run_info=None,
    robustness=(),
    arena=(),
    partitions=(),
) -> None:
    """Render the HTML report to ``out``; ``reference_table`` is the ours-versus-published CSV
    :func:`aggregate` wrote (``results/tables/reference.csv``), read rather than recomputed;
    ``run_info`` what the workflow knows of the run
    (:data:`calbench.report.provenance.RUN_INFO_KEYS`); ``robustness`` the per-model CSVs of
    :mod:`calbench.stats.robustness` (the section on whether the conclusions survive other evaluation
    choices); ``arena`` the per-model CSVs of ``calbench compare-implementations``
    (:mod:`calbench.report.arena`: implementations of one method side by side)."""
    from calbench.report import render  # lazy: code inputs
    from calbench.report.partitions import add_partitions  # lazy: code inputs

    rows = read_long_csv([metrics_csv])
    comp = read_long_csv([compare_csv], required=COMPARE_COLUMNS) if compare_csv else []
    # ours versus published: computed once by aggregate (results/tables/reference.csv)
    reference = read_reference_table(reference_table) if reference_table else None
    import yaml

    provenance = {
        "run": run_provenance(run_info),
        "config": yaml.safe_dump(config, sort_keys=False) if config is not None else "",
        "packages": package_versions(),
        **data_provenance(manifests, logits, splits),
        "checksums": checksum_summary(config),
    }
    context = render.build_context(
        rows=rows,
        compare=comp,
        spec=spec,
        grids={_grid_key(g): g for g in grids or []},
        provenance=provenance,
        reference=reference,
        plots=_plot_files(plots),
        temperatures={_model_of(p): fitted_temperature(p) for p in ts_files or []},
        robustness=read_robustness_rows(
            robustness, (spec.get("protocol") or {}).get("n_bootstrap")
        ),
    )
    # extra sections: HTML fragments escaped by the calbench step that wrote them (shift-report)
    from markupsafe import Markup

    context["extra_sections"] = [Markup(Path(p).read_text()) for p in sections or []]
    _add_sections_to_toc(context)
    add_arena(context, arena, spec)
    add_partitions(context, partitions, spec)  # cross-fitted studies: the partitions' spread
    atomic_write_text(out, render.render_html(template, context))


def add_arena(context: dict, paths, spec: dict) -> None:
    """``context["arena"]`` from the compare-implementations CSVs (``None`` without), and its
    contents entry before the protocol, where the template puts the section."""
    from calbench.report.arena import arena_context  # lazy: code inputs
    from calbench.report.ranks import metric_name  # lazy: code inputs

    context["arena"] = arena_context(list(paths or []), spec.get("models"), metric_name)
    toc = context.get("toc")
    if context["arena"] and toc is not None:
        at = next((i for i, e in enumerate(toc) if e.get("id") == "protocol"), len(toc))
        toc.insert(at, {"id": "arena", "title": "Implementations side by side", "children": []})


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


def _add_sections_to_toc(context: dict) -> None:
    """Contents entries for the extra sections (``<section id="x"><h2>Title</h2>``), placed
    before the protocol, where the template puts the sections."""
    toc = context.get("toc")
    if toc is None:
        return
    at = next((i for i, e in enumerate(toc) if e.get("id") == "protocol"), len(toc))
    for text in context["extra_sections"]:
        m = re.match(r'\s*<section id="([^"]+)">\s*<h2>([^<]*)</h2>', str(text))
        if m:
            toc.insert(at, {"id": m.group(1), "title": html.unescape(m.group(2)), "children": []})
            at += 1
