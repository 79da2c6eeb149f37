"""The models package checks and plans only its own sources: a ``source: logits`` entry is
checked and planned by the function its caller passes (calbench.logits_sources), and refused
in one line when none is passed, never skipped."""

from __future__ import annotations

import pytest

from calbench.models.entries import load_registry
from calbench.models.pins import checksum_provenance

LOGITS = {"dataset": "d", "source": "logits", "logits": {"format": "npz", "file": "m.npz"}}


def test_a_logits_entry_is_checked_by_the_callers_check(tmp_path):
    reg = tmp_path / "reg.yaml"
    reg.write_text("models:\n  m: {dataset: d, source: logits, logits: {format: npz}}\n")
    seen = []
    doc = load_registry(reg, {"logits": lambda name, entry: seen.append((name, entry["source"]))})
    assert seen == [("m", "logits")] and set(doc["models"]) == {"m"}
    with pytest.raises(ValueError, match="model m: ") as info:  # refused, not passed unchecked
        load_registry(reg)
    assert "\n" not in str(info.value)


def test_a_logits_entrys_files_are_planned_by_the_callers_planner(tmp_path):
    config = {"resources": str(tmp_path), "models": {"m": LOGITS, "t": {"source": "train"}}}
    planner = {"logits": lambda name, entry, res: [{"dest": res / name / "m.npz", "pin": None}]}
    out = checksum_provenance(config, planner)
    assert [(f["model"], f["status"]) for f in out["files"]] == [("m", "not pinned")]
    with pytest.raises(ValueError, match="no file planner for source 'logits'") as info:
        checksum_provenance(config)
    assert "\n" not in str(info.value)
