"""Which models a study calibrates in batches (workflow/rules/helpers/sizing.smk): small ones
whose size the config gives before anything runs, per dataset, in config order, at most
CALIBRATE_BATCH_MAX_MODELS a batch."""

from __future__ import annotations

import numpy as np

from calbench.logits_sources.folder import folder_models


def test_small_models_of_one_dataset_are_batched_in_config_order(sizing):
    cap = sizing.CALIBRATE_BATCH_MAX_ENTRIES
    models = {f"a{i}": "a" for i in range(11)} | {"b0": "b", "b1": "b", "c0": "c"}
    models |= {"big": "a", "unknown": "a", "b2": "b"}
    shapes = {m: (1000, 2) for m in models} | {"big": (cap + 1, 1), "unknown": None}
    shapes |= {"b2": (cap // 2, 2)}  # exactly at the cap: small
    batches = sizing.calibrate_batches(models, shapes, max_models=4)
    assert batches == {
        "a__0": ["a0", "a1", "a2", "a3"],
        "a__1": ["a4", "a5", "a6", "a7"],
        "a__2": ["a8", "a9", "a10"],
        "b__0": ["b0", "b1", "b2"],
    }  # big, unknown: jobs of their own; c0 alone, a batch of one is no batch
    assert sizing.calibrate_batches(models, shapes, max_models=1) == {}
    assert sizing.CALIBRATE_BATCH_MAX_MODELS == 8 and cap == 1 << 17  # the documented defaults


def test_a_model_added_at_the_end_changes_only_the_last_batch(sizing):
    models = {f"m{i}": "d" for i in range(10)}
    before = sizing.calibrate_batches(models, dict.fromkeys(models, (100, 2)), max_models=4)
    models["new"] = "d"
    after = sizing.calibrate_batches(models, dict.fromkeys(models, (100, 2)), max_models=4)
    assert after == {**before, "d__2": ["m8", "m9", "new"]}


def test_the_size_comes_from_the_predictions_file_the_config_names(sizing, tmp_path):
    folder = tmp_path / "preds"
    folder.mkdir()
    y = np.zeros(300, np.int64)
    np.savez(folder / "small.npz", logits=np.zeros((300, 3), np.float32), labels=y)
    np.savez_compressed(folder / "packed.npz", logits=np.zeros((300, 5), np.float32), labels=y)
    entries = folder_models(folder)
    shapes = {m: sizing.source_shape(m, e) for m, e in entries.items()}
    assert shapes == {"small": (300, 3), "packed": (300, 5)}
    assert sizing.source_shape("t", {"source": "train", "dataset": "d"}) is None
    moved = {**entries["small"], "logits": {**entries["small"]["logits"], "local_path": "gone"}}
    assert sizing.source_shape("small", moved) is None  # not there: its own job reports it


def test_a_calarena_study_s_sizes_come_from_the_benchmark_s_index(sizing):
    from calbench.reference.calarena import model_slug

    shapes = sizing.calarena_shapes({"calarena": {"benchmark": "cv-binary"}})
    assert shapes[model_slug("c10", "densenet40")] == (15_000, 2)  # cal 5,000 + test 10,000
    assert sizing.calarena_shapes({}) == {}
