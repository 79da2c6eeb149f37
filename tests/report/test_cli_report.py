"""The verbs plot-reliability, aggregate and render-report, run through the real CLI entry point."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from calbench.split import save_split, study_split

PNG = b"\x89PNG\r\n\x1a\n"


def _main(argv):
    from calbench.cli import main

    return main([str(a) for a in argv])


def _read(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """Two models x two calibrators, evaluated and compared through the CLI."""
    d = tmp_path_factory.mktemp("study")
    rng = np.random.default_rng(1)
    n, k = 200, 3
    y = rng.integers(0, k, size=n)
    val, test = study_split(n)
    split = d / "split.npz"
    save_split(split, val, test)
    out = {"dir": d, "split": split, "metrics": [], "compare": [], "logits": [], "grids": []}
    for model, scale in (("m_a", 5.0), ("m_b", 2.0)):
        z = rng.normal(size=(n, k)) + 2.0 * np.eye(k)[y]
        z = (z * scale).astype(np.float32)
        logits = d / f"{model}.npz"
        np.savez(logits, logits=z, labels=y, order_hash="h", model=model, dataset="ds")
        out["logits"].append(logits)
        cals = []
        for method in ("uncalibrated", "ts"):
            cal = d / model / f"{method}.json"
            assert (
                _main(
                    [
                        "fit-calibrator",
                        "--logits",
                        logits,
                        "--split",
                        split,
                        "--method",
                        method,
                        "--out",
                        cal,
                    ]
                )
                == 0
            )
            met = d / "metrics" / model / f"{method}.csv"
            assert (
                _main(
                    [
                        "evaluate",
                        "--logits",
                        logits,
                        "--split",
                        split,
                        "--calibrator",
                        cal,
                        "--metrics",
                        "accuracy,ece,cwece",
                        "--n-bootstrap",
                        "10",
                        "--out",
                        met,
                    ]
                )
                == 0
            )
            out["metrics"].append(met)
            cals.append(cal)
        cmp = d / "compare" / f"{model}.csv"
        assert (
            _main(
                [
                    "compare",
                    "--logits",
                    logits,
                    "--split",
                    split,
                    "--calibrators",
                    *cals,
                    "--metrics",
                    "ece_ub",
                    "--n-bootstrap",
                    "20",
                    "--out",
                    cmp,
                ]
            )
            == 0
        )
        out["compare"].append(cmp)
        grid = d / "plots" / "ds" / model / "grid.png"
        assert (
            _main(
                [
                    "plot-reliability",
                    "--grid",
                    "--logits",
                    logits,
                    "--split",
                    split,
                    "--calibrator",
                    *cals,
                    "--out",
                    grid,
                ]
            )
            == 0
        )
        out["grids"].append(grid)
        out.setdefault("cals", {})[model] = cals
    out["spec"] = {
        "title": "T",
        "models": {
            "m_b": {"dataset": "ds", "display": {"name": "Model <B>", "loss": "CE"}},
            "m_a": {"dataset": "ds", "display": {"name": "Model A", "loss": "FL 2"}},
        },
        "calibrators": {"ts": {"display": "T-scaling"}, "uncalibrated": {"display": "Uncal"}},
        "datasets": {"ds": {"display": "DS"}},
        "table_metrics": ["accuracy", "ece"],
        "losses_metrics": ["ece"],
        "protocol": {"n_bootstrap": 10, "level": 0.95},
    }
    return out


def test_plot_reliability_single_and_grid(study, tmp_path):
    cal = study["cals"]["m_a"][1]
    out = tmp_path / "ts.png"
    assert (
        _main(
            [
                "plot-reliability",
                "--logits",
                study["logits"][0],
                "--split",
                study["split"],
                "--calibrator",
                cal,
                "--out",
                out,
            ]
        )
        == 0
    )
    assert out.read_bytes().startswith(PNG)
    assert study["grids"][0].read_bytes().startswith(PNG)


def test_plot_reliability_several_without_grid_is_refused(study, tmp_path, capsys):
    rc = _main(
        [
            "plot-reliability",
            "--logits",
            study["logits"][0],
            "--split",
            study["split"],
            "--calibrator",
            *study["cals"]["m_a"],
            "--out",
            tmp_path / "x.png",
        ]
    )
    assert rc == 2 and "--grid" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_aggregate_writes_long_csv_and_tables(study, tmp_path):
    spec = json.dumps(study["spec"])
    out_csv, out_cmp, tables = tmp_path / "agg.csv", tmp_path / "cmp.csv", tmp_path / "tables"
    assert (
        _main(
            [
                "aggregate",
                "--metrics",
                *study["metrics"],
                "--compare",
                *study["compare"],
                "--spec",
                spec,
                "--out-csv",
                out_csv,
                "--out-compare",
                out_cmp,
                "--tables-dir",
                tables,
            ]
        )
        == 0
    )
    rows = _read(out_csv)
    assert len(rows) == 2 * 2 * 2 * 3  # models x methods x halves x metrics
    # rows ordered by config order: m_b first, then ts before uncalibrated
    assert (rows[0]["model"], rows[0]["method"], rows[0]["half"], rows[0]["metric"]) == (
        "m_b",
        "ts",
        "test",
        "accuracy",
    )
    src = {
        (r["model"], r["method"], r["half"], r["metric"]): r["value"]
        for p in study["metrics"]
        for r in _read(p)
    }
    assert all(src[(r["model"], r["method"], r["half"], r["metric"])] == r["value"] for r in rows)
    names = sorted(p.name for p in tables.iterdir())
    assert names == sorted(
        [f"{s}.{e}" for s in ("accuracy", "ece", "losses_ece") for e in ("html", "md", "csv", "tex")]
        + ["improvement.csv", "win_rates.csv"]  # header alone: fewer than 5 models
    )
    ece = list(csv.reader((tables / "ece.csv").open()))
    assert ece[0][:3] == ["Dataset", "Model", "T-scaling"]
    assert ece[1][:2] == ["DS", "Model <B> (CE)"]
    v = float(src[("m_b", "ts", "test", "ece")])
    assert ece[1][2] == f"{v * 100:.2f}"
    md = (tables / "ece.md").read_text()
    assert md.count("**") >= 2 * 2 + 2  # title + one bold per row
    cmp_rows = _read(out_cmp)
    # two models x (two calibrators x two baselines: each vs the other baseline, plus the
    # best against the other one), never a method with itself
    assert len(cmp_rows) == 6 and all(r["method"] != r["baseline"] for r in cmp_rows)
    assert sorted({r["family"] for r in cmp_rows}) == ["best", "vs:ts", "vs:uncalibrated"]


def test_aggregate_refuses_duplicate_rows(study, tmp_path, capsys):
    m = study["metrics"][0]
    rc = _main(
        [
            "aggregate",
            "--metrics",
            m,
            m,
            "--spec",
            json.dumps(study["spec"]),
            "--out-csv",
            tmp_path / "a.csv",
            "--tables-dir",
            tmp_path / "t",
        ]
    )
    assert rc == 2 and "repeat" in capsys.readouterr().err
    assert not (tmp_path / "a.csv").exists()


def test_aggregate_with_reference(study, tmp_path):
    rows = _read(study["metrics"][1])  # m_a / ts
    ours = next(float(r["value"]) for r in rows if r["half"] == "test" and r["metric"] == "ece")
    ref = tmp_path / "ref.csv"
    ref.write_text(f"dataset,model,method,metric,value\nDS,A,T-scaling,ece,{ours * 100 + 1.0}\n")
    spec = {
        **study["spec"],
        "reference": {
            "units": "display",
            "tolerances": {"ece": 0.02},
            "rename": {
                "datasets": {"DS": "ds"},
                "models": {"A": "m_a"},
                "methods": {"T-scaling": "ts"},
            },
        },
    }
    tables = tmp_path / "tables"
    assert (
        _main(
            [
                "aggregate",
                "--metrics",
                *study["metrics"],
                "--spec",
                json.dumps(spec),
                "--reference",
                ref,
                "--out-csv",
                tmp_path / "a.csv",
                "--tables-dir",
                tables,
            ]
        )
        == 0
    )
    (row,) = _read(tables / "reference.csv")
    assert (row["model"], row["method"]) == ("m_a", "ts")
    assert float(row["difference"]) == pytest.approx(-0.01)
    assert row["within"] == "True"
    # render-report reads the comparison aggregate wrote (computed once)
    out = tmp_path / "report.html"
    argv = ["render-report", "--metrics", tmp_path / "a.csv"]
    argv += ["--spec", json.dumps(spec), "--reference-table", tables / "reference.csv"]
    assert _main([*argv, "--out", out]) == 0
    html = out.read_text()
    assert "Ours versus published numbers" in html and "T-scaling" in html


def test_render_report_end_to_end(study, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")  # the run's date: the report's one timestamp
    spec = json.dumps(study["spec"])
    agg, cmp = tmp_path / "agg.csv", tmp_path / "cmp.csv"
    assert (
        _main(
            [
                "aggregate",
                "--metrics",
                *study["metrics"],
                "--compare",
                *study["compare"],
                "--spec",
                spec,
                "--out-csv",
                agg,
                "--out-compare",
                cmp,
                "--tables-dir",
                tmp_path / "t",
            ]
        )
        == 0
    )
    out = tmp_path / "reports" / "report.html"
    argv = [
        "render-report",
        "--metrics",
        agg,
        "--compare",
        cmp,
        "--spec",
        spec,
        "--config",
        json.dumps({"models": {"m_a": {"display": {"name": "<script>x</script>"}}}}),
        "--grids",
        *study["grids"],
        "--logits",
        *study["logits"],
        "--splits",
        study["split"],
        "--out",
        out,
    ]
    assert _main(argv) == 0
    html = out.read_text()
    # the only script is the report's own sorting code; names from the config are text
    assert html.count("<script>") == 1 and "<script>x" not in html
    assert "Model &lt;B&gt; (CE)" in html
    assert html.count("data:image/png;base64,") == 2
    from calbench.io import array_digest

    with np.load(study["logits"][0]) as d:
        assert array_digest(d["logits"], d["labels"]) in html
    first = out.read_bytes()
    assert _main(argv) == 0 and out.read_bytes() == first  # deterministic: the date is pinned


def test_render_report_bad_template(study, tmp_path, capsys):
    """The template is calbench's own (package data): a ``--template`` option is refused."""
    argv = ["render-report", "--template", tmp_path / "none.j2", "--metrics", study["metrics"][0]]
    with pytest.raises(SystemExit) as exc:
        _main([*argv, "--spec", "{}", "--out", tmp_path / "r.html"])
    rc = exc.value.code
    assert rc == 2 and "template" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("only", ["ts", "uncalibrated"])
def test_a_one_calibrator_study_aggregates_and_renders(study, tmp_path, only):
    """Models of two training losses and one calibrator: the by-loss tables of a calibrator
    the study lacks are not drawn (aggregate used to fail on the missing uncalibrated rows)."""
    spec = {**study["spec"], "calibrators": {only: study["spec"]["calibrators"][only]}}
    metrics = [p for p in study["metrics"] if p.name == f"{only}.csv"]
    agg, tables = tmp_path / "agg.csv", tmp_path / "tables"
    argv = ["aggregate", "--metrics", *metrics, "--spec", json.dumps(spec)]
    assert _main([*argv, "--out-csv", agg, "--tables-dir", tables]) == 0
    assert {r["method"] for r in _read(agg)} == {only}
    losses = sorted(p.name for p in tables.glob("losses_*"))
    assert losses == (
        [] if only == "ts" else [f"losses_ece.{e}" for e in ("csv", "html", "md", "tex")]
    )
    out = tmp_path / "report.html"
    argv = ["render-report", "--metrics", agg, "--spec", json.dumps(spec)]
    assert _main([*argv, "--out", out]) == 0
    page = out.read_text()
    assert ("losses-ts-ece" in page) == (only == "ts")
