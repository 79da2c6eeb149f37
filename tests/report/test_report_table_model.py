"""The one table model and its writers (calbench.table_model), as every table uses them."""

from __future__ import annotations

import csv
import io
import re

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


# ------------------------------------------------------------------ hostile names in every format

#: display names that carry each format's syntax
HOSTILE = [
    "a|b",
    "`code` and ``x``",
    "<b>bold</b> <script>x</script>",
    "&amp; &#60; & plain",
    "_em_ snake_case *star* **strong** __u__",
    "[link](http://x) ![img](y) [ref][r]",
    "$x^2$ 50% #1 {a} ~~del~~ ~1",
    "back\\slash \\| \\",
    "line\nbreak",
    "[start",
    "*start",
]


def _hostile_grid():
    n = len(HOSTILE)
    return G.GridTable(
        title=HOSTILE[4] + " | " + HOSTILE[2],
        row_header=["Model"],
        col_labels=HOSTILE[:2],
        labels=[[h] for h in HOSTILE],
        cells=[[G.Cell(HOSTILE[i], bold=i % 2 == 0), G.Cell("1.00")] for i in range(n)],
    )


def _md_cells(line: str) -> list[str]:
    """A GitHub table row split at its unescaped pipes, each cell's backslash escapes and
    ``&amp;`` undone; raises if an unescaped character would format or become markup."""
    cells, cur, i = [], "", 0
    assert line.startswith("| ") and line.endswith(" |")
    body = line[2:-2]
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            cur += body[i + 1]
            i += 2
            continue
        if body.startswith(" | ", i):
            cells.append(cur)
            cur, i = "", i + 3
            continue
        if body.startswith("**", i) and (
            not cur or body.startswith(" | ", i + 2) or i + 2 == len(body)
        ):
            cur, i = cur + "**", i + 2  # the writer's bold markers around a cell
            continue
        assert ch not in "|`<>$~*", f"unescaped {ch!r} in {line!r}"
        if ch == "_":  # only between letters or digits, where it cannot format
            assert body[i - 1].isalnum() and body[i + 1].isalnum(), line
        if body.startswith("&amp;", i):
            cur, i = cur + "&", i + 5
            continue
        assert not (ch == "&" and re.match(r"&#?\w+;", body[i:])), f"an entity in {line!r}"
        assert not (ch == "]" and body[i + 1 : i + 2] in "(["), line
        cur += ch
        i += 1
    return [*cells, cur]


def test_markdown_cells_of_any_name_parse_back_to_the_name():
    md = G.to_markdown(_hostile_grid())
    lines = md.splitlines()
    title = HOSTILE[4] + " | " + HOSTILE[2]
    assert _md_cells(f"| {lines[0][2:-2]} |") == [title]  # the bold title, same escapes
    rows = [ln for ln in lines if ln.startswith("| ")]
    assert len(rows) == 1 + len(HOSTILE)  # a line break in a name does not split its row
    assert _md_cells(rows[0]) == ["Model", *HOSTILE[:2]]
    for name, row in zip(HOSTILE, rows[1:], strict=True):
        text = name.replace("\n", " ")
        cells = _md_cells(row)
        assert len(cells) == 3
        bold = cells[1].startswith("**")  # the bold markers are the writer's, unescaped
        assert cells == [text, f"**{text}**" if bold else text, "1.00"]


#: LaTeX's escapes, undone
_TEX_UNDO = {v: k for k, v in G._TEX_SPECIAL.items() if v != " "}


def _tex_cells(line: str) -> list[str]:
    assert line.endswith(" \\\\")
    cells, cur, i, body = [], "", 0, line[:-3]
    while i < len(body):
        hit = next((e for e in _TEX_UNDO if body.startswith(e, i)), None)
        if hit:
            cur, i = cur + _TEX_UNDO[hit], i + len(hit)
        elif body.startswith(" & ", i):
            cells.append(cur)
            cur, i = "", i + 3
        elif not cur and body.startswith("\\textbf{", i):  # the writer's bold cell
            cur, i = "\\textbf{", i + 8
        elif cur.startswith("\\textbf{") and body[i] == "}" and body[i + 1 : i + 4] in ("", " & "):
            cur, i = cur + "}", i + 1
        elif body[i] in "{}" and body[i : i + 3] in ("{[}", "{*}"):
            cur, i = cur + body[i + 1], i + 3
        else:
            assert body[i] not in "\\&%$#_{}~^<>|", f"unescaped {body[i]!r} in {line!r}"
            cur, i = cur + body[i], i + 1
    return [*cells, cur]


def test_latex_cells_of_any_name_parse_back_to_the_name():
    tex = G.to_latex(_hostile_grid())
    lines = tex.splitlines()
    assert lines[0].startswith("% ") and lines[1] == "\\begin{tabular}{lrr}"
    assert "\n" not in HOSTILE[4] and lines[2] == "\\toprule"
    rows = lines[lines.index("\\midrule") + 1 : lines.index("\\bottomrule")]
    assert _tex_cells(lines[3]) == ["Model", *HOSTILE[:2]]
    assert len(rows) == len(HOSTILE)
    for name, row in zip(HOSTILE, rows, strict=True):
        text = name.replace("\n", " ")
        cells = _tex_cells(row)
        bold = cells[1].startswith("\\textbf{")
        assert cells == [text, f"\\textbf{{{text}}}" if bold else text, "1.00"]
    # after a row's \\ a leading [ or * would be its optional argument or star
    assert not any(r.startswith(("[", "*")) for r in rows)


def test_plain_names_and_numbers_are_written_as_before():
    for text in ("1.00", "–", "[0.90, 1.10]", "+0.20 ⚠", "vs_b", "DenseNet 40", "A_1"):
        assert G.md_escape(text) == text
    assert G.tex_escape("[0.90, 1.10]") == "{[}0.90, 1.10]"
    assert G.tex_escape("vs_b 5%") == "vs\\_b 5\\%"


def test_html_escapes_every_name():
    import html as H

    page = G.to_html(_hostile_grid())
    for name in HOSTILE:
        assert f"<td>{H.escape(name)}</td>" in page
    assert "<script>" not in page and "<b>bold" not in page


def test_replication_markdown_headings_are_escaped():
    spec = {"title": "<b>mine</b> | `x`", "reference": {"units": "display", "tolerances": {}}}
    md = C.to_markdown([], [], spec)
    assert md.startswith("# \\<b\\>mine\\</b\\> \\| \\`x\\`\n")
