"""A folder of predictions as a study (calbench.logits_sources.folder): file names to model
names, datasets from a key or the folder, defaults for what the config leaves out, one-line
refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from calbench.logits_sources import formats
from calbench.logits_sources.folder import (
    complete_config,
    default_calibrators,
    folder_models,
    slugify,
)

REPO = Path(__file__).resolve().parents[2]


def _save(path: Path, n=30, k=3, **extra):
    rng = np.random.default_rng(0)
    np.savez(
        path,
        logits=rng.normal(size=(n, k)).astype(np.float32),
        labels=rng.integers(0, k, n),
        **extra,
    )


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "My Preds"
    d.mkdir()
    _save(d / "ResNet-50.npz")
    _save(d / "mlp.npz", dataset=np.str_("CIFAR-10"))
    (d / "notes.txt").write_text("not a model")
    return d


def test_slugify():
    assert slugify("ResNet-50 (v2)") == "resnet_50_v2"
    assert slugify("__x__") == "x"
    assert slugify("---") == ""


def test_every_file_becomes_a_model(folder):
    models = folder_models(folder)
    assert list(models) == ["mlp", "resnet_50"]
    assert models["resnet_50"] == {
        "dataset": "my_preds",
        "source": "logits",
        "display": {"name": "ResNet-50"},
        "logits": {"format": "npz", "file": "ResNet-50.npz", "local_path": str(folder)},
    }
    assert models["mlp"]["dataset"] == "cifar_10"  # from the file's dataset key


def test_complete_config_fills_what_is_left_out(folder):
    cals = {"uncalibrated": {"display": "Uncalibrated"}, "ts": None}
    cfg = complete_config({"logits_folder": str(folder)}, default_calibrators=cals)
    assert cfg["study"] == {"title": "My Preds"}
    assert cfg["datasets"] == {"cifar_10": {}, "my_preds": {}}
    assert cfg["calibrators"] == {"uncalibrated": {"display": "Uncalibrated"}, "ts": {}}
    assert set(cfg["models"]) == {"mlp", "resnet_50"}
    # what the config gives is kept whole
    given = {"logits_folder": str(folder), "study": {"title": "T"}, "calibrators": {"iso": {}}}
    cfg = complete_config(given, default_calibrators=cals)
    assert cfg["study"] == {"title": "T"} and cfg["calibrators"] == {"iso": {}}


def test_a_folder_study_draws_each_models_grid_alone_unless_it_asks(folder):
    cfg = complete_config({"logits_folder": str(folder)}, default_calibrators={"ts": {}})
    assert cfg["plots"] == {"per_calibrator": False}
    # the config's other plot keys are kept, and so is its own choice
    given = {"logits_folder": str(folder), "plots": {"n_bins": 15}}
    assert complete_config(given)["plots"] == {"n_bins": 15, "per_calibrator": False}
    given = {"logits_folder": str(folder), "plots": {"per_calibrator": True}}
    assert complete_config(given)["plots"] == {"per_calibrator": True}
    # a study of model entries only is no folder: the schema's default (a PNG per calibrator)
    models = {"m": {"dataset": "d", "source": "logits", "logits": {"format": "npz", "file": "m"}}}
    assert "plots" not in complete_config({"models": models})


def test_models_only_config_gets_defaults():
    models = {
        "m": {"dataset": "d", "source": "logits", "logits": {"format": "npz", "file": "m.npz"}}
    }
    cfg = complete_config({"models": models}, default_calibrators={"ts": {}})
    assert cfg["datasets"] == {"d": {}} and cfg["calibrators"] == {"ts": {}}
    assert cfg["study"]["title"]


def test_default_calibrators_are_the_default_studys():
    from calbench._yaml import load_yaml_file

    assert default_calibrators(REPO) == load_yaml_file(REPO / "config.yaml")["calibrators"]


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda d: (d / "bad.npz").write_bytes(b"not a zip"), "bad.npz is not an .npz file"),
        (
            lambda d: np.savez(d / "probs.npz", probs=np.ones((3, 2))),
            "probs.npz holds no logits and no labels",
        ),
        (lambda d: _save(d / "a b.npz"), "file name 'a b.npz'"),
        (lambda d: _save(d / "_.npz"), "file name '_.npz'"),
        (
            lambda d: (_save(d / "M1.npz"), (d / "m1.pt").write_bytes(b"x")),
            "M1.npz and m1.pt both give model name 'm1'",
        ),
        (lambda d: _save(d / "m.npz", dataset=np.arange(3)), "dataset key must be one string"),
    ],
)
def test_refusals_are_one_line(tmp_path, make, words):
    d = tmp_path / "preds"
    d.mkdir()
    make(d)
    with pytest.raises(ValueError, match="^logits_folder: ") as exc:
        folder_models(d)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_missing_or_empty_folder(tmp_path):
    with pytest.raises(ValueError, match="is not a folder"):
        folder_models(tmp_path / "nope")
    with pytest.raises(ValueError, match="holds no .npz or .pt file"):
        folder_models(tmp_path)


def test_folder_model_clashing_with_an_entry(folder):
    cfg = {"logits_folder": str(folder), "models": {"mlp": {"dataset": "x", "source": "train"}}}
    with pytest.raises(ValueError, match=r"^models\.mlp: .*mlp\.npz also gives a model"):
        complete_config(cfg)


def test_pt_dict_reads_like_npz(tmp_path):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    z, y = rng.normal(size=(20, 4)).astype(np.float32), rng.integers(0, 4, 20)
    torch.save({"logits": torch.from_numpy(z), "labels": torch.from_numpy(y)}, tmp_path / "m.pt")
    imp = formats.read("npz", tmp_path / "m.pt")
    np.testing.assert_array_equal(imp.logits, z)
    np.testing.assert_array_equal(imp.labels, y)
    torch.save(torch.from_numpy(z), tmp_path / "t.pt")
    with pytest.raises(ValueError, match="holds a Tensor, not a dict of logits and labels"):
        formats.read("npz", tmp_path / "t.pt")


def test_a_pt_that_is_not_a_dict_of_logits_and_labels_is_refused(tmp_path):
    torch = pytest.importorskip("torch")
    d = tmp_path / "preds"
    d.mkdir()
    torch.save(
        {"logits": torch.zeros(4, 2), "labels": torch.zeros(4, dtype=torch.long)}, d / "ok.pt"
    )
    assert folder_models(d)["ok"]["logits"]["file"] == "ok.pt"
    torch.save(torch.zeros(4, 2), d / "tensor.pt")
    with pytest.raises(ValueError, match=r"tensor\.pt holds no logits and no labels"):
        folder_models(d)
