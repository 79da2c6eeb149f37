"""A cross-fitted study in the report: the tables, ranks and findings read its out-of-fold rows,
the protocol states the scheme and its estimand, and the spread over partitions is shown."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest

from calbench.report import render
from calbench.report.context import build_context
from calbench.report.partitions import partitions_view, read_partition_rows, scheme_protocol
from calbench.report.provenance import package_versions
from calbench.results import PARTITION_COLUMNS, write_long_csv

WORKFLOW = Path(__file__).resolve().parents[2] / "workflow"


def _rows(half):
    rows = []
    for model in ("m1", "m2", "m3"):
        for method, nll in (("uncalibrated", 0.5), ("ts", 0.3), ("hist", 0.4)):
            for metric, v in (("nll", nll), ("accuracy", 0.9)):
                rows.append(
                    {"dataset": "ds", "model": model, "method": method, "half": half,
                     "metric": metric, "value": v + (0.01 if model == "m2" else 0.0),
                     "ci_low": v - 0.02, "ci_high": v + 0.02}
                )  # fmt: skip
    return rows


def _spec(protocol=None):
    return {
        "title": "Study",
        "description": "",
        "protocol": {"n_bins": 15, "plot_bins": 10, "n_bootstrap": 20, "level": 0.95,
                     **(protocol or {})},
        "datasets": {"ds": {"display": "DS"}},
        "models": {m: {"dataset": "ds", "display": {"name": m.upper()}} for m in ("m1", "m2", "m3")},
        "calibrators": {"uncalibrated": {"display": "Uncal"}, "ts": {"display": "T-scaling"},
                        "hist": {"display": "Hist"}},
        "table_metrics": ["accuracy", "nll"],
        "losses_metrics": [],
        "reference": None,
    }  # fmt: skip


def _context(rows, spec, partitions=None):
    prov = {
        "config": "",
        "packages": package_versions(),
        "logits": [],
        "splits": [],
        "datasets": [],
    }
    return build_context(
        rows=rows, compare=[], spec=spec, grids={}, provenance=prov, partitions=partitions
    )


def _texts(ctx):
    return (
        [[c for row in t["rows"] for c in row] for t in ctx["metric_tables"]],
        [(r["metric"], r.get("order")) for r in ctx["ranks"]],
        ctx["findings"]["headlines"],
    )


def test_a_cross_fitted_studys_tables_ranks_and_findings_read_its_out_of_fold_rows():
    """The same numbers labelled ``oof`` (a cross-fitted study has no test rows) give the
    tables, ranks and findings the ``test`` rows give; before, they were all empty."""
    test, oof = _context(_rows("test"), _spec()), _context(_rows("oof"), _spec())
    assert oof["metric_tables"] and oof["ranks"] and oof["findings"]["headlines"]
    assert _texts(oof)[1:] == _texts(test)[1:]
    assert len(oof["metric_tables"]) == len(test["metric_tables"]) == 2


def _partition_rows(n_partitions=3):
    rows = []
    for model in ("m1", "m2"):
        for method, share in (("ts", 1.0), ("hist", 1 / 3)):
            rows.append(
                {"dataset": "ds", "model": model, "metric": "nll", "family": "vs:uncalibrated",
                 "method": method, "baseline": "uncalibrated", "difference": -0.2,
                 "n_partitions": n_partitions, "folds": 5, "significant_share": share,
                 "between": 1e-6, "within": 4e-6, "between_share": 0.2,
                 "first_share": 1.0 if method == "ts" else 0.0, "winner": "ts",
                 "winner_share": 2 / 3}
            )  # fmt: skip
    rows[-1]["within"] = rows[-1]["between_share"] = math.nan  # a metric without per-sample values
    return rows


def test_the_spread_over_partitions_is_shown_near_the_top(tmp_path):
    files = []
    for model in ("m1", "m2"):
        files.append(tmp_path / f"{model}.csv")
        write_long_csv(files[-1], [r for r in _partition_rows() if r["model"] == model], PARTITION_COLUMNS)  # fmt: skip
    spec = _spec(scheme_protocol({"scheme": "crossfit", "folds": 5, "repeats": 3}))
    ctx = _context(_rows("oof"), spec, partitions_view(read_partition_rows(files), spec))
    view = ctx["partitions"]
    assert (view["n_partitions"], view["folds"]) == (3, 5)
    assert view["winners"] == [
        {"model": "M1", "metric": "NLL", "winner": "T-scaling", "share": "67%"},
        {"model": "M2", "metric": "NLL", "winner": "T-scaling", "share": "67%"},
    ]
    assert [(p["method"], p["significant"], p["between_share"]) for p in view["pairs"]] == [
        ("T-scaling", "100%", "20%"), ("Hist", "33%", "20%"),
        ("T-scaling", "100%", "20%"), ("Hist", "33%", "–"),
    ]  # fmt: skip
    assert [e["id"] for e in ctx["toc"]][:2] == ["findings", "partitions"]
    # the first finding, on the first screen: how far the verdicts depend on the partition
    first = ctx["findings"]["items"][0]
    assert first["family"] == "partitions" and first["support"] == "supported"
    assert first["text"] == (
        "Over the 3 partitions into folds: 2 of 4 comparisons are significant in every "
        "partition, 2 in some and 0 in none; the same calibrator ranks first in every partition "
        "on 0 of 2 model-metric pairs (Spread over partitions)."
    )
    assert ctx["findings"]["headlines"][0] == first["text"]
    html = render.render_html(ctx)
    assert html.index("<h3>Over partitions</h3>") < html.index('id="partitions"')
    body = html.split("<main>", 1)[1]
    assert body.index('id="findings"') < body.index('id="partitions"') < body.index('id="ranks"')
    assert (
        "Spread over partitions" in body and "Cross-fitted over 3 partitions into 5 folds" in body
    )
    assert "<b>Cross-fitted.</b>" in body and "fitted on 4/5 of the data" in body
    assert "Bates, Hastie &amp; Tibshirani 2023" in body
    assert "calibrators, cross-fitted (every sample out of fold);" in body
    bib = body.split('id="bibliography"', 1)[1]
    for key in ("Bates et al. 2023", "Nadeau &amp; Bengio 2003", "Bouckaert &amp; Frank 2004"):
        assert f"<dt>{key}</dt>" in bib  # the protocol's citations are listed


def test_no_spread_section_for_a_holdout_study_or_a_single_partition():
    assert partitions_view([], _spec()) is None
    assert partitions_view(_partition_rows(1), _spec()) is None
    assert scheme_protocol({"scheme": "holdout", "folds": 5, "repeats": 3}) == {}
    ctx = _context(_rows("test"), _spec(), partitions_view(read_partition_rows([]), _spec()))
    assert ctx["partitions"] is None and "partitions" not in [e["id"] for e in ctx["toc"]]
    body = render.render_html(ctx)
    assert 'id="partitions"' not in body and "<b>Cross-fitted.</b>" not in body


def test_the_report_spec_states_the_scheme_only_for_a_cross_fitted_study():
    import yaml

    from calbench.report.spec import study_spec

    cfg = yaml.safe_load((Path(__file__).resolve().parents[2] / "config" / "test.yaml").read_text())
    from snakemake.utils import validate

    validate(cfg, str(WORKFLOW / "schemas" / "config.schema.yaml"))
    holdout = study_spec(cfg)["protocol"]
    assert "scheme" not in holdout  # a holdout study's spec file is what it was
    cf = copy.deepcopy(cfg)
    cf["evaluation"].update(scheme="crossfit", folds=4, repeats=2)
    assert study_spec(cf)["protocol"] == {**holdout, "scheme": "crossfit", "folds": 4, "repeats": 2}


@pytest.mark.parametrize("bad", ["1.5x", ""])
def test_a_garbled_partitions_file_is_a_one_line_error(tmp_path, bad):
    path = tmp_path / "m1.csv"
    write_long_csv(path, _partition_rows()[:1], PARTITION_COLUMNS)
    text = path.read_text().replace(",0.2,", f",{bad},", 1)  # difference
    path.write_text(text.replace("-0.2", bad, 1))
    with pytest.raises(ValueError, match="m1.csv line 2") as info:
        read_partition_rows([path])
    assert "\n" not in str(info.value)
