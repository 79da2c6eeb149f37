"""The report as one ordered list of sections (calbench.report.sections): the contents are drawn
from the same list the page renders, so the two cannot disagree; every page and partial comes
from the package's templates through one Jinja environment (calbench.pages), and no module
builds HTML by hand beyond the exact list below."""

from __future__ import annotations

import ast
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from test_report_over_models import PROV, _spec
from test_report_over_models import _rows as _over_rows

from calbench.arena import write_disagreements
from calbench.pages import environment
from calbench.report import render
from calbench.report.arena import arena_context
from calbench.report.build import read_section
from calbench.report.context import build_context
from calbench.report.over_models import study_over_models
from calbench.report.published import read_reference_table
from calbench.report.ranks import metric_name
from calbench.report.sections import Section
from calbench.report.shift import section_file
from calbench.results import REFERENCE_TABLE_COLUMNS, write_long_csv
from calbench.stats.robustness import robustness_rows

SRC = Path(__file__).resolve().parents[2] / "src" / "calbench"


class _TopLevel(HTMLParser):
    """Ids of the ``<section>`` and ``<h2>`` elements directly inside ``<main>``, in order,
    and every id of the page."""

    def __init__(self):
        super().__init__()
        self.depth, self.in_main, self.top, self.ids = 0, False, [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(a["id"])
        if tag == "main":
            self.in_main, self.depth = True, 0
            return
        if not self.in_main or tag in ("img", "br", "input", "meta"):
            return
        if self.depth == 0 and tag in ("section", "h2") and a.get("id"):
            self.top.append(a["id"])
        self.depth += 1

    def handle_endtag(self, tag):
        if tag == "main":
            self.in_main = False
        elif self.in_main and tag not in ("img", "br", "input", "meta"):
            self.depth -= 1


def _full_context(tmp_path):
    """Every kind of section but the calibration-during-training one (test_report_studies):
    comparisons, ranks, over models (6 models), "calibrated within delta" (unbiased ECE with
    intervals), robustness, temperatures, the by-loss tables, published numbers, the shift
    section of another step (section.json) and the implementations side by side."""
    n = 6
    rows = _over_rows(n)
    for i in range(n):
        for m in ("uncalibrated", "ts", "good"):
            v = 0.002 * (i + 1)
            rows.append({"dataset": "ds", "model": f"m{i}", "method": m, "half": "test",
                         "metric": "ece_ub", "value": v, "ci_low": 0.0, "ci_high": v + 0.004})  # fmt: skip
    compare = [{"dataset": "ds", "model": "m0", "metric": "nll", "method": "ts",
                "baseline": "uncalibrated", "value": 1.0, "baseline_value": 1.2,
                "difference": -0.2, "ci_low": -0.3, "ci_high": -0.1, "p_value": 0.001}]  # fmt: skip
    arena = tmp_path / "arena" / "ds" / "m0.csv"
    write_disagreements(
        [dict(method="ts", a="ts", b="netcal.ts", quantity="probability", max_abs_diff=1e-6,
              value_a=None, value_b=None)], arena)  # fmt: skip
    shift_rows = [
        {"dataset": "ds", "model": "m0", "method": m, "half": "test", "corruption": c,
         "severity": s, "metric": metric, "value": 0.1 + 0.01 * s}
        for m in ("uncalibrated", "ts") for s in range(6) for c in (["clean"] if s == 0 else ["a"])
        for metric in ("accuracy", "ece", "nll")
    ]  # fmt: skip
    shift = tmp_path / "section.json"
    shift.write_text(json.dumps(section_file(shift_rows, [], [], _spec(n))))
    spec = _spec(n)
    for i, m in enumerate(spec["models"].values()):  # two training losses: the by-loss tables
        m["display"]["loss"] = "CE" if i % 2 else "FL 3"
    spec["losses_metrics"] = ["nll"]
    reference = tmp_path / "reference.csv"
    write_long_csv(reference, [dict(dataset="ds", model="m0", method="ts", metric="nll", ours=1.0,
                                    ci_low="", ci_high="", theirs=1.1, difference=-0.1,
                                    tolerance=0.2, within=True)], REFERENCE_TABLE_COLUMNS)  # fmt: skip
    rng = np.random.default_rng(0)
    robustness = []
    for i in range(n):
        labels = rng.integers(0, 3, 300)
        probs = {m: rng.dirichlet(np.ones(3), 300) for m in ("uncalibrated", "ts", "good")}
        robustness += robustness_rows(probs, labels, dataset="ds", model=f"m{i}", n_resamples=10)
    return build_context(
        rows=rows,
        compare=compare,
        spec=spec,
        grids={},
        provenance=PROV,
        reference=read_reference_table(reference),
        temperatures={"m0": 1.5},
        robustness=robustness,
        extra_sections=[read_section(shift)],
        arena=arena_context([arena], spec["models"], metric_name),
        over_models=study_over_models(rows, spec),
    )


def test_contents_equal_the_pages_sections_in_order(tmp_path):
    ctx = _full_context(tmp_path)
    html = render.render_html(ctx)
    page = _TopLevel()
    page.feed(html)
    toc = [e["id"] for e in ctx["toc"]]
    assert toc == [s.id for s in ctx["sections"]]
    assert page.top == toc
    assert toc == ["findings", "compare", "ranks", "over-models", "verdicts", "robustness",
                   "diagrams", "tables", "temperatures", "losses", "reference", "shift", "arena",
                   "protocol", "provenance", "bibliography"]  # fmt: skip
    assert toc.index("shift") < toc.index("arena") < toc.index("protocol")
    children = [c["id"] for e in ctx["toc"] for c in e["children"]]
    assert children and all(c in page.ids for c in children)
    # the contents (nav) link exactly these anchors, in this order
    nav = html.split('<nav class="toc"', 1)[1].split("</nav>", 1)[0]
    links = re.findall(r'href="#([^"]+)"', nav)
    assert [x for x in links if x not in children] == toc


def test_the_calibration_during_training_section_is_in_the_contents_where_it_is_drawn():
    from test_report_studies import MODELS
    from test_report_studies import _rows as _study_rows

    spec = {"title": "t", "models": MODELS, "datasets": {"fm": {"display": "Fashion-MNIST"}},
            "calibrators": {"uncalibrated": {}, "ts": {}}, "studies": ["metacal"],
            "protocol": {"n_bootstrap": 0}}  # fmt: skip
    ctx = build_context(rows=_study_rows(), compare=[], spec=spec, grids={}, provenance=PROV)
    page = _TopLevel()
    page.feed(render.render_html(ctx))
    toc = [e["id"] for e in ctx["toc"]]
    assert "objectives" in toc and page.top == toc


def test_two_sections_of_one_id_are_refused(tmp_path):
    clash = Section("findings", "Findings again", "shift.html.j2", data={})
    with pytest.raises(ValueError, match="share the id"):
        build_context(rows=_over_rows(2), compare=[], spec=_spec(2), grids={}, provenance=PROV,
                      extra_sections=[clash])  # fmt: skip


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"id": "x"}', "not a report section file"),
        ("not json", "not a report section file"),
        ('{"id": "x", "title": "X", "template": "../report.html.j2", "data": {}}', "not one of"),
        ('{"id": "x", "title": "X", "template": "nope.html.j2", "data": {}}', "not one of"),
        ('{"id": "x\\" onload=\\"", "title": "X", "template": "shift.html.j2", "data": {}}',
         "anchor name"),
        ('{"id": "x", "title": ["X"], "template": "shift.html.j2", "data": {}}', "not text"),
    ],
)  # fmt: skip
def test_a_bad_section_file_is_a_one_line_error(tmp_path, text, message):
    bad = tmp_path / "section.json"
    bad.write_text(text)
    with pytest.raises(ValueError, match=message) as exc:
        read_section(bad)
    assert "\n" not in str(exc.value)


def test_every_page_and_partial_comes_from_the_package_templates():
    env = environment()
    assert env is environment() and env.autoescape
    names = set(env.list_templates())
    assert {"report/report.html.j2", "report/sections/shift.html.j2"} <= names
    assert {"reference/guo_kull.html.j2", "reference/replication.html.j2"} <= names
    assert "arena/disagreements.html.j2" in names
    assert not (SRC.parents[1] / "workflow" / "templates").exists()


#: Tags that mark a Python string as a piece of HTML being built.
_HTML = re.compile(
    r"<(table|thead|tbody|tr|td|th|div|section|h[1-6]|p|ul|ol|li|details|summary|figure|"
    r"img|dl|dt|dd|span|nav|pre|caption)(\s[^<>]*)?>",
    re.I,
)
#: Modules that still build HTML in Python: table_model.py, the library's table writer (HTML
#: beside Markdown, CSV and LaTeX; aggregate's table files). This list may only shrink, never
#: grow; a new piece of HTML goes into a template of calbench/templates (calbench.pages).
BUILDS_HTML = {"table_model.py"}


def test_no_module_builds_html_outside_the_templates():
    found = set()
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and _HTML.search(node.value)
            ):
                found.add(path.relative_to(SRC).as_posix())
    assert found == BUILDS_HTML
