"""Which models a study imports in batches (workflow/rules/helpers/sizing.smk): those whose
predictions need no download of their own, per rule (own split or not) and dataset, in config
order, at most IMPORT_BATCH_MAX_MODELS a batch."""

from __future__ import annotations

import numpy as np

from calbench.logits_sources.folder import folder_models


def test_models_are_batched_per_rule_and_dataset_in_config_order(sizing):
    models = {f"a{i}": "a" for i in range(7)} | {"b0": "b", "s0": "a", "s1": "a", "c0": "c"}
    models |= {"b1": "b", "s2": "a"}
    batches = sizing.import_batches(models, presplit={"s0", "s1", "s2"}, max_models=3)
    assert batches == {
        "import_logits": {
            "a__0": ["a0", "a1", "a2"],
            "a__1": ["a3", "a4", "a5"],  # a6 alone: a batch of one is no batch
            "b__0": ["b0", "b1"],
        },  # c0 alone
        "import_logits_presplit": {"a__0": ["s0", "s1", "s2"]},  # own split: batches of their own
    }
    assert sizing.import_batches(models, max_models=1) == {
        "import_logits": {},
        "import_logits_presplit": {},
    }
    one = sizing.import_batches({"x": "a"}, presplit={"x"})
    assert one == {"import_logits": {}, "import_logits_presplit": {}}
    assert sizing.IMPORT_BATCH_MAX_MODELS == 16  # the documented default
    default = sizing.import_batches({f"m{i}": "d" for i in range(20)})["import_logits"]
    assert [len(v) for v in default.values()] == [16, 4]


def test_a_model_added_at_the_end_changes_only_the_last_batch(sizing):
    models = {f"m{i}": "d" for i in range(10)}
    before = sizing.import_batches(models, max_models=4)["import_logits"]
    models["new"] = "d"
    after = sizing.import_batches(models, max_models=4)["import_logits"]
    assert after == {**before, "d__2": ["m8", "m9", "new"]}


def test_models_without_a_download_of_their_own_join_batches(sizing, tmp_path):
    folder = tmp_path / "preds"
    folder.mkdir()
    y = np.zeros(30, np.int64)
    np.savez(folder / "mine.npz", logits=np.zeros((30, 3), np.float32), labels=y)
    (entry,) = folder_models(folder).values()
    assert sizing.imported_in_batch("mine", entry)  # a logits_folder: file
    download = {"dataset": "d", "source": "logits",
                "logits": {"format": "npz", "file": "mine.npz", "urls": ["https://x.org/mine.npz"]}}  # fmt: skip
    assert not sizing.imported_in_batch("mine", download)  # its job is its download
    assert sizing.imported_in_batch("mine", download, mirrors=[str(folder)])  # a mirror has it
    shared = {**download, "logits": {"format": "calarena", "file": "cv.h5",
                                     "group": "c10/net", "huggingface": {"repo": "o/r", "path": "cv.h5"}}}  # fmt: skip
    assert sizing.imported_in_batch("c10_net", shared)  # one file for every model reading it
    gone = {**entry, "logits": {**entry["logits"], "local_path": str(tmp_path / "gone")}}
    assert not sizing.imported_in_batch("mine", gone)  # not there: its own job reports it
    assert not sizing.imported_in_batch("t", {"dataset": "d", "source": "train"})
