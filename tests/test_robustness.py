"""calbench.robustness: rankings under other evaluation choices (Nixon et al. 2019)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calbench.functional import softmax
from calbench.robustness import (
    DEFAULT_VARIANT,
    VARIANTS,
    first_place_probability,
    ranks,
    robustness_rows,
    summarise,
)


def _ece_loop(p, y, n_bins):
    """Independent top-label ECE: equal-width bins [a, b), confidence 1 in the last bin."""
    conf, pred = p.max(1), p.argmax(1)
    ids = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        sel = ids == b
        if sel.any():
            total += sel.sum() / len(y) * abs((pred[sel] == y[sel]).mean() - conf[sel].mean())
    return total


@pytest.fixture(scope="module")
def probs():
    """Three prediction sets on the same labels: calibrated, over-confident, under-confident."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(2000, 5)) * 2.0
    p_true = softmax(z)
    y = (p_true.cumsum(1) > rng.random((2000, 1))).argmax(1)
    return {"good": p_true, "over": softmax(3 * z), "under": softmax(z / 3)}, y


def test_ranks_known_answers():
    assert ranks([0.3, 0.1, 0.2]).tolist() == [3.0, 1.0, 2.0]
    assert ranks([0.1, 0.1, 0.2]).tolist() == [1.5, 1.5, 3.0]
    assert ranks([float("nan"), 0.1]).tolist() == [2.0, 1.0]


def test_values_equal_an_independent_binned_ece(probs):
    by, y = probs
    rows = robustness_rows(by, y, dataset="d", model="m", n_resamples=20)
    for r in rows:
        if r["variant"] in ("ece_w10", "ece_w15", "ece_w20"):
            bins = int(r["variant"][-2:])
            assert r["value"] == pytest.approx(_ece_loop(by[r["method"]], y, bins), abs=1e-12)
    assert {r["variant"] for r in rows} == set(VARIANTS)
    assert len(rows) == len(VARIANTS) * 3


def test_calibrated_model_ranks_first_everywhere_and_summary_says_robust(probs):
    by, y = probs
    rows = robustness_rows(by, y, dataset="d", model="m", n_resamples=50)
    assert all(r["rank"] == 1.0 for r in rows if r["method"] == "good")
    p_first = {r["method"]: r["p_first"] for r in rows if r["variant"] == DEFAULT_VARIANT}
    assert p_first["good"] > 0.9 and sum(p_first.values()) == pytest.approx(1.0)
    assert all(math.isnan(r["p_first"]) for r in rows if r["variant"] != DEFAULT_VARIANT)
    s = summarise(rows)
    assert s["headline"] == ["good"] and s["robust"] and s["models"] == 1


def test_first_place_probability_equals_a_resample_loop(probs):
    """Same seed, same resampled indices: the vectorised count equals a plain loop."""
    from calbench.stats import resample_indices

    by, y = probs
    got = first_place_probability(by, y, n_resamples=30, seed=4)
    wins = dict.fromkeys(by, 0.0)
    for idx in resample_indices(len(y), 30, 4):
        for row in idx:
            vals = {m: _ece_loop(p[row], y[row], 15) for m, p in by.items()}
            best = min(vals.values())
            firsts = [m for m, v in vals.items() if abs(v - best) <= 1e-12]
            for m in firsts:
                wins[m] += 1 / len(firsts)
    assert got == pytest.approx({m: w / 30 for m, w in wins.items()}, abs=1e-12)


def test_summary_reports_a_flip():
    """A ranking that flips under one variant is not robust, and the summary names where."""
    rows = []
    for variant in (DEFAULT_VARIANT, "ece_w10"):
        for method, rank in (("a", 1.0), ("b", 2.0)):
            if variant == "ece_w10":
                rank = 3.0 - rank
            rows.append(
                {
                    "dataset": "d",
                    "model": "m",
                    "method": method,
                    "variant": variant,
                    "value": rank / 10,
                    "rank": rank,
                    "p_first": 0.5 if variant == DEFAULT_VARIANT else float("nan"),
                }
            )
    s = summarise(rows)
    assert s["headline"] == ["a"] and s["survives"] == [DEFAULT_VARIANT] and not s["robust"]


def test_bad_input():
    with pytest.raises(ValueError, match="at least one calibrator"):
        robustness_rows({}, np.array([0, 1, 0]), dataset="d", model="m")
    with pytest.raises(ValueError, match="n_resamples must be >= 1"):
        first_place_probability({"a": np.full((3, 2), 0.5)}, np.array([0, 1, 0]), n_resamples=0)


def test_written_rows_read_back_and_bad_files_are_named(probs, tmp_path):
    """The report reads the CSV as strictly as every other result file."""
    from calbench.report.build import _robustness_rows
    from calbench.report.tables import write_long_csv
    from calbench.robustness import ROBUSTNESS_COLUMNS

    by, y = probs
    rows = robustness_rows(by, y, dataset="d", model="m", n_resamples=10)
    path = tmp_path / "m.csv"
    write_long_csv(path, rows, ROBUSTNESS_COLUMNS)
    back = _robustness_rows([path])
    assert [(r["method"], r["variant"], r["rank"]) for r in back] == [
        (r["method"], r["variant"], r["rank"]) for r in rows
    ]
    with pytest.raises(ValueError, match="nope.csv does not exist"):
        _robustness_rows([tmp_path / "nope.csv"])
    text = path.read_text().splitlines()
    (tmp_path / "empty.csv").write_text(text[0] + "\n")
    with pytest.raises(ValueError, match="empty.csv holds no rows"):
        _robustness_rows([tmp_path / "empty.csv"])
    bad = list(text)
    bad[1] = bad[1].replace(bad[1].split(",")[5], "nan", 1)  # a rank that is not finite
    path.write_text("\n".join(bad) + "\n")
    with pytest.raises(ValueError, match="m.csv line 2"):
        _robustness_rows([path])
    default_line = next(i for i, t in enumerate(text) if f",{DEFAULT_VARIANT}," in t)
    text[default_line] = text[default_line].rsplit(",", 1)[0] + ","  # blank p_first
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(ValueError, match="has no first-place probability"):
        _robustness_rows([path])


def test_report_view_says_robust_or_names_the_flip(probs):
    from calbench.report.render import robustness_view

    by, y = probs
    spec = {"calibrators": {"good": {"display": "Good"}, "over": {}, "under": {}}}
    view = robustness_view(robustness_rows(by, y, dataset="d", model="m", n_resamples=10), spec)
    assert view["sentence"].startswith("Robust: Good has the best average ECE rank under all")
    assert all(r["same"] for r in view["table"])
    flipped = [
        {
            **r,
            "rank": 3.0 - r["rank"]
            if r["variant"] == "ece_w10" and r["method"] != "under"
            else r["rank"],
        }
        for r in robustness_rows(by, y, dataset="d", model="m", n_resamples=10)
    ]
    view = robustness_view(flipped, spec)
    assert view["sentence"].startswith("Not robust: Good has the best average ECE rank under")
    assert "ECE, 10 equal-width bins" in view["sentence"]
