"""The report's "Implementations side by side" section (calbench.report.arena): the per-model
compare-implementations CSVs aggregated by hand-checked maxima, rendered autoescaped before the
protocol, absent without files."""

from __future__ import annotations

import re

import pytest
from test_report_render import EVIL, _context

from calbench.arena import write_disagreements
from calbench.report import render
from calbench.report.arena import arena_context
from calbench.report.ranks import metric_name


def _row(a, b, q, d, va=None, vb=None, method="ts"):
    return dict(method=method, a=a, b=b, quantity=q, max_abs_diff=d, value_a=va, value_b=vb)


def _files(tmp_path):
    m1 = [_row("ts", "netcal.ts", "probability", 1e-6), _row("ts", "netcal.ts", "ece", 2e-7, 0.01, 0.0100002),
          _row("bbq", "netcal.bbq", "probability", 0.25, method="bbq"),
          _row("bbq", "netcal.bbq", "ece", 0.004, 0.02, 0.016, method="bbq")]  # fmt: skip
    m2 = [_row("ts", "netcal.ts", "probability", 3e-6), _row("ts", "netcal.ts", "ece", 1e-7, 0.01, 0.0100001),
          _row("bbq", "netcal.bbq", "probability", 0.125, method="bbq"),
          _row("bbq", "netcal.bbq", "ece", 0.008, 0.03, 0.022, method="bbq")]  # fmt: skip
    paths = []
    for name, rows in (("m1", m1), ("m2", m2)):
        p = tmp_path / "arena" / "ds" / f"{name}.csv"
        p.parent.mkdir(parents=True, exist_ok=True)
        write_disagreements(rows, p)
        paths.append(p)
    return paths


def test_largest_difference_per_pair_and_quantity_across_models(tmp_path):
    models = {"m1": {"display": {"name": "MLP"}}, "m2": {"display": {"name": "LeNet"}}}
    ctx = arena_context(_files(tmp_path), models, str.upper)
    assert [m["label"] for m in ctx["metrics"]] == ["ECE"]
    ts, bbq = ctx["pairs"]
    assert (ts["a"], ts["b"], ts["prob"], ts["prob_model"]) == ("ts", "netcal.ts", "3.00e-06", "LeNet")
    assert ts["metrics"] == [{"diff": "2.00e-07", "model": "MLP"}]
    assert (bbq["prob"], bbq["prob_model"]) == ("0.2500", "MLP")
    assert bbq["metrics"] == [{"diff": "0.0080", "model": "LeNet"}]
    assert [m["label"] for m in ctx["models"]] == ["MLP", "LeNet"]
    same = [_row("iso", "sklearn.iso", "probability", 0.0, method="iso"),
            _row("iso", "sklearn.iso", "ece", 0.0, 0.02, 0.02, method="iso")]  # fmt: skip
    write_disagreements(same, tmp_path / "arena" / "ds" / "m3.csv")
    iso = arena_context([tmp_path / "arena" / "ds" / "m3.csv"], models)["pairs"][0]
    assert (iso["prob"], iso["prob_model"], iso["metrics"]) == ("0", None, [{"diff": "0", "model": None}])
    assert len(ctx["models"][0]["rows"]) == 4


def test_no_files_no_section(tmp_path):
    assert arena_context([]) is None
    ctx = _context(tmp_path, arena=arena_context([], {}, metric_name))
    html = render.render_html(ctx)
    assert 'id="arena"' not in html and "Implementations side by side" not in html


def test_section_renders_escaped_before_the_protocol_with_a_contents_entry(tmp_path):
    paths = _files(tmp_path)
    rows = [_row(EVIL, "netcal.ts", "probability", 0.5, method=EVIL)]
    evil = tmp_path / "arena" / "ds" / "m3.csv"
    write_disagreements(rows, evil)
    models = {"m1": {"display": {"name": "MLP"}}}
    ctx = _context(tmp_path / "ctx", arena=arena_context([*paths, evil], models, metric_name))
    html = render.render_html(ctx)
    assert html.index('<section id="arena">') < html.index('<h2 id="protocol">')
    nav = html.split('<nav class="toc"', 1)[1].split("</nav>", 1)[0]
    assert re.findall(r'href="#([^"]+)"', nav).index("arena") < re.findall(r'href="#([^"]+)"', nav).index("protocol")
    section = html.split('<section id="arena">', 1)[1].split("</section>", 1)[0]
    assert EVIL not in html and "&lt;script&gt;" in section
    assert "0.2500 (MLP)" in section and "<details><summary>MLP: every pair" in section
    assert '<td class="num" title="MLP">2.00e-07</td>' in section


def test_a_garbled_csv_is_a_one_line_error(tmp_path):
    p = tmp_path / "ds" / "m.csv"
    p.parent.mkdir()
    p.write_text("method,a,b,quantity,max_abs_diff,value_a,value_b\nts,ts,netcal.ts,probability,nan,,\n")
    with pytest.raises(ValueError, match="m.csv"):
        arena_context([p])
    p.write_text("method,a,b,quantity\n")
    with pytest.raises(ValueError, match="lacks columns"):
        arena_context([p])
