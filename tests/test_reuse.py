"""The reuse cache of ``calibrate --reuse-dir`` is verified, not trusted (issue 33, group 7): a
kept entry whose files do not match the manifest written with them (an edited metrics CSV, an
emptied or deleted PNG, a lost manifest) is discarded with a note and refitted, so what reaches
the outputs is always what a run without the cache writes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calbench.functional import softmax
from calbench.split import save_split, study_split

N, K = 200, 3
SPEC = {
    "calibrators": {
        "uncalibrated": {"method": "uncalibrated", "params": {}, "display": "Uncalibrated"},
        "ts": {"method": "ts", "params": {}, "display": "T-scaling"},
    },
    "evaluation": {"metrics": ["accuracy", "ece", "nll"], "halves": ["test", "val"],
                   "n_bootstrap": 0, "level": 0.9, "seed": 0, "ci_halves": None, "ci_metrics": None},
    "compare": {"metrics": ["ece_ub"], "baselines": ["uncalibrated"], "n_bootstrap": 20,
                "select_folds": 3, "select_exclude": []},
    "plots": {"n_bins": 5, "style": "guo"},
}  # fmt: skip


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("reuse")
    rng = np.random.default_rng(2)
    z = (rng.normal(size=(N, K)) * 3.0).astype(np.float32)
    y = np.array([rng.choice(K, p=row) for row in softmax(z / 2.0)], dtype=np.int64)
    np.savez(d / "logits.npz", logits=z, labels=y, order_hash="abc", model="mod", dataset="ds")
    save_split(d / "split.npz", *study_split(N))
    (d / "spec.json").write_text(json.dumps(SPEC))
    return d


def _calibrate(data, out, reuse=None, spec=None):
    from calbench.cli import main

    return main([str(a) for a in [
        "calibrate", "--logits", data / "logits.npz", "--split", data / "split.npz",
        "--spec", f"@{spec or data / 'spec.json'}", "--calibrators-dir", out / "cal",
        "--metrics-dir", out / "met", "--plots-dir", out / "plot", "--compare", out / "cmp.csv",
        *(["--reuse-dir", reuse] if reuse is not None else []),
    ]])  # fmt: skip


def _outputs(out):
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture
def kept(data, tmp_path, monkeypatch):
    """A filled cache, the reference outputs of a run without it, a log of ts fits on the
    whole validation half and one of its fits on the selection's folds."""
    from calbench.calibrators import REGISTRY

    reuse = tmp_path / "kept"
    assert _calibrate(data, tmp_path / "first", reuse) == 0
    assert _calibrate(data, tmp_path / "plain") == 0
    fits, fold_fits = [], []
    real = REGISTRY["ts"].fit

    def fit(self, z, *a, **k):
        (fits if len(z) == N // 2 else fold_fits).append(1)
        return real(self, z, *a, **k)

    monkeypatch.setattr(REGISTRY["ts"], "fit", fit)
    entry = next((reuse / "ts").iterdir())
    return {"reuse": reuse, "entry": entry, "fits": fits, "fold_fits": fold_fits,
            "plain": _outputs(tmp_path / "plain")}  # fmt: skip


def test_an_entry_is_stored_with_the_digest_of_each_file(kept):
    from calbench.io import file_digest

    manifest = json.loads((kept["entry"] / "manifest.json").read_text())
    assert manifest["digest"] == kept["entry"].name
    assert manifest["files"] == {
        n: file_digest(kept["entry"] / n) for n in ("calibrator.json", "metrics.csv", "diagram.png")
    }


def test_an_intact_entry_is_reused(data, tmp_path, kept):
    assert _calibrate(data, tmp_path / "again", kept["reuse"]) == 0
    assert kept["fits"] == [] and kept["fold_fits"] == []  # nor refitted on the folds
    assert _outputs(tmp_path / "again") == kept["plain"]


def test_adding_a_calibrator_fits_only_it_also_on_the_selection_folds(data, tmp_path, kept):
    """The kept selection record: ts's held-out scores come from the cache, the new
    calibrator is fitted on the folds, and every output equals a run without the cache."""
    spec = json.loads(json.dumps(SPEC))
    spec["calibrators"]["iso"] = {"method": "iso", "params": {}, "display": "Isotonic"}
    (tmp_path / "spec2.json").write_text(json.dumps(spec))
    assert _calibrate(data, tmp_path / "plain2", spec=tmp_path / "spec2.json") == 0
    kept["fits"].clear(), kept["fold_fits"].clear()
    assert _calibrate(data, tmp_path / "added", kept["reuse"], spec=tmp_path / "spec2.json") == 0
    assert kept["fits"] == [] and kept["fold_fits"] == []
    assert _outputs(tmp_path / "added") == _outputs(tmp_path / "plain2")
    record = json.loads((next((kept["reuse"] / "iso").iterdir()) / "selection.json").read_text())
    assert set(record["result"]) == {"ece_ub"} and record["settings"]["folds"] == 3


@pytest.mark.parametrize("change", ["score", "settings"])
def test_a_selection_record_that_fails_its_seal_or_settings_is_refitted(data, tmp_path, kept, change):
    path = kept["entry"] / "selection.json"
    record = json.loads(path.read_text())
    if change == "score":  # ts made to look best: the seal no longer matches
        record["result"]["ece_ub"] = -1.0
    else:  # a record kept under other settings, sealed as such: not this run's
        from calbench.reuse import _seal

        record["settings"]["folds"] = 4
        record["sha256"] = _seal(record["settings"], record["result"])
    path.write_text(json.dumps(record))
    assert _calibrate(data, tmp_path / "again", kept["reuse"]) == 0
    assert kept["fits"] == [] and kept["fold_fits"] == [1, 1, 1]  # refitted on the 3 folds
    assert _outputs(tmp_path / "again") == kept["plain"]
    assert json.loads(path.read_text())["result"]["ece_ub"] != -1.0  # the fresh finding kept


@pytest.mark.parametrize(
    "damage, reason",
    [
        ("edit metrics.csv", "metrics.csv does not match its digest"),
        ("empty diagram.png", "diagram.png does not match its digest"),
        ("delete diagram.png", "diagram.png is missing"),
        ("delete manifest.json", "manifest.json is missing"),
        ("forge manifest.json", "diagram.png is empty"),
    ],
)
def test_a_damaged_entry_is_refitted_never_copied(data, tmp_path, kept, capsys, damage, reason):
    entry, csv, png = kept["entry"], kept["entry"] / "metrics.csv", kept["entry"] / "diagram.png"
    if damage == "edit metrics.csv":  # ts shown as the winner with ECE 0.01
        csv.write_text(csv.read_text().replace("ece,", "ece,0.01,", 1))
    elif damage == "empty diagram.png":
        png.write_bytes(b"")
    elif damage.startswith("delete"):
        (entry / damage.split()[1]).unlink()
    else:  # an emptied PNG with a manifest rewritten to match it
        import hashlib

        png.write_bytes(b"")
        m = json.loads((entry / "manifest.json").read_text())
        m["files"]["diagram.png"] = hashlib.sha256(b"").hexdigest()
        (entry / "manifest.json").write_text(json.dumps(m))
    capsys.readouterr()
    assert _calibrate(data, tmp_path / "again", kept["reuse"]) == 0
    err = capsys.readouterr().err
    assert kept["fits"] == [1], "the damaged entry must be refitted"
    assert _outputs(tmp_path / "again") == kept["plain"]  # the refit's files, not the cache's
    assert f"not reused: {reason}" in err and "refitting it" in err, err
    # the refit stored a fresh, verified entry: the next run reuses it
    kept["fits"].clear()
    assert _calibrate(data, tmp_path / "third", kept["reuse"]) == 0
    assert kept["fits"] == [] and _outputs(tmp_path / "third") == kept["plain"]


def test_a_deleted_output_png_is_restored_from_a_good_entry_only(data, tmp_path, kept):
    """The report's failure: an emptied kept PNG came back each time the output was deleted."""
    (kept["entry"] / "diagram.png").write_bytes(b"")
    out = tmp_path / "again"
    assert _calibrate(data, out, kept["reuse"]) == 0
    (out / "plot" / "ts.png").unlink()
    assert _calibrate(data, out, kept["reuse"]) == 0
    png = (out / "plot" / "ts.png").read_bytes()
    assert png.startswith(b"\x89PNG") and png == kept["plain"]["plot/ts.png"]
