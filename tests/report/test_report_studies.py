"""Study tables of calibration during training: mean ± std over seeds, DECE-ECE correlation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calbench.report import studies as S
from calbench.report import tables as T
from calbench.report.context import study_sections


def _row(model, method, metric, value, half="test"):
    return {
        "dataset": "fm",
        "model": model,
        "method": method,
        "half": half,
        "metric": metric,
        "value": value,
        "ci_low": float("nan"),
        "ci_high": float("nan"),
    }


MODELS = {
    "a0": {"dataset": "fm", "display": {"name": "MLP", "loss": "CE", "seed": 0}},
    "a1": {"dataset": "fm", "display": {"name": "MLP", "loss": "CE", "seed": 1}},
    "b0": {"dataset": "fm", "display": {"name": "MLP", "loss": "Meta-Cal", "seed": 0}},
}


def _rows():
    rows = []
    for m, acc, ece, ece_ts in (
        ("a0", 0.90, 0.05, 0.02),
        ("a1", 0.88, 0.07, 0.03),
        ("b0", 0.87, 0.01, 0.015),
    ):
        rows += [
            _row(m, "uncalibrated", "accuracy", acc),
            _row(m, "uncalibrated", "ece", ece),
            _row(m, "ts", "ece", ece_ts),
            _row(m, "uncalibrated", "ece", 0.5, half="val"),  # other half: ignored
        ]
    return rows


def test_metacal_table_is_mean_and_sample_std_over_seeds():
    (main,) = S.metacal_tables(_rows(), MODELS, temperatures={"a0": 1.5, "a1": 1.7, "b0": 1.1})
    assert main.row_labels == [["fm", "MLP", "CE"], ["fm", "MLP", "Meta-Cal"]]
    assert [c.label for c in main.columns] == ["Error, %", "ECE, %", "ECE after TS, %", "T"]
    np.testing.assert_allclose(main.mean[0], [0.11, 0.06, 0.025, 1.6])
    np.testing.assert_allclose(
        main.std[0],
        [np.std([0.10, 0.12], ddof=1)] + [np.sqrt(2e-4)] + [np.sqrt(5e-5)] + [np.sqrt(0.02)],
    )
    assert main.n[0].tolist() == [2, 2, 2, 2] and main.n[1].tolist() == [1, 1, 1, 1]
    assert main.cell(0, 1) == "6.00 ± 1.41"
    assert main.cell(1, 1) == "1.00"  # one seed: no std
    assert main.cell(0, 3) == "1.60 ± 0.14"
    bold = main.bold
    assert bold[1, 1] and not bold[0, 1]  # lower ECE wins
    assert bold[0, 0] and not bold[1, 0]  # lower error wins
    assert not bold[:, 3].any()  # the temperature has no best
    # columns without data are dropped: the appendix has no ace / cwece rows here
    assert S.metacal_tables(_rows(), MODELS)[0].col_labels == [
        "Error, %",
        "ECE, %",
        "ECE after TS, %",
    ]


def test_softcal_tables_and_formats():
    rows = _rows() + [
        _row(m, "ts_sbece", "ece", v) for m, v in (("a0", 0.01), ("a1", 0.02), ("b0", 0.02))
    ]
    tables = S.softcal_tables(rows, MODELS)
    keys = [t.key for t in tables]
    assert keys == ["softcal_main", "softcal_ts", "softcal_appendix"]
    ts = tables[1]
    assert ts.col_labels == ["TS: ECE, %", "TS-SB-ECE: ECE, %"]
    np.testing.assert_allclose(ts.mean[:, 1], [0.015, 0.02])
    md = S.study_to_markdown(ts)
    assert "| fm | MLP | CE | 2.50 ± 0.71 | **1.50 ± 0.71** |" in md
    csv_text = S.study_to_csv(ts)
    assert csv_text.splitlines()[1] == "fm,MLP,CE,2.50,0.71,2,1.50,0.71,2"
    assert "<b>1.50 ± 0.71</b>" in S.study_to_html(ts)


def test_correlations_agree_with_scipy():
    from scipy import stats

    rng = np.random.default_rng(0)
    a = rng.normal(size=40)
    b = a + rng.normal(size=40) * 0.5
    b[3] = b[5]  # a tie for the ranks
    p, s = S.correlations(a, b)
    assert p == pytest.approx(stats.pearsonr(a, b)[0])
    assert s == pytest.approx(stats.spearmanr(a, b)[0])
    assert np.isnan(S.correlations([1, 2], [3, 4])[0])
    assert np.isnan(S.correlations([1, 1, 1], [3, 4, 5])[1])


def test_dece_history_reads_validation_columns(tmp_path):
    h1 = tmp_path / "h1.csv"
    h1.write_text("epoch,loss,val_ece,val_dece\n1,1,0.1,0.12\n2,1,0.05,0.06\n3,1,0.02,0.03\n")
    h2 = tmp_path / "h2.csv"
    h2.write_text("epoch,loss\n1,1\n")  # no validation: skipped
    out = S.dece_history({"a": str(h1), "b": str(h2)}, {"a": "MLP (CE)"})
    (row,) = out["rows"]
    assert row["model"] == "MLP (CE)" and row["epochs"] == 3
    assert row["pearson"] == pytest.approx(np.corrcoef([0.1, 0.05, 0.02], [0.12, 0.06, 0.03])[0, 1])
    assert row["spearman"] == pytest.approx(1.0)
    assert row["last_ece"] == 0.02 and row["last_dece"] == 0.03
    assert S.dece_figure_png(out["points"]).startswith(b"\x89PNG")
    assert S.dece_history({"b": str(h2)}, {}) is None


def test_losses_table_averages_seeds():
    displays = {m: v["display"] for m, v in MODELS.items()}
    t = T.losses_table(_rows(), "ece", displays)
    assert t.col_labels == ["CE", "Meta-Cal"]
    np.testing.assert_allclose(t.values, [[0.06, 0.01]])
    assert t.ci(0, 0) == "± 1.41" and t.ci(0, 1) == ""


def test_study_sections_in_the_report_context(tmp_path):
    from calbench.calibrators import get_calibrator, save_calibrator

    rng = np.random.default_rng(0)
    z = rng.normal(size=(200, 3)) * 4
    y = rng.integers(0, 3, 200)
    ts_files = {}
    for m in MODELS:
        path = tmp_path / f"{m}.json"
        save_calibrator(get_calibrator("ts").fit(z, y), path)
        ts_files[m] = str(path)
    want_t = get_calibrator("ts").fit(z, y).temperature_
    hist = tmp_path / "h.csv"
    hist.write_text("epoch,loss,val_ece,val_dece\n1,1,0.1,0.12\n2,1,0.05,0.06\n3,1,0.02,0.03\n")
    spec = {
        "models": MODELS,
        "datasets": {"fm": {"display": "Fashion-MNIST"}},
        "studies": ["metacal", "dece_history"],
        "ts_files": ts_files,
        "histories": {"a0": str(hist)},
    }
    out = study_sections(_rows(), json.loads(json.dumps(spec)))
    main = out["tables"][0]
    assert main.row_labels[0][0] == "Fashion-MNIST"
    assert main.mean[0, 3] == pytest.approx(want_t)
    assert out["dece"]["rows"][0]["model"] == "MLP (CE) seed 0"
    assert out["dece_figure"].startswith("data:image/png;base64,")
    assert study_sections(_rows(), {"models": MODELS})["tables"] == []
