"""The one table model and its writers (calbench.table_model), as every table uses them."""

from __future__ import annotations

import csv
import io

from calbench import table_model as G
from calbench.reference import ours_vs_published as C


def _grid(**kw):
    return G.GridTable(
        title="T | *x*",
        row_header=["Dataset", "Model"],
        col_labels=["A_1", "B"],
        labels=[["D", "m|1"], ["D", "m<2>"]],
        cells=[
            [G.Cell("1.00", ci="[0.90, 1.10]", bold=True, csv=("1.00", "0.90", "1.10")),
             G.Cell("–", csv=("–", "–", "–"))],
            [G.Cell("2.00", css="differs", tooltip="differs", csv=("2.00", "1.90", "2.10")),
             G.Cell("3.00", bold=True, csv=("3.00", "–", "–"))],
        ],
        css_class="metric-table",
        data=(("metric", "ece"),),
        csv_suffixes=("ci_low", "ci_high"),
        **kw,
    )  # fmt: skip


def test_html_escapes_marks_best_and_status():
    html = G.to_html(_grid())
    assert html.startswith('<table class="metric-table" data-metric="ece">\n<caption>')
    assert "<td>m&lt;2&gt;</td>" in html and "<m<2>" not in html
    assert '<td class="num"><b>1.00</b><br><small class="ci">[0.90, 1.10]</small></td>' in html
    assert '<td class="num differs" title="differs">2.00</td>' in html


def test_markdown_escapes_labels_and_title():
    md = G.to_markdown(_grid())
    assert md.startswith(
        "**T \\| \\*x\\***\n\n| Dataset | Model | A_1 | B |\n|---|---|---:|---:|\n"
    )
    assert "| D | m\\|1 | **1.00** [0.90, 1.10] | – |" in md


def test_csv_has_the_suffix_columns_and_latex_the_booktabs_rules():
    rows = list(csv.reader(io.StringIO(G.to_csv(_grid()))))
    assert rows[0] == [
        "Dataset",
        "Model",
        "A_1",
        "A_1 ci_low",
        "A_1 ci_high",
        "B",
        "B ci_low",
        "B ci_high",
    ]
    # numbers only: a missing value is an empty cell, not the printed dash
    assert rows[1][2:] == ["1.00", "0.90", "1.10", "", "", ""]
    assert rows[2][2:] == ["2.00", "1.90", "2.10", "3.00", "", ""]
    tex = G.to_latex(_grid())
    assert "\\begin{tabular}{llrr}" in tex and "A\\_1" in tex and "\\textbf{1.00} & --" in tex


def test_write_grid_writes_every_format(tmp_path):
    paths = G.write_grid(_grid(), tmp_path / "t")
    assert sorted(p.rsplit(".", 1)[1] for p in paths) == ["csv", "html", "md", "tex"]


def test_published_tables_use_the_same_writers():
    spec = {
        "title": "t",
        "datasets": {"c10": {"display": "CIFAR-10"}},
        "models": {"a": {"dataset": "c10", "display": {"name": "A"}}},
        "calibrators": {"ts": {"display": "T-scaling"}},
        "table_metrics": ["ece"],
        "reference": {"units": "display", "tolerances": {"ece": 0.001}},
    }
    ours = [{"dataset": "c10", "model": "a", "method": "ts", "half": "test", "metric": "ece",
             "value": 0.03}]  # fmt: skip
    ref = [{"dataset": "c10", "model": "a", "method": "ts", "metric": "ece", "value": "2.80"}]
    tabs = C.tables(C.comparison_rows(ours, ref, spec), spec)
    page = C.to_html(tabs, [], spec)
    assert G.to_html(C.grid(tabs[0])).rstrip("\n") in page
    assert '<td class="num differs" title="differs">3.00 / 2.80 / +0.20 ⚠</td>' in page
