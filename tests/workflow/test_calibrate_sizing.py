"""Threads and memory of a calibrate job follow its logits' size (workflow/rules/helpers/
sizing.smk), read from the .npz header without loading the array."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

SIZING = Path(__file__).resolve().parents[2] / "workflow" / "rules" / "helpers" / "sizing.smk"


@pytest.fixture(scope="module")
def sizing():
    ns: dict = {}
    exec(compile(SIZING.read_text(), str(SIZING), "exec"), ns)  # plain Python: functions only
    return SimpleNamespace(**ns)


def _logits(path, n, k, compressed=False):
    save = np.savez_compressed if compressed else np.savez
    save(path, logits=np.zeros((n, k), np.float32), labels=np.zeros(n, np.int64))
    return SimpleNamespace(logits=str(path))


@pytest.mark.parametrize("compressed", [False, True])
def test_size_is_read_from_the_header(sizing, tmp_path, compressed):
    inp = _logits(tmp_path / "l.npz", 300, 7, compressed)
    assert sizing.logits_entries(inp.logits) == 2100


def test_threads_and_memory_follow_n_times_k(sizing, tmp_path, monkeypatch):
    shapes = {"cifar10": (10_000, 10), "tiny": (10_000, 200), "imagenet": (50_000, 1000)}
    fake = lambda path: int(np.prod(shapes[path]))  # noqa: E731
    monkeypatch.setitem(sizing.calibrate_threads.__globals__, "logits_entries", fake)
    threads = {s: sizing.calibrate_threads(None, SimpleNamespace(logits=s)) for s in shapes}
    mem = {s: sizing.calibrate_mem_mb(None, SimpleNamespace(logits=s)) for s in shapes}
    assert threads == {"cifar10": 1, "tiny": 1, "imagenet": sizing.CALIBRATE_MAX_THREADS}
    assert mem["cifar10"] == 1010 and mem["imagenet"] == 6000
    assert mem["cifar10"] < mem["tiny"] < mem["imagenet"]


def test_unknown_size_gives_the_defaults(sizing, tmp_path):
    missing = SimpleNamespace(logits=str(tmp_path / "not_yet.npz"))
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    bad = SimpleNamespace(logits=str(tmp_path / "bad.npz"))
    for inp in (missing, bad):
        assert sizing.calibrate_threads(None, inp) == 1
        assert sizing.calibrate_mem_mb(None, inp) == 4000
