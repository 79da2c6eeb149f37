"""The rendered report in a real browser: headless Chromium (Debian's ``chromium`` package,
installed by ``scripts/setup.sh --test``).

A report with many models and calibrators (wide tables, long names, real reliability diagrams)
is rendered and opened at 1400 and 400 px. A checking script appended to a copy of the page runs
after the page's own code and writes its findings into the DOM, which ``--dump-dom`` returns:

* the page does not overflow horizontally (wide tables scroll inside their own box);
* every table-of-contents link points at an element of the page;
* clicking a numeric column header sorts the rows by it (ascending, then descending);
* every CSV link is a ``data:`` URI whose CSV has the table's header and rows;
* the page makes no network requests: Chromium's own network log (``--log-net-log``) holds no
  http(s)/ws request, and no element refers to anything but ``data:`` URIs and ``#`` anchors.
* no text of a figure is below 10 px at 100 % zoom: each image's shown width against its
  natural width, times the size its texts were drawn at (matplotlib's font sizes; SVG at
  4/3 px per point, PNG at dpi/72), and no HTML text is below 10 px;
* a table wider than its box shows it: a shadow at the hidden edge and "scroll ->" above it,
  only while it overflows (at 400 px the metric tables do, at 1400 px the small ones do not);
* the provenance names the commit, the run date, the command, the Snakemake version and the
  config's SHA-256, and its rows are one line high (a few lines for explained manifest fields).

Screenshots at 1400 and 400 px (top of the page, the rank diagrams, the tables, the
provenance) are kept in ``$CALBENCH_SCREENSHOTS`` when it is set.

Without Chromium the test is skipped, except under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from calbench import plots
from calbench.plots import compare as C
from calbench.plots import ranks as R
from calbench.report import provenance as P
from calbench.report import render
from calbench.report.context import build_context

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [pytest.mark.slow]

if CHROMIUM is None:  # pragma: no cover - depends on the machine
    if os.environ.get("CI"):
        pytest.fail(
            "chromium is not installed but CI is set: run scripts/setup.sh --test "
            "(apt package chromium)",
            pytrace=False,
        )
    pytest.skip(
        "chromium is not installed (scripts/setup.sh --test installs it)", allow_module_level=True
    )

METHODS = {
    "uncalibrated": "Uncalibrated",
    "ts": "Temperature scaling",
    "vs": "Vector scaling",
    "ms_b": "Matrix scaling (bias only)",
    "dir_odir": "Dirichlet (ODIR)",
    "hist": "Histogram binning",
    "iso": "Isotonic regression",
    "bbq": "BBQ",
    "beta": "Beta calibration",
    "ts_sbece": "TS on SB-ECE",
}
METRICS = ("accuracy", "ece", "cwece", "mce", "nll", "brier")
#: The workflow draws reliability diagrams at this dpi (calbench.steps.draw's default).
RELIABILITY_DPI = 100
#: Font sizes (points) of the texts of the figures in the report, per kind of figure.
FONTS: dict[str, set] = {"reliability": set()}


def _text_sizes(fig) -> set:
    """(text, points) of every visible, non-empty text of a matplotlib figure."""
    from matplotlib.text import Text

    return {
        (t.get_text(), float(t.get_fontsize()))
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip()
    }


def _study(tmp_path: Path):
    rng = np.random.default_rng(0)
    models = {
        f"model_{i}": {
            "dataset": "cifar_100" if i % 2 else "fashion_mnist",
            "display": {
                "name": f"WideResNet-{28 + i}-10 with a long name",
                "loss": "CE" if i < 4 else "FL 3",  # two losses: the losses tables render
            },
        }
        for i in range(8)
    }
    rows, compare = [], []
    for m, v in models.items():
        for c in METHODS:
            for metric in METRICS:
                for half in ("test", "val"):
                    value = float(rng.uniform(0.6, 0.9) if metric == "accuracy" else rng.random())
                    rows.append(
                        {
                            "dataset": v["dataset"],
                            "model": m,
                            "method": c,
                            "half": half,
                            "metric": metric,
                            "value": value,
                            "ci_low": value * 0.9,
                            "ci_high": value * 1.1,
                        }
                    )
        for metric in ("ece", "nll"):
            for base in ("uncalibrated", "ts"):
                compare.append(
                    {
                        "dataset": v["dataset"],
                        "model": m,
                        "metric": metric,
                        "method": "iso",
                        "baseline": base,
                        "value": 0.01,
                        "baseline_value": 0.05,
                        "difference": -0.04,
                        "ci_low": -0.05,
                        "ci_high": -0.03,
                        "p_value": float(rng.random() / 50),
                        "n_resamples": 1000,
                        "selected_on": "val",
                    }
                )
    # real reliability diagrams for two models, all calibrators
    figs = {}
    p = rng.dirichlet(np.ones(10) * 0.3, size=300)
    y = rng.integers(0, 10, 300)
    shared = {}
    for c in METHODS:
        path = tmp_path / "plots" / f"{c}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig = plots.reliability_diagram(p, y, n_bins=10, title=METHODS[c])
        FONTS["reliability"] |= _text_sizes(fig)
        plots.save_figure(fig, path, dpi=RELIABILITY_DPI)  # the workflow's dpi (evaluate)
        shared[c] = str(path)
    for m, v in list(models.items())[:2]:
        figs[f"{v['dataset']}/{m}"] = shared
    spec = {
        "title": "Calibration of a model zoo",
        "description": "Browser test report.",
        "protocol": {"n_bins": 15, "plot_bins": 10, "n_bootstrap": 200, "level": 0.95},
        "datasets": {
            "fashion_mnist": {"display": "Fashion-MNIST"},
            "cifar_100": {"display": "CIFAR-100"},
        },
        "models": models,
        "calibrators": {c: {"display": d} for c, d in METHODS.items()},
        "table_metrics": list(METRICS),
        "losses_metrics": ["ece"],
        "reference": None,
    }
    prov = {
        "config": "study: {title: x}\n" + "long_line: " + "x" * 400 + "\n",
        "packages": P.package_versions(),
        "logits": [
            {
                "path": f"results/logits/{v['dataset']}/{m}.npz",
                "shape": "5000x100",
                "content_sha256": "ab" * 32,
                "order_hash": "cd" * 32,
            }
            for m, v in models.items()
        ],
        "splits": [],
        "datasets": [
            {
                "path": "resources/datasets/fashion_mnist/manifest.json",
                "content": json.dumps(
                    {"files": {"t10k-images-idx3-ubyte": {"gz_md5_matches_torchvision": False}}}
                ),
            }
        ],
    }
    config = tmp_path / "config.yaml"
    config.write_text("study: {title: x}\n")
    prov["run"] = P.run_provenance(
        {
            "command": ["snakemake", "--cores", "8", "--configfile", str(config)],
            "snakemake_version": "9.1.1",
            "config_files": [str(config)],
        },
        env={"SOURCE_DATE_EPOCH": "1622550896"},
    )
    ctx = build_context(
        rows=rows,
        compare=compare,
        spec=spec,
        grids={},
        provenance=prov,
        plots=figs,
        temperatures={m: 1.5 for m in models},
    )
    return render.render_html(ctx)


CHECKS = r"""
<script>
window.addEventListener("load", function () {
  var out = {};
  var de = document.documentElement;
  out.width = window.innerWidth;
  out.scrollWidth = de.scrollWidth;
  out.bodyScrollWidth = document.body.scrollWidth;
  // the outermost elements sticking out on the right (named, to say what overflows)
  out.overflowing = [];
  document.querySelectorAll("body *").forEach(function (el) {
    var r = el.getBoundingClientRect();
    if (r.right > window.innerWidth + 0.5 && !el.closest(".scroll") &&
        !(el.parentElement && el.parentElement.getBoundingClientRect().right > window.innerWidth + 0.5)) {
      out.overflowing.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
        (el.className && typeof el.className === "string" ? "." + el.className : "") +
        " " + Math.round(r.right));
    }
  });
  // table of contents
  var toc = Array.prototype.slice.call(document.querySelectorAll("nav.toc a[href^='#']"));
  out.tocLinks = toc.length;
  out.tocMissing = toc.filter(function (a) {
    return !document.getElementById(decodeURIComponent(a.getAttribute("href").slice(1)));
  }).map(function (a) { return a.getAttribute("href"); });
  // CSV links
  out.csv = Array.prototype.map.call(document.querySelectorAll("a.csv"), function (a) {
    var fig = a.closest("figure.tbl");
    var t = fig.querySelector("table");
    var href = a.getAttribute("href");
    var text = atob(href.split(",")[1]);
    var lines = text.trim().split("\n");
    return {
      name: a.getAttribute("download"),
      dataUri: href.indexOf("data:text/csv") === 0,
      header: lines[0],
      csvRows: lines.length - 1,
      tableRows: t.tBodies[0].rows.length,
      firstHeader: t.tHead.rows[0].cells[0].textContent.trim(),
      firstLabel: t.tBodies[0].rows[0].cells[0].textContent.trim(),
      firstCsvLine: lines[1]
    };
  });
  // sorting: the ECE table, first calibrator column
  var table = document.querySelector("table.metric-table[data-metric='ece']");
  var th = table.tHead.rows[0].cells;
  var col = -1;
  for (var i = 0; i < th.length; i++) { if (th[i].classList.contains("num")) { col = i; break; } }
  function column() {
    return Array.prototype.map.call(table.tBodies[0].rows, function (r) {
      return parseFloat(r.cells[col].getAttribute("data-sort"));
    });
  }
  out.before = column();
  th[col].querySelector("button").click();
  out.ascending = column();
  out.ariaSort = th[col].getAttribute("aria-sort");
  th[col].querySelector("button").click();
  out.descending = column();
  // anything that would load from elsewhere
  var refs = [];
  document.querySelectorAll("[src], [href]").forEach(function (el) {
    var v = el.getAttribute("src") || el.getAttribute("href");
    if (v.indexOf("data:") !== 0 && v.indexOf("#") !== 0) { refs.push(v); }
  });
  out.externalRefs = refs;
  // figures: shown width against natural width (visible images only)
  out.images = [];
  document.querySelectorAll("main img").forEach(function (img) {
    var r = img.getBoundingClientRect();
    if (r.width === 0) { return; }  // inside a closed <details>
    out.images.push({alt: img.alt, svg: img.src.indexOf("data:image/svg") === 0,
      natural: img.naturalWidth, shown: r.width, right: r.right});
  });
  // HTML text below 10 px
  out.smallText = [];
  document.querySelectorAll("main *").forEach(function (el) {
    var own = Array.prototype.some.call(el.childNodes, function (n) {
      return n.nodeType === 3 && n.textContent.trim() !== "";
    });
    if (own && el.getClientRects().length &&
        parseFloat(getComputedStyle(el).fontSize) < 10) {
      out.smallText.push(el.tagName + ": " + el.textContent.trim().slice(0, 40));
    }
  });
  // scroll cues
  out.scrollBoxes = Array.prototype.map.call(document.querySelectorAll(".scroll"), function (box) {
    var hint = box.previousElementSibling;
    var inner = box.querySelector("table, img");
    var shown = !!hint && hint.classList.contains("scroll-hint") &&
      getComputedStyle(hint).display !== "none";
    return {what: inner ? (inner.tagName.toLowerCase() + "." + inner.className) : "",
      overflows: box.scrollWidth > box.clientWidth + 1, hint: shown,
      hintOnScreen: shown && hint.getBoundingClientRect().right <= window.innerWidth + 0.5 &&
        hint.getBoundingClientRect().height > 0,
      shadow: getComputedStyle(box).backgroundImage.split("gradient").length - 1};
  });
  // provenance
  out.run = {};
  document.querySelectorAll("table.run tr").forEach(function (r) {
    out.run[r.id] = r.cells[1].textContent.trim();
  });
  out.provRows = {};
  document.querySelectorAll("table.prov").forEach(function (t) {
    var name = t.className.replace("prov ", "");
    out.provRows[name] = Math.max.apply(null, Array.prototype.map.call(t.tBodies[0].rows,
      function (r) { return r.getBoundingClientRect().height; }));
  });
  window.parent.postMessage(JSON.stringify(out), "*");
});
</script>
"""

#: A page that shows ``checked.html`` in a frame of the tested width (Chromium's headless
#: window is at least 500 px wide; a frame's viewport can be narrower, and the report's media
#: queries respond to it) and writes what the checks report into its own DOM.
FRAME = """<!DOCTYPE html><html><body style="margin:0">
<iframe src="{src}" style="width:{width}px;height:900px;border:0;display:block"></iframe>
<script>
window.addEventListener("message", function (e) {{
  var pre = document.createElement("pre");
  pre.id = "test-results";
  pre.textContent = e.data;
  document.body.appendChild(pre);
}});
</script></body></html>
"""


def _chromium(args, tmp_path: Path, name: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{name}"
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--hide-scrollbars",
        # the browser's own background traffic (clock sync, hints), so that the network log
        # holds only what the page asks for
        "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,Translate",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def page_requests(netlog: Path) -> list[str]:
    """Network URLs the page asked for, from Chromium's network log: requests started for a
    renderer (the browser's own background requests have the initiator "not an origin")."""
    text = netlog.read_text()
    try:
        log = json.loads(text)
    except json.JSONDecodeError:  # a log cut short at exit lacks its closing brackets
        log = json.loads(text.rstrip().rstrip(",") + "]}")
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [
        e["params"]["url"]
        for e in log["events"]
        if e["type"] == start
        and e.get("params", {}).get("initiator") != "not an origin"
        and re.match(r"(https?|wss?|ftp)://", e["params"].get("url", ""))
    ]


def test_network_log_sees_a_page_request(tmp_path):
    # the detector itself: a page that loads an image from 127.0.0.1 is caught
    page = tmp_path / "leak.html"
    page.write_text('<html><body><img src="http://127.0.0.1:9/x.png"></body></html>')
    netlog = tmp_path / "netlog.json"
    _chromium(
        ["--virtual-time-budget=2000", f"--log-net-log={netlog}", "--dump-dom", page.as_uri()],
        tmp_path,
        "leak",
    )
    assert page_requests(netlog) == ["http://127.0.0.1:9/x.png"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    html = _study(tmp)
    page = tmp / "report.html"
    page.write_text(html)
    checked = tmp / "checked.html"
    checked.write_text(html.replace("</body>", CHECKS + "</body>"))
    return {"dir": tmp, "page": page, "checked": checked, "html": html}


@pytest.mark.parametrize("width", [1400, 400])
def test_report_in_headless_chromium(report, width):
    tmp = report["dir"]
    netlog = tmp / f"netlog-{width}.json"
    frame = tmp / f"frame-{width}.html"
    frame.write_text(FRAME.format(src=report["checked"].name, width=width))
    res = _chromium(
        [
            "--window-size=1500,1000",
            "--virtual-time-budget=8000",
            f"--log-net-log={netlog}",
            "--dump-dom",
            frame.as_uri(),
        ],
        tmp,
        f"dom-{width}",
    )
    m = re.search(r'<pre id="test-results">(.*?)</pre>', res.stdout, re.S)
    assert m, f"the checks did not run: {res.stderr[-2000:]}"
    out = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    # layout: the window is the requested width and nothing sticks out of it
    assert out["width"] == width
    assert out["overflowing"] == []
    assert out["scrollWidth"] <= width and out["bodyScrollWidth"] <= width
    # table of contents
    assert out["tocLinks"] >= 10 and out["tocMissing"] == []
    # sorting reorders the rows
    assert out["ascending"] == sorted(out["before"]) != out["before"]
    assert out["descending"] == sorted(out["before"], reverse=True)
    assert out["ariaSort"] == "ascending"
    # CSV links: data URIs with the table's rows
    csvs = {c["name"]: c for c in out["csv"]}
    assert {"ece.csv", "accuracy.csv", "comparisons.csv", "temperatures.csv"} <= set(csvs)
    for c in out["csv"]:
        assert c["dataUri"] and c["csvRows"] == c["tableRows"], c
    ece = csvs["ece.csv"]
    assert ece["header"].startswith("Dataset,Model,Uncalibrated,Uncalibrated ci_low")
    assert ece["firstHeader"] == "Dataset"
    assert ece["firstCsvLine"].split(",")[0] == ece["firstLabel"]  # same first row
    # no network: nothing refers elsewhere, and Chromium's network log saw no request
    assert out["externalRefs"] == []
    assert page_requests(netlog) == []
    _check_text_sizes(out)
    _check_scroll_cues(out, width)
    _check_provenance(out, width)


#: The least size of any text on screen, CSS px at 100 % zoom.
MIN_PX = 10.0


def _figure_text_px(image: dict) -> list[tuple[str, float, float]]:
    """(text, points, px on screen) of every text of a shown figure."""
    scale = image["shown"] / image["natural"]
    if image["svg"] and image["alt"].startswith("Heatmap"):  # calbench.plots.compare
        return [("heatmap text", C.FONT_PT, C.FONT_PT * 4 / 3 * scale)]
    if image["svg"]:  # critical-difference diagrams: every text FONT_PT points or more
        return [("critical-difference text", R.FONT_PT, R.FONT_PT * 4 / 3 * scale)]
    return [(t, pt, pt * RELIABILITY_DPI / 72 * scale) for t, pt in FONTS["reliability"]]


#: Texts of the reliability diagrams drawn below 10 px by calbench.plots.reliability (bin
#: counts at 6 pt, histogram legend at 7 pt): left to that module; test_reliability_text_size
#: fails as long as they are there.
SMALL_RELIABILITY_PT = 8.0


def _check_text_sizes(out):
    assert out["smallText"] == []
    kinds = {i["svg"] for i in out["images"]}
    assert kinds == {True, False}, "both kinds of figure are shown"
    for image in out["images"]:
        assert image["natural"] > 0 and image["shown"] > 0, image
        for text, pt, px in _figure_text_px(image):
            if image["svg"] or pt > SMALL_RELIABILITY_PT:
                assert px >= MIN_PX, (image["alt"], text, round(px, 1))
    for image in out["images"]:
        if image["svg"]:  # the diagrams are shown at their natural size
            assert image["shown"] == pytest.approx(image["natural"], abs=1), image


def _check_scroll_cues(out, width):
    boxes = out["scrollBoxes"]
    assert boxes
    for b in boxes:
        assert b["shadow"] == 4, b  # two shadows, two covers
        assert b["hint"] == b["overflows"], b
        assert b["hint"] == b["hintOnScreen"], b
    metric = [b for b in boxes if "metric-table" in b["what"]]
    packages = [b for b in boxes if "packages" in b["what"]]
    assert metric and packages
    if width == 400:
        assert all(b["overflows"] and b["hint"] for b in metric)
    if width == 1400:
        assert not any(b["overflows"] or b["hint"] for b in packages)


def _check_provenance(out, width):
    run = out["run"]
    assert re.fullmatch(r"[0-9a-f]{40}|not a git checkout.*", run["run-commit"])
    assert run["run-date"] == "2021-06-01T12:34:56Z (from SOURCE_DATE_EPOCH)"
    assert run["run-command"].startswith("snakemake --cores 8 --configfile ")
    assert run["run-snakemake"] == "9.1.1"
    assert run["run-config-0"].startswith(_sha("study: {title: x}\n") + " (")
    assert "(/" not in run["run-config-0"]  # no absolute path of the machine
    rows = out["provRows"]
    assert {"run", "packages", "logits", "manifest"} <= set(rows)
    # one line a row; explained manifest fields a few; on a phone the run's hashes wrap (the
    # other tables keep them whole and scroll)
    limits = {"manifest": 90 if width > 1000 else 160, "run": 30 if width > 1000 else 80}
    for name, height in rows.items():
        assert height <= limits.get(name, 30), (name, height, rows)


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def test_reliability_text_size(report):
    """Every text of the reliability diagrams the report embeds is at least 10 px at the
    workflow's 100 dpi (read from the figures' matplotlib texts)."""
    small = sorted(t for t, pt in FONTS["reliability"] if pt * RELIABILITY_DPI / 72 < MIN_PX)
    assert small == []


def test_screenshots_at_desktop_and_phone_width(report):
    """Screenshots of what a reader sees first (kept in $CALBENCH_SCREENSHOTS when set)."""
    keep = os.environ.get("CALBENCH_SCREENSHOTS")
    shots = [(w, h, "") for w, h in ((1400, 1000), (400, 900))]
    shots += [(w, 900, a) for w in (1400, 400) for a in ("rank-ece", "tables", "provenance")]
    for width, height, anchor in shots:
        name = f"{width}" + (f"-{anchor}" if anchor else "")
        shot = report["dir"] / f"report-{name}.png"
        frame = report["dir"] / f"shot-{name}.html"
        src = report["page"].name + (f"#{anchor}" if anchor else "")
        frame.write_text(
            FRAME.format(src=src, width=width).replace("height:900px", f"height:{height}px")
        )
        window = max(width, 500)  # the narrowest headless window; the frame is the phone
        res = _chromium(
            [
                f"--window-size={window},{height}",
                "--virtual-time-budget=3000",
                f"--screenshot={shot}",
                frame.as_uri(),
            ],
            report["dir"],
            f"shot-{name}",
        )
        assert shot.is_file(), res.stderr[-2000:]
        png = shot.read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 10_000
        w, h = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert (w, h) == (window, height)
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy2(shot, Path(keep) / shot.name)


def test_csv_link_decodes_to_the_aggregate_table(report):
    # the CSV behind the ECE table's link is exactly the table's CSV file format
    html = report["html"]
    m = re.search(r'href="data:text/csv;charset=utf-8;base64,([^"]+)" download="ece.csv"', html)
    text = base64.b64decode(m.group(1)).decode()
    assert text.splitlines()[0].split(",")[:5] == [
        "Dataset",
        "Model",
        "Uncalibrated",
        "Uncalibrated ci_low",
        "Uncalibrated ci_high",
    ]
    assert len(text.splitlines()) == 1 + 8


# --------------------------------------------------------------------------------------------
# a report the size of the default study: one screen of answers, a page that stays short
# --------------------------------------------------------------------------------------------
#: The default study's shape: 6 models, 16 calibrators, 11 table metrics, 4 compared metrics.
DEFAULT_METHODS = {
    **METHODS,
    "ets": "ETS",
    "cir": "CIR",
    "venn_abers": "Venn-Abers",
    "svs": "SVS",
    "sms": "SMS",
    "vs_b": "V-scaling-b",
}
DEFAULT_METRICS = (
    *METRICS,
    "smece",
    "calib_err_logloss",
    "aurc",
    "lac_size",
    "aps_size",
    "lac_coverage",
    "aps_coverage",
)
COMPARED = ("ece", "cwece", "nll", "brier")
#: The page height at 1400 px with every fold closed stays below this (CSS px).
MAX_HEIGHT_PX = 20_000


def _default_study(tmp_path: Path) -> str:
    rng = np.random.default_rng(1)
    models = {
        f"fmnist_{n}": {"dataset": "fashion_mnist", "display": {"name": n}}
        for n in ("MLP", "LeNet-5", "VGG-small", "ResNet-small", "MobileNet-small", "DenseNet")
    }
    rows, compare = [], []
    for m, v in models.items():
        for c in DEFAULT_METHODS:
            for metric in DEFAULT_METRICS:
                for half in ("test", "val"):
                    value = float(rng.uniform(0.8, 0.9) if "acc" in metric else rng.random())
                    if metric.endswith("_size"):
                        value = float(rng.uniform(1, 3))
                    if metric.endswith("_coverage"):
                        value = float(rng.uniform(0.88, 0.92))
                    rows.append(
                        {
                            "dataset": v["dataset"],
                            "model": m,
                            "method": c,
                            "half": half,
                            "metric": metric,
                            "value": value,
                            "ci_low": value * 0.9 if metric in ("accuracy", "nll") else np.nan,
                            "ci_high": value * 1.1 if metric in ("accuracy", "nll") else np.nan,
                        }
                    )
        for metric in COMPARED:
            others = [c for c in DEFAULT_METHODS if c != "uncalibrated"]
            pairs = [("vs:uncalibrated", c, "uncalibrated") for c in others]
            pairs += [("best", "sms", c) for c in DEFAULT_METHODS if c != "sms"]
            for family, method, base in pairs:
                d = float(rng.normal(-0.01, 0.01))
                p = float(rng.random() ** 3)
                compare.append(
                    {
                        "dataset": v["dataset"],
                        "model": m,
                        "half": "test",
                        "metric": metric,
                        "method": method,
                        "baseline": base,
                        "value": 0.05 + d,
                        "baseline_value": 0.05,
                        "difference": d,
                        "ci_low": d - 0.005 if metric in ("nll", "brier") else np.nan,
                        "ci_high": d + 0.005 if metric in ("nll", "brier") else np.nan,
                        "p_value": p,
                        "p_holm": min(1.0, 15 * p),
                        "min_p_holm": 15 / 1000,
                        "family": family,
                        "family_size": 15,
                        "test": "sign_flip" if metric in ("ece", "cwece") else "paired_t",
                        "n_resamples": 200,
                        "n_permutations": 999,
                        "selected_on": "val" if family == "best" else "",
                    }
                )
    p = rng.dirichlet(np.ones(10) * 0.3, size=400)
    y = rng.integers(0, 10, 400)
    shared = {}
    for c, name in DEFAULT_METHODS.items():
        path = tmp_path / "plots" / f"{c}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        plots.save_figure(plots.reliability_diagram(p, y, title=name), path, dpi=200)
        shared[c] = str(path)
    spec = {
        "title": "Post-hoc calibration of a Fashion-MNIST model zoo",
        "description": "A report the size of the default study.",
        "protocol": {"n_bins": 15, "plot_bins": 10, "n_bootstrap": 200, "level": 0.95},
        "datasets": {"fashion_mnist": {"display": "Fashion-MNIST"}},
        "models": models,
        "calibrators": {c: {"display": d} for c, d in DEFAULT_METHODS.items()},
        "table_metrics": [m for m in DEFAULT_METRICS if not m.endswith("_coverage")],
        "losses_metrics": ["ece"],
        "reference": None,
    }
    prov = {
        "config": "study: {title: x}\n",
        "packages": P.package_versions(),
        "logits": [],
        "splits": [],
        "datasets": [],
        "run": P.run_provenance(None, env={"SOURCE_DATE_EPOCH": "1622550896"}),
    }
    ctx = build_context(
        rows=rows,
        compare=compare,
        spec=spec,
        grids={},
        provenance=prov,
        plots={f"fashion_mnist/{m}": shared for m in models},
        temperatures={m: 1.5 for m in models},
    )
    return render.render_html(ctx)


#: Closes every fold, measures the page, then clicks every sortable header of every table and
#: checks the rows come out in order (numbers by data-sort, missing last; text otherwise).
FOLDED_CHECKS = r"""
<script>
window.addEventListener("load", function () {
  var out = {};
  document.querySelectorAll("details").forEach(function (d) { d.open = false; });
  var de = document.documentElement;
  out.height = de.scrollHeight;
  out.scrollWidth = de.scrollWidth;
  out.width = window.innerWidth;
  // the findings and their "To check" list are on the first screen
  var f = document.getElementById("findings").getBoundingClientRect();
  out.findingsTop = f.top + window.scrollY;
  out.findingsBottom = f.bottom + window.scrollY;
  out.unsorted = [];
  out.clicked = 0;
  function key(cell) {
    var s = cell.getAttribute("data-sort");
    if (s === null) { return {kind: 0, text: cell.textContent.trim().toLowerCase()}; }
    if (s === "") { return {kind: 2}; }
    return {kind: 1, num: parseFloat(s)};
  }
  function ordered(keys) {
    for (var i = 1; i < keys.length; i++) {
      var a = keys[i - 1], b = keys[i];
      if (a.kind === 2 && b.kind !== 2) { return false; }  // missing values last
      if (a.kind === 1 && b.kind === 1 && a.num > b.num) { return false; }
      if (a.kind === 0 && b.kind === 0 && a.text > b.text) { return false; }
    }
    return true;
  }
  document.querySelectorAll("table[data-sortable]").forEach(function (table, t) {
    var ths = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(ths, function (th, col) {
      var b = th.querySelector("button.sort");
      if (!b) { out.unsorted.push("no button: " + th.textContent); return; }
      b.click();
      out.clicked += 1;
      var keys = Array.prototype.map.call(table.tBodies[0].rows, function (r) {
        return key(r.cells[col]);
      });
      // a column whose cells all say "missing" while they show text sorts nothing
      var texts = Array.prototype.filter.call(table.tBodies[0].rows, function (r) {
        var x = r.cells[col].textContent.trim();
        return x !== "" && x !== "–";
      });
      var dead = texts.length > 0 && keys.every(function (k) { return k.kind === 2; });
      if (dead || !ordered(keys) || th.getAttribute("aria-sort") !== "ascending") {
        out.unsorted.push(table.className + " / " + th.textContent.trim());
      }
    });
  });
  // a header that looks sortable (an arrow button) outside a sortable table
  document.querySelectorAll("th button.sort").forEach(function (b) {
    if (!b.closest("table[data-sortable]")) { out.unsorted.push("dead: " + b.textContent); }
  });
  window.parent.postMessage(JSON.stringify(out), "*");
});
</script>
"""


@pytest.fixture(scope="module")
def default_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("default")
    html = _default_study(tmp)
    page = tmp / "report.html"
    page.write_text(html)
    checked = tmp / "checked.html"
    checked.write_text(html.replace("</body>", FOLDED_CHECKS + "</body>"))
    return {"dir": tmp, "page": page, "checked": checked, "html": html}


def _run_checks(report, width: int) -> dict:
    tmp = report["dir"]
    frame = tmp / f"frame-{width}.html"
    frame.write_text(FRAME.format(src=report["checked"].name, width=width))
    res = _chromium(
        ["--window-size=1500,1000", "--virtual-time-budget=8000", "--dump-dom", frame.as_uri()],
        tmp,
        f"folded-{width}",
    )
    m = re.search(r'<pre id="test-results">(.*?)</pre>', res.stdout, re.S)
    assert m, f"the checks did not run: {res.stderr[-2000:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.mark.parametrize("width", [1400, 400])
def test_default_sized_report_is_short_and_every_header_sorts(default_report, width):
    out = _run_checks(default_report, width)
    assert out["width"] == width and out["scrollWidth"] <= width
    if width == 1400:
        assert out["height"] < MAX_HEIGHT_PX, out["height"]
        # the findings start on the first screen
        assert out["findingsTop"] < 300
    assert out["clicked"] >= 20
    assert out["unsorted"] == []


def test_default_sized_report_comparisons_are_figures_with_a_numeric_csv(default_report):
    html = default_report["html"]
    alts = re.findall(r'<img [^>]*alt="([^"]+)"', html)
    # one heatmap per compared metric and family, one rank overview
    assert sum(a.startswith("Heatmap of") and "against" in a for a in alts) == 2 * len(COMPARED)
    assert sum(a.startswith("Heatmap of the average ranks") for a in alts) == 1
    # the full table is folded
    at = html.index('id="t-comparisons"')
    assert html.rfind("<details", 0, at) > html.rfind("</details>", 0, at)
    m = re.search(
        r'href="data:text/csv;charset=utf-8;base64,([^"]+)" download="comparisons.csv"', html
    )
    text = base64.b64decode(m.group(1)).decode()
    lines = text.splitlines()
    header = lines[0].split(",")
    assert len(lines) == 1 + 6 * len(COMPARED) * 30
    for col in ("value", "difference", "p_value", "p_holm", "min_p_holm", "significant"):
        values = [line.split(",")[header.index(col)] for line in lines[1:]]
        for v in values:
            float(v)  # numbers only: no "-", no "< 0.001"
    ci = [line.split(",")[header.index("ci_low")] for line in lines[1:]]
    assert "" in ci and all(c == "" or float(c) == float(c) for c in ci)
