"""The HTML report: autoescaping, embedded figures, bold cells, provenance."""

from __future__ import annotations

import base64
import re
import struct
import zlib

import numpy as np
import pytest

from calbench.display import model_label
from calbench.io import png_data_uri
from calbench.report import render
from calbench.report.context import build_context
from calbench.report.provenance import package_versions


def tiny_png() -> bytes:
    """A valid 1x1 white PNG built by hand (signature, IHDR, IDAT, IEND)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00\xff\xff\xff")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


EVIL = "<script>alert(1)</script>"


def _rows():
    rows = []
    for model in ("m1", "m2"):
        for method, ece in (("uncalibrated", 0.05), ("ts", 0.01)):
            for metric, v in (("ece", ece), ("accuracy", 0.9)):
                rows.append(
                    {
                        "dataset": "ds",
                        "model": model,
                        "method": method,
                        "half": "test",
                        "metric": metric,
                        "value": v + (0.001 if model == "m2" else 0.0),
                        "ci_low": v - 0.002,
                        "ci_high": v + 0.002,
                    }
                )
    return rows


def _spec():
    return {
        "title": "Study <b>1</b>",
        "description": "desc",
        "protocol": {"n_bins": 15, "plot_bins": 10, "n_bootstrap": 20, "level": 0.95},
        "datasets": {"ds": {"display": "DS"}},
        "models": {
            "m1": {"dataset": "ds", "display": {"name": EVIL, "loss": "CE"}},
            "m2": {"dataset": "ds", "display": {"name": EVIL, "loss": "FL 2"}},
        },
        "calibrators": {"uncalibrated": {"display": "Uncal"}, "ts": {"display": "T-scaling"}},
        "table_metrics": ["accuracy", "ece"],
        "losses_metrics": ["ece"],
        "reference": None,
    }


def _context(tmp_path, spec=None, **more):
    png = tmp_path / "ds" / "m1" / "grid.png"
    png.parent.mkdir(parents=True)
    png.write_bytes(tiny_png())
    compare = [
        {
            "dataset": "ds",
            "model": "m1",
            "metric": "ece",
            "method": "ts",
            "baseline": "uncalibrated",
            "value": 0.01,
            "baseline_value": 0.05,
            "difference": -0.04,
            "ci_low": -0.05,
            "ci_high": -0.03,
            "p_value": 0.0,
        }
    ]
    prov = {
        "config": "a: 1\n",
        "packages": package_versions(),
        "logits": [],
        "splits": [],
        "datasets": [],
    }
    return build_context(
        rows=_rows(),
        compare=compare,
        spec=spec or _spec(),
        grids={"ds/m1": str(png)},
        provenance=prov,
        **more,
    )


def test_report_escapes_names_from_the_config(tmp_path):
    html = render.render_html(_context(tmp_path))
    assert EVIL not in html and html.count("<script>") == 1  # ours: the table sorting
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Study &lt;b&gt;1&lt;/b&gt;" in html


def test_report_bold_is_best_per_row(tmp_path):
    html = render.render_html(_context(tmp_path))
    ece_table = re.search(
        r'<table class="metric-table" data-metric="ece" data-sortable>(.*?)</table>', html, re.S
    ).group(1)
    bodies = re.findall(r"<tr>(.*?)</tr>", ece_table.split("<tbody>")[1], re.S)
    assert len(bodies) == 2
    for body in bodies:
        cells = re.findall(r'<td class="num" data-sort="[^"]*">(.*?)</td>', body, re.S)
        # columns: Uncal (0.05 -> 5.00) and T-scaling (0.01 -> 1.00): T-scaling bold
        assert cells[0].startswith("5.") and "<b>" not in cells[0]
        assert cells[1].startswith("<b>1.")
    acc_table = re.search(r'data-metric="accuracy" data-sortable>(.*?)</table>', html, re.S).group(
        1
    )
    assert acc_table.count("<b>") == 4  # ties: all bold
    assert "T-scaling" in html and "Uncal" in html


def test_report_embeds_figures_and_is_self_contained(tmp_path):
    html = render.render_html(_context(tmp_path))
    srcs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    pngs = [s for s in srcs if s.startswith("data:image/png;base64,")]
    svgs = [s for s in srcs if s.startswith("data:image/svg+xml;base64,")]
    alts = re.findall(r'<img [^>]*alt="([^"]+)"', html)
    # the grid; as SVG the CD diagram of accuracy and the rank overview (the plug-in ECE gives
    # no ranks: its bias depends on sharpness, calbench.report.ranks.rank_summaries) and the
    # comparison heatmap
    assert len(pngs) == 1 and len(svgs) == 3 and len(srcs) == 4
    assert sum(a.startswith("Critical-difference diagram") for a in alts) == 1
    assert sum(a.startswith("Heatmap of the average ranks") for a in alts) == 1
    assert sum(a.startswith("Heatmap of ") and "average ranks" not in a for a in alts) == 1
    # the fixture compares the plug-in ECE (an older comparison file): its heatmap is marked
    compare = html.split('id="compare"', 1)[1].split('id="ranks"', 1)[0]
    assert compare.count('<span class="descr"') == 1
    assert base64.b64decode(pngs[0].split(",", 1)[1]) == tiny_png()
    for svg in svgs:
        assert base64.b64decode(svg.split(",", 1)[1]).startswith(b"<?xml")
    assert "http://" not in html and "https://" not in html  # nothing fetched from elsewhere
    assert 'id="losses"' in html and 'id="compare"' in html
    assert "numpy" in html  # provenance lists package versions


def test_png_data_uri_refuses_other_files(tmp_path):
    p = tmp_path / "x.png"
    p.write_text("not a png")
    with pytest.raises(ValueError, match="not a PNG"):
        png_data_uri(p)


def test_render_html_missing_template(tmp_path):
    with pytest.raises(FileNotFoundError, match="template"):
        render.render_html({}, "nope.html.j2")


def test_render_html_undefined_variable_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="failed to render"):
        render.render_html({})  # the report template without its context


def test_model_label():
    assert model_label("m", {"name": "LeNet-5", "loss": "FL 1"}) == "LeNet-5 (FL 1)"
    assert model_label("m", None) == "m"


def test_losses_tables_need_two_training_losses(tmp_path):
    """Tables by training loss appear when the models name two or more losses: one loss alone
    (a study of cross-entropy models only) compares nothing and gets no section."""
    from calbench.display import compares_losses

    assert compares_losses([{"loss": "CE"}, {"loss": "FL 2"}, {}])
    assert not compares_losses([{"loss": "CE"}, {"loss": "CE"}, None, {"name": "x"}])
    assert not compares_losses([])
    spec = _spec()
    assert _context(tmp_path, spec)["losses_tables"]
    for m in spec["models"].values():
        m["display"]["loss"] = "CE"
    assert _context(tmp_path / "one", spec)["losses_tables"] == []


def test_losses_tables_only_for_the_calibrators_a_study_has():
    from calbench.display import losses_calibrators

    two = [{"loss": "CE"}, {"loss": "FL 2"}]
    assert losses_calibrators(two, ["iso", "ts", "uncalibrated"]) == ["uncalibrated", "ts"]
    assert losses_calibrators(two, {"ts": {}}) == ["ts"]
    assert losses_calibrators(two, ["iso"]) == []
    assert losses_calibrators(two[:1], ["uncalibrated", "ts"]) == []


# --------------------------------------------------------------------------------------------
# findings, comparisons, CSV links, layout
# --------------------------------------------------------------------------------------------
def test_report_opens_on_findings_computed_from_the_rows(tmp_path):
    ctx = _context(tmp_path)
    html = render.render_html(ctx)
    body = html.split("<main>", 1)[1]
    # the first section after the title is the findings summary, then the figures of the
    # evidence, the tables, and the protocol (folded)
    order = ["findings", "ranks", "diagrams", "tables", "protocol", "provenance", "bibliography"]
    at = [body.index(f'id="{x}"') for x in order]
    assert at == sorted(at)
    heads = ctx["findings"]["headlines"]
    shown = [f["text"] for fam in ctx["findings_view"]["families"] for f in fam["found"]]
    assert shown == heads  # the first screen shows every supported finding
    assert ctx["findings_view"]["to_check"] == ctx["findings"]["anomalies"]
    assert "T-scaling never changes accuracy: 2/2 models identical to uncalibrated." in heads
    # the plug-in ECE gives no rank and no finding (its bias depends on sharpness)
    assert [r["metric"] for r in ctx["ranks"]] == ["accuracy"]
    assert not [h for h in heads if "ECE" in h]
    assert {d["support"] for d in ctx["findings"]["items"]} <= {"supported", "to check"}


def test_comparisons_show_display_names_holm_and_small_p(tmp_path):
    ctx = _context(tmp_path)
    view = ctx["compare"]
    assert view["header"][-3:] == ["p", "p (Holm, model and metric)", "Verdict"]
    (row,) = view["rows"]
    texts = [c["text"] for c in row]
    assert "T-scaling" in texts and "Uncal" in texts and "ts" not in texts  # no slugs
    assert "ECE, % (15 bins)" in texts
    # p = 0 prints as "< 0.001", never 0.000; a row without a family is a family of 1
    assert texts[-3:-1] == ["< 0.001", "< 0.001 (m = 1)"]
    html = render.render_html(ctx)
    assert "Holm 1979" in html and "0.000<" not in html


def _cmp(p, p_holm, min_p_holm, family="vs:uncalibrated", size=9, **extra):
    return {
        "dataset": "ds",
        "model": "m1",
        "metric": "ece",
        "method": "ts",
        "baseline": "uncalibrated",
        "value": 0.01,
        "baseline_value": 0.05,
        "difference": -0.04,
        "ci_low": -0.05,
        "ci_high": -0.03,
        "p_value": p,
        "family": family,
        "family_size": size,
        "test": "sign_flip",
        "n_permutations": 1799,
        "p_holm": p_holm,
        "min_p_holm": min_p_holm,
        **extra,
    }


def test_comparison_verdicts_and_family_sizes():
    from calbench.report import views as V

    spec = _spec()
    rows = [
        _cmp(0.001, 0.009, 0.005),
        _cmp(0.2, 0.4, 0.005, method="a"),
        _cmp(0.5, 1.0, 0.2, family="best", size=4, test="mcnemar_exact", method="b"),
    ]
    view = V.compare_view(rows, spec, 0.95)
    verdicts = [r[-1]["text"] for r in view["rows"]]
    # the verdict says which way (the rows carry no direction: the difference's sign gives it)
    assert verdicts == ["significant, better", "not significant", V.CANNOT_REACH]
    assert V.CANNOT_REACH == "cannot reach significance: N too small / family too large"
    assert view["rows"][2][-1]["bad"] and (view["n_cannot"], view["n_significant"]) == (1, 1)
    assert [r[-2]["text"] for r in view["rows"]] == [
        "0.009 (m = 9)",
        "0.400 (m = 9)",
        "1.000 (m = 4)",
    ]
    assert {f["label"]: f["sizes"] for f in view["families"]} == {
        "each vs Uncal": "9",
        "best on validation vs rest": "4",
    }
    j = view["header"].index("Difference")  # constant label columns are dropped
    assert view["rows"][0][j]["bold"] and not view["rows"][1][j]["bold"]


def test_old_comparison_rows_get_holm_per_model_and_metric():
    # rows without family columns (files written before families): Holm over each (dataset,
    # model, metric), and a bootstrap p-value's floor 2 / (B + 1) decides "cannot reach"
    from calbench.report import views as V

    old = [
        {
            k: v
            for k, v in _cmp(p, None, None).items()
            if k not in ("family", "family_size", "test", "n_permutations", "p_holm", "min_p_holm")
        }
        | {"n_resamples": "1000", "method": f"c{k}"}
        for k, p in enumerate((0.002, 0.01, 0.3))
    ]
    fam = V.comparison_families(old)
    np.testing.assert_allclose([r["p_holm"] for r in fam], [0.006, 0.02, 0.3])
    assert {r["family_size"] for r in fam} == {3}
    assert fam[0]["min_p_holm"] == pytest.approx(3 * 2 / 1001)
    many = [dict(old[0], method=f"c{i}") for i in range(30)]
    view = V.compare_view(many, _spec(), 0.95)
    assert {r[-1]["text"] for r in view["rows"]} == {V.CANNOT_REACH}  # 30 * 2/1001 > 0.05


def test_every_table_has_a_csv_link_with_its_data(tmp_path):
    html = render.render_html(_context(tmp_path))
    links = re.findall(
        r'href="data:text/csv;charset=utf-8;base64,([^"]+)" download="([^"]+)"', html
    )
    names = [n for _, n in links]
    assert "ece.csv" in names and "accuracy.csv" in names and "comparisons.csv" in names
    text = dict((n, base64.b64decode(d).decode()) for d, n in links)["ece.csv"]
    lines = text.splitlines()
    assert lines[0].startswith("Dataset,Model,Uncal,Uncal ci_low,Uncal ci_high,T-scaling")
    assert lines[1].split(",")[2:6] == ["5.00", "4.80", "5.20", "1.00"]
    # one table per CSV link, each table sortable
    assert len(links) == html.count('<figure class="tbl"')
    for table in re.findall(r"<table [^>]*>.*?</thead>", html, re.S):
        assert ("data-sortable" in table) == ('class="sort"' in table), table[:200]


def test_constant_label_columns_are_dropped_and_named(tmp_path):
    ctx = _context(tmp_path)
    (ece,) = [v for v in ctx["metric_tables"] if v["csv_name"] == "ece.csv"]
    assert ece["header"] == ["Model", "Uncal", "T-scaling"]  # one dataset: no Dataset column
    assert ece["constant"] == "Dataset: DS"


def test_toc_links_resolve_and_page_has_viewport(tmp_path):
    html = render.render_html(_context(tmp_path))
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in html
    nav = html.split('<nav class="toc"', 1)[1].split("</nav>", 1)[0]
    targets = re.findall(r'href="#([^"]+)"', nav)
    ids = set(re.findall(r'id="([^"]+)"', html))
    assert targets and all(t in ids for t in targets)
    assert {"findings", "t-ece", "compare", "bibliography"} <= set(targets)


def test_estimates_outside_their_interval_are_marked(tmp_path):
    ctx = _context(tmp_path)
    rows = _rows()
    rows[0]["ci_low"], rows[0]["ci_high"] = 0.02, 0.04  # m1 uncalibrated ECE 0.05 above [2, 4]
    ctx2 = build_context(
        rows=rows,
        compare=[],
        spec=_spec(),
        grids={},
        provenance=ctx["provenance"],
    )
    (ece,) = [v for v in ctx2["metric_tables"] if v["csv_name"] == "ece.csv"]
    marks = [c["mark"] for r in ece["rows"] for c in r]
    assert marks.count("†") == 1 and ctx2["n_outside"] == 1
    assert any("lies outside its interval" in a for a in ctx2["findings"]["anomalies"])


def test_reliability_default_panels_and_the_rest_folded(tmp_path):
    ctx = _context(tmp_path)
    plots = {}
    for method in ("uncalibrated", "ts", "hist", "iso"):
        path = tmp_path / "p" / f"{method}.png"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(tiny_png())
        plots[method] = str(path)
    rows = _rows() + [
        {"dataset": "ds", "model": "m1", "method": m, "half": "val", "metric": "ece", "value": v}
        for m, v in (("uncalibrated", 0.05), ("ts", 0.02), ("hist", 0.01), ("iso", 0.03))
    ]
    spec = _spec()
    spec["calibrators"].update({"hist": {"display": "Hist"}, "iso": {"display": "Iso"}})
    out = build_context(
        rows=rows,
        compare=[],
        spec=spec,
        grids={},
        provenance=ctx["provenance"],
        plots={"ds/m1": plots},
        temperatures={"m1": 1.5, "m2": 0.9},
    )
    (fig,) = out["figures"]
    assert [p["label"] for p in fig["shown"]] == [
        "Uncal",
        "T-scaling",
        "Hist (lowest validation ECE)",
    ]
    assert [p["label"] for p in fig["more"]] == ["Iso"]
    html = render.render_html(out)
    assert "<details><summary>1 more calibrators</summary>" in html
    temps = out["temperatures"]
    assert [r[-1]["text"] for r in temps["rows"]] == ["1.500", "0.900"]


def test_manifest_flags_are_explained_and_order_hash_shown_once(tmp_path):
    ctx = _context(tmp_path)
    prov = dict(ctx["provenance"])
    prov["datasets"] = [
        {
            "path": "manifest.json",
            "content": '{"files": {"a": {"gz_md5_matches_torchvision": false}}}',
        }
    ]
    prov["logits"] = [
        {"path": f"l{i}.npz", "shape": "4x2", "content_sha256": f"c{i}", "order_hash": "samehash"}
        for i in range(3)
    ]
    out = build_context(rows=_rows(), compare=[], spec=_spec(), grids={}, provenance=prov)
    html = render.render_html(out)
    assert "files / a / gz_md5_matches_torchvision" in html
    assert "recompressed" in html  # the meaning of false
    assert html.count("samehash") == 1
    assert "<th>Package</th><th>Version</th>" in html


def test_report_is_deterministic(tmp_path):
    # the critical-difference SVGs and CSV links included: the same inputs give the same bytes
    a = render.render_html(_context(tmp_path / "a"))
    b = render.render_html(_context(tmp_path / "b"))
    assert a.replace(str(tmp_path / "a"), "") == b.replace(str(tmp_path / "b"), "")


def test_comparison_rows_print_direction_floor_and_null():
    # a sign-flip p-value at its floor 1/(B+1) prints as "<= floor" (Holm: m times it); a
    # significantly worse difference is marked, not bold; each test's null is listed
    from calbench.report import views as V
    from calbench.stats.comparisons import NULL_HYPOTHESES

    floor = 1 / 1800
    rows = [
        _cmp(floor, 9 * floor, 9 * floor, direction="worse", p_floor=floor,
             null_hypothesis=NULL_HYPOTHESES["sign_flip"], difference=0.04),
        _cmp(0.001, 0.009, 0.0, direction="better", p_floor=0.0, test="jackknife_z",
             null_hypothesis=NULL_HYPOTHESES["jackknife_z"], method="a"),
    ]  # fmt: skip
    view = V.compare_view(rows, _spec(), 0.95)
    first, second = view["rows"]
    assert [c["text"] for c in first[-3:]] == [
        "≤ 0.00056",
        "≤ 0.005 (m = 9)",
        "significant, worse",
    ]
    j = view["header"].index("Difference")
    assert first[j]["bad"] and not first[j]["bold"] and second[j]["bold"]
    assert second[-1]["text"] == "significant, better" and second[-3]["text"] == "0.001"
    assert view["n_floor"] == 1
    assert {n["test"]: n["null"] for n in view["nulls"]} == {
        "sign-flip": NULL_HYPOTHESES["sign_flip"],
        "jackknife z": NULL_HYPOTHESES["jackknife_z"],
    }


def test_bibliography_is_what_the_text_cites(tmp_path):
    """The rendered report's citations (author-year, parsed from its visible text) and its
    bibliography agree both ways: every work cited is listed, every work listed is cited."""
    import html as html_mod

    from calbench.report.references import REFERENCES

    html = render.render_html(_context(tmp_path))
    body, bib = html.split('<h2 id="bibliography"', 1)
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", body, flags=re.S)
    text = re.sub(r"\s+", " ", html_mod.unescape(re.sub(r"<[^>]+>", " ", text)))
    name = r"[A-Z][A-Za-zšéöüłäø'-]+"
    cites = re.findall(
        rf"({name})(?: et al\.|(?:, {name})*,? (?:&|and) {name})?,? \(?((?:19|20)\d\d)\b", text
    )
    listed = [html_mod.unescape(k) for k in re.findall(r"<dt>([^<]+)</dt>", bib)]
    assert listed and cites
    # cited -> listed: the first author's surname and the year name a listed work
    first = {(k.split()[0], k.split()[-1]) for k in listed}
    missing = {f"{a} {y}" for a, y in cites if (a, y) not in first}
    assert not missing, f"cited but not in the bibliography: {sorted(missing)}"
    # listed -> cited
    uncited = [k for k in listed if (k.split()[0], k.split()[-1]) not in set(cites)]
    assert not uncited, f"listed but never cited: {uncited}"
    assert all(k in REFERENCES for k in listed)
    # the works the statistics rest on are there
    for key in ("Friedman 1937", "Iman & Davenport 1980", "Holm 1979", "Efron & Stein 1981"):
        assert key in listed
    # Phipson & Smyth 2010 is cited only where a sign-flip test ran (its p-value formula)
    assert ("Phipson & Smyth 2010" in listed) == ("Phipson & Smyth 2010" in text)


def test_findings_view_groups_by_family_with_direction_and_keeps_to_check_apart():
    from calbench.report.overview import findings_view

    items = [
        {
            "family": "vs:uncal",
            "text": "A lowers NLL",
            "direction": "better",
            "size": -0.1,
            "support": "supported",
        },
        {"family": "ranks", "text": "r", "direction": "", "size": 2.0, "support": "supported"},
        {
            "family": "vs:uncal",
            "text": "B raises NLL",
            "direction": "worse",
            "size": 0.1,
            "support": "supported",
        },
        {"family": "precision", "text": "p", "direction": "", "size": None, "support": "to check"},
    ]
    v = findings_view({"items": items, "headlines": [], "anomalies": []}, {"uncal": "Uncal"})
    assert [f["family"] for f in v["families"]] == ["Against Uncal", "Ranks"]
    assert [(f["text"], f["arrow"]) for f in v["families"][0]["found"]] == [
        ("A lowers NLL", "▲"),
        ("B raises NLL", "▼"),
    ]
    assert v["to_check"] == ["p"]
    # the older form: sentences, supported and to check
    old = findings_view({"headlines": ["h"], "anomalies": ["a"]})
    assert old == {
        "families": [
            {"family": "", "found": [{"text": "h", "direction": "", "arrow": "", "size": ""}]}
        ],
        "to_check": ["a"],
    }


def test_set_size_printed_with_its_coverage_and_glossary_from_the_registry(tmp_path, monkeypatch):
    from calbench.metrics import METRICS
    from calbench.report import overview

    rows = _rows()
    for model in ("m1", "m2"):
        for method, size, cov in (("uncalibrated", 2.5, 0.9), ("ts", 1.5, 0.95)):
            for metric, v in (("aps_size", size), ("aps_coverage", cov)):
                rows.append(
                    {
                        "dataset": "ds",
                        "model": model,
                        "method": method,
                        "half": "test",
                        "metric": metric,
                        "value": v,
                        "ci_low": float("nan"),
                        "ci_high": float("nan"),
                    }
                )
    spec = {**_spec(), "table_metrics": ["accuracy", "ece", "aps_size"]}
    prov = {"config": "", "packages": {}, "logits": [], "splits": [], "datasets": []}
    ctx = build_context(rows=rows, compare=[], spec=spec, grids={}, provenance=prov)
    (aps,) = [v for v in ctx["metric_tables"] if v["metric"] == "aps_size"]
    cells = [c for r in aps["rows"] for c in r if c.get("sort")]
    assert [c["ci"] for c in cells[:2]] == ["coverage 90.00%", "coverage 95.00%"]
    # one glossary line per printed metric, from its registry entry
    gloss = {g["metric"]: g for g in ctx["glossary"]}
    assert list(gloss) == ["accuracy", "ece", "aps_size"]
    assert gloss["ece"]["direction"] == "lower is better"
    assert gloss["accuracy"]["direction"] == "higher is better"
    assert gloss["ece"]["reference"] == METRICS["ece"].reference
    # the registry's verdicts fact: the plug-in ECE and the set size are descriptive
    assert (
        {k: g["descriptive"] for k, g in gloss.items()}
        == {
            "accuracy": not METRICS["accuracy"].verdicts,
            "ece": not METRICS["ece"].verdicts,
            "aps_size": not METRICS["aps_size"].verdicts,
        }
        == {"accuracy": False, "ece": True, "aps_size": True}
    )
    assert [v["descriptive"] for v in ctx["metric_tables"]] == [False, True, True]
    html = render.render_html(ctx)
    assert METRICS["aps_size"].display in html and "coverage 95.00%" in html
    # the two descriptive metric tables and the two by-loss tables of the (plug-in) ECE
    assert [v["descriptive"] for v in ctx["losses_tables"]] == [True, True]
    assert html.count('<span class="descr"') == 4
    # a metric the registry marks verdicts=False is printed as descriptive
    import copy

    fake = copy.copy(METRICS["accuracy"])
    object.__setattr__(fake, "verdicts", False)
    monkeypatch.setitem(METRICS, "accuracy", fake)
    (line,) = overview.glossary(["accuracy"])
    assert line["descriptive"]
    ctx = build_context(rows=rows, compare=[], spec=spec, grids={}, provenance=prov)
    assert [v["descriptive"] for v in ctx["metric_tables"]] == [True, True, True]
    assert render.render_html(ctx).count('<span class="descr"') == 5


def test_reliability_caption_states_the_code_s_threshold_and_both_bands(tmp_path):
    from calbench import plots

    html = render.render_html(_context(tmp_path))
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html.split('id="diagrams"', 1)[1]))
    assert f"fewer than {plots.FEW_SAMPLES} samples" in text
    assert "Grey boxes" in text and "consistency band" in text
    assert "Orange curve" in text and "95% bootstrap band" in text
    assert "uses these 10 bins" in text and "the tables use 15" in text


def test_cd_bars_only_when_the_omnibus_test_rejects_and_it_is_named(tmp_path):
    ctx = _context(tmp_path)
    for r in ctx["ranks"]:
        fr = r["friedman"]
        text = r["friedman_text"]
        assert text.startswith("Omnibus test: Iman-Davenport F = ")
        assert "the p-value used" in text and "Friedman's χ²" in text
        assert r["rejects"] == (fr.p_f < 0.05)
        assert ("no post-hoc (Nemenyi) groups are drawn" in text) == (not r["rejects"])


def test_first_screen_shows_finding_items_with_direction_and_to_check_apart(tmp_path):
    # T-scaling significantly lowers the unbiased ECE against Uncal on both models (supported,
    # better); on NLL it is better on one model and worse on the other (to check, mixed)
    from calbench.stats.comparisons import NULL_HYPOTHESES

    def row(model, metric, d, way):
        return _cmp(
            0.001, 0.004, 0.0, model=model, metric=metric, difference=d, direction=way,
            test="jackknife_z", n_permutations=0, p_floor=0.0,
            null_hypothesis=NULL_HYPOTHESES["jackknife_z"],
        )  # fmt: skip

    compare = [
        row("m1", "ece_ub", -0.03, "better"),
        row("m2", "ece_ub", -0.01, "better"),
        row("m1", "nll", -0.05, "better"),
        row("m2", "nll", 0.02, "worse"),
    ]
    prov = {"config": "", "packages": {}, "logits": [], "splits": [], "datasets": []}
    ctx = build_context(rows=_rows(), compare=compare, spec=_spec(), grids={},
                               provenance=prov)  # fmt: skip
    items = ctx["findings"]["items"]
    (sup,) = [d for d in items if d["family"] == "vs:uncalibrated" and d["support"] == "supported"]
    assert sup["direction"] == "better" and sup["size"] == pytest.approx(-0.02)
    assert sup["text"].startswith("T-scaling lowers Unbiased ECE vs Uncal on 2/2 models")
    (fam,) = [f for f in ctx["findings_view"]["families"] if f["family"] == "Against Uncal"]
    assert [(f["text"], f["arrow"]) for f in fam["found"]] == [(sup["text"], "▲")]
    mixed = [d["text"] for d in items if d["direction"] == "mixed"]
    assert mixed and set(mixed) <= set(ctx["findings_view"]["to_check"])
    html = render.render_html(ctx)
    first = html.split('<section id="findings"', 1)[1].split("</section>", 1)[0]
    assert "<h3>Against Uncal</h3>" in first and 'class="better"' in first
    assert first.index(sup["text"]) < first.index("To check") < first.index(mixed[0])
    # the comparison heatmaps: one per compared metric, none marked descriptive
    figs = ctx["compare"]["figures"]
    assert [f["metric"] for f in figs] == ["ece_ub", "nll"]
    assert not any(f["descriptive"] for f in figs)


def test_no_repository_paths_in_interval_notes():
    # a reader of the standalone report cannot open repository files: every no-interval reason
    # of the registry is printed without one, and reads as a sentence
    from calbench.display import BENCH_NAME, DOCS_URL, without_repository_paths
    from calbench.metrics import METRICS
    from calbench.report import views as V

    notes = {m: V.interval_note(m) for m in METRICS}
    assert not [n for n in notes.values() if re.search(r"\b(?:perf|docs|tests|scripts)/", n)]
    assert without_repository_paths("x (perf/bench_coverage.py)") == (
        "x (simulation in the project's benchmarks, outside this report)"
    )
    assert without_repository_paths("its coverage is not verified: perf/b.py knows it") == (
        f"its coverage is not verified: {BENCH_NAME} knows it"
    )
    assert without_repository_paths("see docs/statistics.md.") == f"see {DOCS_URL}."
