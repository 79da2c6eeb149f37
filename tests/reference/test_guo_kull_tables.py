"""The Guo et al. 2017 / Kull et al. 2019 study outputs (calbench.reference.guo_kull): cell
statuses and tolerances, the Kull conventions derived from our metrics (Brier / K, error), the
summary table and the temperature sweep against hand-computed values, escaping and determinism."""

from __future__ import annotations

import numpy as np
import pytest

from calbench.calibrators import get_calibrator, save_calibrator
from calbench.functional import softmax
from calbench.logits import save_logits
from calbench.metrics import ece
from calbench.reference import guo_kull as G
from calbench.results import GUO_KULL_SUMMARY_COLUMNS
from calbench.split import save_split


def _metric_rows(model, method, values, half="test"):
    return [
        {"dataset": "d", "model": model, "method": method, "half": half, "metric": k, "value": v}
        for k, v in values.items()
    ]


def _find(cells, **where):
    out = [c for c in cells if all(c[k] == v for k, v in where.items())]
    assert out, where
    return out


def test_kull_cells_ok_flagged_and_conventions():
    # Kull's full-precision DenseNet-40 / CIFAR-10 uncalibrated row: error 7.58 %, Brier / K
    # 0.012738, log-loss 0.428207. Ours: accuracy 0.9242, Brier (sum over classes) 0.12738.
    rows = _metric_rows(
        "c10_densenet40",
        "uncalibrated",
        {"accuracy": 0.9242, "brier": 0.12738, "nll": 0.428207 + 4e-5, "ece": 0.055003 + 0.01},
    )
    cells = G.comparison_rows(rows, {"c10_densenet40": 10})
    full = {
        c["published_metric"]: c
        for c in _find(cells, source="kull19_nb", table="full_precision", model="c10_densenet40")
        if c["published_method"] == "Uncal"
    }
    assert full["error_pct"]["ours"] == pytest.approx(0.0758)
    assert full["error_pct"]["status"] == G.OK
    assert full["brier_div_k"]["ours"] == pytest.approx(0.012738)
    assert full["brier_div_k"]["status"] == G.OK
    # log-loss 4e-5 off: within the base tolerance 1e-4 (+ 5e-7 for 6 printed decimals)
    assert full["logloss"]["tolerance"] == pytest.approx(1e-4 + 5e-7)
    assert full["logloss"]["status"] == G.OK
    assert full["ece"]["status"] == G.FLAGGED
    assert full["ece"]["difference"] == pytest.approx(0.01)
    # no classwise-ECE-sum metric among ours: missing, not zero
    assert full["classwise_ece_sum"]["status"] == G.MISSING
    assert full["classwise_ece_sum"]["ours"] is None


def test_tolerance_is_half_a_printed_unit_plus_base():
    cells = G.comparison_rows([], {})
    t4 = _find(cells, source="kull19_nb_table4", published_model="c10_densenet40")
    assert t4[0]["tolerance"] == pytest.approx(G.DEFAULT_TOLERANCES["cwece_sum"] + 0.0005)
    spec = {"tolerances": {"cwece_sum": 0.0}}
    t4 = _find(G.comparison_rows([], {}, spec), source="kull19_nb_table4")
    assert t4[0]["tolerance"] == pytest.approx(0.0005)


def test_reference_band_and_rows_without_logits():
    rows = _metric_rows("c10_resnet110", "ts", {"ece": 0.5})  # far from Guo's 0.83 %
    cells = G.comparison_rows(rows, {})
    guo = _find(cells, source="guo17_T1", model="c10_resnet110", method="ts")[0]
    assert guo["status"] == G.REFERENCE and guo["ours"] == 0.5
    cars = _find(cells, source="guo17_T1", dataset="Cars")
    assert {c["status"] for c in cars} == {G.NO_LOGITS}
    convnet = _find(cells, source="kull19_nb_table4", published_model="c10_convnet")
    assert {c["status"] for c in convnet} == {G.NO_LOGITS}
    # a model left out of the config counts as having no logits
    cells = G.comparison_rows(rows, {}, {"models": {"c100_lenet5": {}}})
    assert (
        _find(cells, source="guo17_T1", published_model="ResNet 110", dataset="CIFAR-10")[0][
            "status"
        ]
        == G.NO_LOGITS
    )


def test_expected_to_differ_and_calibrator_filter():
    rows = _metric_rows("c10_lenet5", "ms_odir", {"nll": 9.0})
    spec = {"expected_to_differ": ["ms_odir"], "calibrators": {"uncalibrated": {}, "ms_odir": {}}}
    cells = G.comparison_rows(rows, {}, spec)
    assert {c["method"] for c in cells} == {"uncalibrated", "ms_odir"}
    c = _find(cells, source="kull19_nb", table="table3", model="c10_lenet5", method="ms_odir")[0]
    assert c["status"] == G.EXPECTED


def test_metric_map_names_a_kull_variant():
    rows = _metric_rows("c10_densenet40", "uncalibrated", {"cw_sum": 0.114303})
    cells = G.comparison_rows(rows, {}, {"metric_map": {"cwece_sum": "cw_sum"}})
    c = _find(cells, source="kull19_nb_table4", model="c10_densenet40", method="uncalibrated")[0]
    assert c["status"] == G.OK and c["ours"] == 0.114303


def test_study_tables_layouts():
    rows = _metric_rows("c100_densenet40", "uncalibrated", {"accuracy": 0.70, "nll": 2.017398})
    tabs = G.study_tables(G.comparison_rows(rows, {}))
    titles = [t["title"] for t in tabs]
    assert titles[0].startswith("Guo et al. 2017, Table 1")
    t3 = next(t for t in tabs if "Table 3" in t["title"])
    assert t3["columns"] == ["Uncal", "TempS", "Dir-L2", "Dir-ODIR", "VecS", "MS-ODIR"]
    assert len(t3["rows"]) == 14
    row = next(r for r in t3["rows"] if r["labels"] == ["densenet40_c100"])
    assert row["cells"][0] == {
        "ours": "2.017398",
        "published": "2.017398",
        "difference": "+0.000000",
        "status": G.OK,
    }
    s2 = next(t for t in tabs if "Table S2" in t["title"])
    d40 = next(r for r in s2["rows"] if r["labels"] == ["CIFAR-100", "DenseNet 40"])
    assert d40["cells"][0]["ours"] == "30.00"  # error %, 2 decimals as Guo prints
    assert d40["cells"][0]["status"] == G.REFERENCE


def test_summary_rows_known_answer():
    # 4 samples, 2 classes; logits chosen so softmax gives confidences 0.9, 0.6, 0.8, 0.7
    conf = np.array([0.9, 0.6, 0.8, 0.7])
    z = np.stack([np.log(conf), np.log(1 - conf)], axis=1)
    y = np.array([0, 1, 0, 0])  # correct, wrong, correct, correct
    cal = get_calibrator("uncalibrated").fit(z, y)
    rows = G.summary_rows({"test": (z, y)}, {"uncalibrated": cal}, model="m", n_bins=10)
    r = rows[0]
    assert r["accuracy"] == pytest.approx(0.75)
    assert r["confidence"] == pytest.approx(0.75)
    # bins of width 0.1: 0.6 | 0.7 | 0.8 | 0.9, one sample each: |1-0.9|+|0-0.6|+|1-0.8|+|1-0.7|
    assert r["ece"] == pytest.approx((0.1 + 0.6 + 0.2 + 0.3) / 4)
    assert r["mce"] == pytest.approx(0.6)
    tab = G.summary_table(rows)
    assert tab["rows"][0]["cells"][0]["ours"] == "75.00"


def test_summary_table_beside_the_slides():
    rows = [
        {
            "model": "c100_densenet40",
            "half": "val",
            "method": "ts",
            "accuracy": 0.7,
            "confidence": 0.7,
            "ece": 0.0154,
            "mce": 0.1,
        }
    ]
    tab = G.summary_table(rows, {"calibrators": {"ts": {"display": "TS"}}})
    assert tab["rows"][0]["labels"] == ["Validation", "TS"]
    ece_cell = tab["rows"][0]["cells"][2]
    assert ece_cell["published"] == "1.54" and ece_cell["difference"] == "+0.00"
    assert ece_cell["status"] == G.REFERENCE


def test_temperature_sweep_values():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(300, 5)) * 3
    y = rng.integers(0, 5, size=300)
    grid, fig, rows = G.temperature_sweep(
        z, y, model="m", temperatures=[0.5, 1, 2], curve=[0.5, 1.0, 3.0], fitted_temperature=1.7
    )
    by = {(r["kind"], r["temperature"]): r["ece"] for r in rows}
    for t in (0.5, 1.0, 2.0):
        assert by[("diagram", t)] == pytest.approx(ece(softmax(z / t), y, 15), abs=1e-12)
    assert by[("curve", 1.0)] == pytest.approx(ece(softmax(z), y, 15), abs=1e-12)
    assert by[("fitted", 1.7)] == pytest.approx(ece(softmax(z / 1.7), y, 15), abs=1e-12)
    assert len(grid.axes) == 6  # guo style: diagram + histogram per temperature
    with pytest.raises(ValueError, match="temperatures"):
        G.temperature_sweep(z, y, model="m", temperatures=[0.0])


def _files(tmp_path, n=400, k=4, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, size=n)
    z = (rng.normal(size=(n, k)) + 3 * np.eye(k)[y]).astype(np.float32)
    logits = tmp_path / "m.npz"
    save_logits(logits, z, y, order_hash="x", model="m", dataset="d")
    split = tmp_path / "split.npz"
    save_split(split, np.arange(0, n, 2), np.arange(1, n, 2))
    ts = get_calibrator("ts").fit(z[::2], y[::2])
    save_calibrator(ts, tmp_path / "ts.json")
    save_calibrator(
        get_calibrator("uncalibrated").fit(z[::2], y[::2]), tmp_path / "uncalibrated.json"
    )
    return logits, split


def test_write_sweep_and_tables_deterministic_and_escaped(tmp_path):
    logits, split = _files(tmp_path)
    outs = []
    for run in ("a", "b"):
        d = tmp_path / run / "sweep" / "d" / "m"
        G.write_sweep(
            logits,
            split,
            model="m",
            out_grid=d / "reliability.png",
            out_curve=d / "ece_vs_temperature.png",
            out_csv=d / "sweep.csv",
            ts_calibrator=tmp_path / "ts.json",
        )
        metrics = tmp_path / run / "metrics.csv"
        metrics.write_text(
            "dataset,model,method,half,metric,value,ci_low,ci_high\n"
            "cifar10,c10_densenet40,uncalibrated,test,nll,0.428207,,\n"
        )
        spec = {"title": "T <script>", "summary_model": "m", "models": {"c10_densenet40": {}}}
        out = tmp_path / run / "out"
        G.write_tables(
            metrics,
            spec,
            out_html=out / "guo_kull.html",
            out_md=out / "tables.md",
            out_csv=out / "cells.csv",
            out_summary=out / "summary.csv",
            summary_logits=logits,
            summary_split=split,
            summary_calibrators={
                "uncalibrated": tmp_path / "uncalibrated.json",
                "ts": tmp_path / "ts.json",
            },
            sweep_csvs=[d / "sweep.csv"],
            sweep_figures={"m": [d / "reliability.png", d / "ece_vs_temperature.png"]},
        )
        outs.append(
            [
                p.read_bytes()
                for p in (
                    d / "reliability.png",
                    d / "ece_vs_temperature.png",
                    d / "sweep.csv",
                    out / "guo_kull.html",
                    out / "tables.md",
                    out / "cells.csv",
                    out / "summary.csv",
                )
            ]
        )
    assert outs[0] == outs[1]
    page = (tmp_path / "a" / "out" / "guo_kull.html").read_text()
    assert "<script>" not in page and "T &lt;script&gt;" in page
    assert page.count("data:image/png;base64,") == 2
    assert "http://" not in page and "https://" not in page
    summary = (tmp_path / "a" / "out" / "summary.csv").read_text().splitlines()
    assert summary[0] == ",".join(GUO_KULL_SUMMARY_COLUMNS)
    assert len(summary) == 1 + 2 * 2  # (val, test) x (uncalibrated, ts)
    md = (tmp_path / "a" / "out" / "tables.md").read_text()
    assert "| Model | T = 0.5 | T = 1 | T = 1.5 | T = 2 |" in md
    cells = (tmp_path / "a" / "out" / "cells.csv").read_text()
    assert "c10_densenet40,Uncal,uncalibrated,logloss,nll,0.428207" in cells


def test_load_halves_rejects_a_foreign_split(tmp_path):
    logits, _ = _files(tmp_path, n=40)
    bad = tmp_path / "bad.npz"
    save_split(bad, np.arange(0, 30), np.arange(30, 50))
    with pytest.raises(ValueError, match="not a partition"):
        G.load_halves(logits, bad)


def test_metric_map_to_a_metric_already_divided_by_k():
    rows = _metric_rows("c10_densenet40", "uncalibrated", {"brier_kull": 0.012738, "brier": 9.0})
    cells = G.comparison_rows(
        rows, {"c10_densenet40": 10}, {"metric_map": {"brier_div_k": "brier_kull"}}
    )
    c = _find(cells, source="kull19_nb", model="c10_densenet40", published_metric="brier_div_k")
    assert c[0]["ours"] == 0.012738 and c[0]["status"] == G.OK
    # the default reads the summed Brier and divides it by K
    assert G.DEFAULT_METRIC_MAP["brier_div_k"] == "brier"
    assert G.DEFAULT_METRIC_MAP["cwece_sum"] == "cwece_kull"


def test_sources_filter():
    cells = G.comparison_rows([], {}, {"sources": ["kangsepp_nb"]})
    assert {c["source"] for c in cells} == {"kangsepp_nb"} and len(cells) == 80
    assert G.comparison_rows([], {}, {"sources": []}) == []
    with pytest.raises(ValueError, match="unknown sources"):
        G.comparison_rows([], {}, {"sources": ["guo2017"]})


def test_summary_table_of_another_model_has_no_published_values():
    rows = [
        {
            "model": "c100_resnet34",
            "half": "test",
            "method": "ts",
            "accuracy": 0.7,
            "confidence": 0.7,
            "ece": 0.02,
            "mce": 0.1,
        }
    ]
    tab = G.summary_table(rows)
    assert {c["published"] for c in tab["rows"][0]["cells"]} == {"–"}
    assert tab["note"] == "No published values for this model."
