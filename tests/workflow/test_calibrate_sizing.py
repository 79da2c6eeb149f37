"""Threads, memory and GPU of a calibrate job follow its logits' size (workflow/rules/helpers/
sizing.smk), read from the .npz header without loading the array."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
RULE = ROOT / "workflow" / "rules" / "calibrate.smk"
SHAPES = {
    "cifar10": (10_000, 10),
    "tiny": (10_000, 200),
    "many_samples": (1_000_000, 100),  # 1e8 entries, too few classes for threads
    "imagenet": (50_000, 1000),
}


def _plan(sizing, shape_of):
    """threads, gpu and --device of a calibrate job as the rule computes them."""
    inp = SimpleNamespace(logits=shape_of)
    gpu = sizing.calibrate_gpu(None, inp)
    device = sizing.calibrate_device(None, SimpleNamespace(gpu=gpu))
    return sizing.calibrate_threads(None, inp), gpu, device


def _logits(path, n, k, compressed=False):
    save = np.savez_compressed if compressed else np.savez
    save(path, logits=np.zeros((n, k), np.float32), labels=np.zeros(n, np.int64))
    return SimpleNamespace(logits=str(path))


@pytest.mark.parametrize("compressed", [False, True])
def test_size_is_read_from_the_header(sizing, tmp_path, compressed):
    inp = _logits(tmp_path / "l.npz", 300, 7, compressed)
    assert sizing.logits_entries(inp.logits) == 2100


def test_threads_and_memory_follow_n_times_k(sizing, tmp_path, monkeypatch):
    shapes = SHAPES
    monkeypatch.setitem(sizing.calibrate_threads.__globals__, "logits_shape", shapes.get)
    threads = {s: sizing.calibrate_threads(None, SimpleNamespace(logits=s)) for s in shapes}
    mem = {s: sizing.calibrate_mem_mb(None, SimpleNamespace(logits=s)) for s in shapes}
    assert threads == {
        "cifar10": 1, "tiny": 1, "many_samples": 1, "imagenet": sizing.CALIBRATE_MAX_THREADS
    }  # fmt: skip
    assert mem["cifar10"] == 1411 and mem["imagenet"] == 22470
    assert mem["cifar10"] < mem["tiny"] < mem["imagenet"]


#: peak RSS (MB) of `calbench calibrate` with the default study's spec, one thread
#: (perf/bench_calibrate_memory.py; K = 1000 with the matrix fits capped at 5 iterations),
#: and the peak of the issue that found tall logits under-declared (2M x 10: 11.2 GB)
MEASURED_PEAK_MB = {
    (10_000, 10): 1157,
    (50_000, 10): 1414,
    (200_000, 10): 2498,
    (400_000, 10): 3948,
    (2_000_000, 10): 11_200,
    (10_000, 100): 1362,
    (10_000, 1000): 5682,
    (20_000, 1000): 8612,
}


@pytest.mark.parametrize("shape", sorted(MEASURED_PEAK_MB))
def test_declared_memory_covers_the_measured_peaks(sizing, shape):
    """Tall logits (many samples, few classes) and wide ones: mem_mb follows N and N x K and
    leaves at least 15% above every measured peak."""
    sizing.calibrate_mem_mb.__globals__["logits_shape"] = {shape: shape}.get
    declared = sizing.calibrate_mem_mb(None, SimpleNamespace(logits=shape))
    assert declared >= 1.15 * MEASURED_PEAK_MB[shape], (shape, declared)


def test_unknown_size_gives_the_defaults(sizing, tmp_path):
    missing = SimpleNamespace(logits=str(tmp_path / "not_yet.npz"))
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    bad = SimpleNamespace(logits=str(tmp_path / "bad.npz"))
    for inp in (missing, bad):
        assert sizing.calibrate_threads(None, inp) == 1
        assert sizing.calibrate_mem_mb(None, inp) == 4000
        assert sizing.calibrate_gpu(None, inp) == 0


def test_plan_from_the_npz_header_without_a_gpu(sizing, tmp_path):
    """On a machine without nvidia-smi (GPUS = 0) every job runs on the CPU, --device cpu; an
    ImageNet-sized one gets sized threads (its header says 50k x 1000; the data is not read)."""
    small = _logits(tmp_path / "small.npz", 10_000, 10).logits
    large = tmp_path / "large.npz"
    large_header(large, 50_000, 1000)
    assert _plan(sizing, small) == (1, 0, "cpu")
    assert _plan(sizing, str(large)) == (sizing.CALIBRATE_MAX_THREADS, 0, "cpu")


def test_plan_with_a_gpu_holds_it_for_large_jobs_only(sizing, tmp_path):
    sizing.calibrate_gpu.__globals__["GPUS"] = 1
    small = _logits(tmp_path / "small.npz", 10_000, 200).logits
    large = tmp_path / "large.npz"
    large_header(large, 50_000, 1000)
    assert _plan(sizing, small) == (1, 0, "cpu")
    assert _plan(sizing, str(large)) == (1, 1, "cuda")
    # a profile's set-resources gpu: 1 makes any job pass --device cuda, gpu: 0 --device cpu
    assert sizing.calibrate_device(None, SimpleNamespace(gpu=1)) == "cuda"
    assert sizing.calibrate_device(None, SimpleNamespace(gpu=0)) == "cpu"


def large_header(path, n, k):
    """An .npz whose logits.npy holds only the header of an (n, k) float32 array: the sizing
    functions read nothing else (a 200 MB array is not written)."""
    import io
    import zipfile

    from numpy.lib import format as npformat

    buf = io.BytesIO()
    npformat.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (n, k)})
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("logits.npy", buf.getvalue())


def test_the_rule_uses_the_sizing_functions():
    text = RULE.read_text()
    for needle in (
        "threads: calibrate_threads",
        "gpu=calibrate_gpu",
        "device=calibrate_device",
        "--threads {threads} --device {params.device}",
        "OMP_NUM_THREADS=1",
        "time_limit=calibrate_time_limit",  # the runtime resource is honoured locally too
        " {params.time_limit}",
    ):
        assert needle in text, needle


def test_the_class_threshold_is_the_library_s(sizing):
    from calbench.calibrators.fit_threads import MIN_THREADED_CLASSES

    assert sizing.CALIBRATE_MIN_THREADED_CLASSES == MIN_THREADED_CLASSES


@pytest.mark.parametrize(
    "cores, local, remote, want",
    [(16, True, False, 4), (8, True, False, 2), (2, True, False, 1), (64, True, False, 4),
     (2, False, False, 4), (2, True, True, 4), (None, True, False, 4)],
)  # fmt: skip
def test_a_local_run_gives_a_job_at_most_a_quarter_of_its_cores(
    sizing, monkeypatch, cores, local, remote, want
):
    """On a shared machine (--cores N, local executor) an ImageNet job takes at most N / 4
    threads; on a cluster (not local_exec), inside a cluster job (remote_exec) or with cores
    unknown, only CALIBRATE_MAX_THREADS caps it."""
    g = sizing.calibrate_threads.__globals__
    monkeypatch.setitem(g, "logits_shape", SHAPES.get)
    wf = SimpleNamespace(local_exec=local, remote_exec=remote,
                         global_resources={"_cores": cores})  # fmt: skip
    monkeypatch.setitem(g, "workflow", wf)
    assert sizing.CALIBRATE_MAX_THREADS == 4
    assert sizing.calibrate_threads(None, SimpleNamespace(logits="imagenet")) == want
    assert sizing.calibrate_threads(None, SimpleNamespace(logits="cifar10")) == 1
