"""The HTML report: autoescaping, embedded figures, bold cells, provenance."""

from __future__ import annotations

import base64
import re
import struct
import zlib
from pathlib import Path

import pytest

from calbench.report import render

TEMPLATE = Path(__file__).resolve().parents[2] / "workflow" / "templates" / "report.html.j2"


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


def _context(tmp_path):
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
        "packages": render.package_versions(),
        "logits": [],
        "splits": [],
        "datasets": [],
    }
    return render.build_context(
        rows=_rows(), compare=compare, spec=_spec(), grids={"ds/m1": str(png)}, provenance=prov
    )


def test_report_escapes_names_from_the_config(tmp_path):
    html = render.render_html(TEMPLATE, _context(tmp_path))
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Study &lt;b&gt;1&lt;/b&gt;" in html


def test_report_bold_is_best_per_row(tmp_path):
    html = render.render_html(TEMPLATE, _context(tmp_path))
    ece_table = re.search(
        r'<table class="metric-table" data-metric="ece">(.*?)</table>', html, re.S
    ).group(1)
    bodies = re.findall(r"<tr>(.*?)</tr>", ece_table.split("<tbody>")[1], re.S)
    assert len(bodies) == 2
    for body in bodies:
        cells = re.findall(r'<td class="num">(.*?)</td>', body, re.S)
        # columns: Uncal (0.05 -> 5.00) and T-scaling (0.01 -> 1.00): T-scaling bold
        assert cells[0].startswith("5.") and "<b>" not in cells[0]
        assert cells[1].startswith("<b>1.")
    acc_table = re.search(r'data-metric="accuracy">(.*?)</table>', html, re.S).group(1)
    assert acc_table.count("<b>") == 4  # ties: all bold
    assert "T-scaling" in html and "Uncal" in html


def test_report_embeds_figures_and_is_self_contained(tmp_path):
    html = render.render_html(TEMPLATE, _context(tmp_path))
    srcs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert len(srcs) == 1 and srcs[0].startswith("data:image/png;base64,")
    assert base64.b64decode(srcs[0].split(",", 1)[1]) == tiny_png()
    assert "http://" not in html and "https://" not in html  # nothing fetched from elsewhere
    assert 'id="losses"' in html and 'id="compare"' in html
    assert "numpy" in html  # provenance lists package versions


def test_png_data_uri_refuses_other_files(tmp_path):
    p = tmp_path / "x.png"
    p.write_text("not a png")
    with pytest.raises(ValueError, match="not a PNG"):
        render.png_data_uri(p)


def test_render_html_missing_template(tmp_path):
    with pytest.raises(FileNotFoundError, match="template"):
        render.render_html(tmp_path / "nope.j2", {})


def test_render_html_undefined_variable_is_a_value_error(tmp_path):
    t = tmp_path / "t.html.j2"
    t.write_text("{{ missing_name }}")
    with pytest.raises(ValueError, match="failed to render"):
        render.render_html(t, {})


def test_model_label():
    assert render.model_label("m", {"name": "LeNet-5", "loss": "FL 1"}) == "LeNet-5 (FL 1)"
    assert render.model_label("m", None) == "m"
