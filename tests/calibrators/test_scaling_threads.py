"""Threads and device of the torch scaling fits (calbench.calibrators.fit_threads,
calbench._device): fitted parameters bit-identical on any number of threads, one thread where
the arithmetic would depend on it, and the process's --device choice for device "auto"."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from calbench import _device
from calbench.calibrators import REGISTRY, fit_threads
from calbench.calibrators.fit_threads import (
    MIN_THREADED_CLASSES,
    SINGLE_THREAD_MAX_ENTRIES,
    cpu_fit_settings,
)
from conftest import sample_labels, softmax64


def _logits(n, k, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(0.0, 2.0, (n, k)).astype(np.float32)
    z[np.arange(n), y] += rng.normal(4.0, 2.0, n).astype(np.float32)
    return z, y


def _fit_digest(method, z, y, threads, **params):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        cal = REGISTRY[method](device="cpu", **params).fit(z, y)
    finally:
        torch.set_num_threads(before)
    assert torch.get_num_threads() == before
    h = hashlib.sha256()
    for name in sorted(cal.params_):
        h.update(np.ascontiguousarray(cal.params_[name]).tobytes())
    return h.hexdigest()


@pytest.fixture()
def low_threshold(monkeypatch):
    """Multi-thread the data term from 10^4 entries: the same code path on test-sized data (its
    reductions, 1,000 x 300 = 3e5 elements, are above torch's grain size of 32,768, so they do
    split across threads)."""
    monkeypatch.setattr(fit_threads, "SINGLE_THREAD_MAX_ENTRIES", 10_000)


@pytest.mark.parametrize(
    "method,params,threads",
    [("ms_b", {}, (2, 3)), ("vs_b", {}, (3,)), ("vs", {}, (3,)), ("dirichlet", {}, (3,)),
     ("ms_b", {"odir": [1e-2, 1e-2]}, (3,))],
)  # fmt: skip
def test_fits_are_bit_identical_on_any_number_of_threads(low_threshold, method, params, threads):
    # with the optimiser on the caller's threads (the former code), ms_b and dirichlet on
    # 2,000 x 100 gave three different parameter sets on 1, 2 and 3 threads
    z, y = _logits(1000, 300)
    ref = _fit_digest(method, z, y, 1, max_iter=30, **params)
    for n in threads:
        assert _fit_digest(method, z, y, n, max_iter=30, **params) == ref


@pytest.mark.slow
@pytest.mark.parametrize("method", ["ms_b", "vs_b", "dirichlet"])
def test_fit_above_the_real_threshold_is_bit_identical_on_1_and_3_threads(method):
    z, y = _logits(3000, 800)  # 2.4e6 entries > 2^21
    assert z.size > SINGLE_THREAD_MAX_ENTRIES
    ref = _fit_digest(method, z, y, 1, max_iter=4)
    assert _fit_digest(method, z, y, 3, max_iter=4) == ref


@pytest.mark.parametrize(
    "kind,entries,classes,expected",
    [("ms_b", SINGLE_THREAD_MAX_ENTRIES + 1, 1000, 3), ("vs_b", SINGLE_THREAD_MAX_ENTRIES + 1, 300, 3),
     ("ms_b", SINGLE_THREAD_MAX_ENTRIES, 1000, 1), ("ts", 10**9, 1000, 1),
     ("ms_b", 10**9, MIN_THREADED_CLASSES - 1, 1)],
)  # fmt: skip
def test_only_large_affine_fits_get_threads_and_the_optimiser_runs_on_one(
    kind, entries, classes, expected
):
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        with cpu_fit_settings(entries, "cpu", kind, classes) as data:
            assert data == expected
            assert torch.get_num_threads() == 1  # the optimiser's dot products
        assert torch.get_num_threads() == 3
        with cpu_fit_settings(entries, "cuda", kind, classes) as data:
            assert data == 1
    finally:
        torch.set_num_threads(before)


FIT_THREADS = """
import json, os, sys
from calbench._device import set_fit_threads, fit_threads
set_fit_threads(3)
import numpy, torch
from threadpoolctl import threadpool_info
from calbench.calibrators.fit_threads import cpu_fit_settings
with cpu_fit_settings(1 << 22, "cpu", "ms_b", 1000) as data:
    pass
blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
print(json.dumps([fit_threads(), torch.get_num_threads(), os.environ["OMP_NUM_THREADS"], data,
                  blas]))
"""


def test_set_fit_threads_keeps_everything_else_on_one_thread():
    out = subprocess.run(
        [sys.executable, "-c", FIT_THREADS], capture_output=True, text=True, check=True
    ).stdout
    fit, torch_threads, env, data, blas = json.loads(out)
    assert (fit, torch_threads, env, data) == (3, 1, "1", 3)
    assert set(blas) <= {1}  # numpy's BLAS
    with pytest.raises(ValueError, match="--threads must be >= 1"):
        _device.set_fit_threads(0)


@pytest.fixture()
def restore_device():
    yield
    _device.use_device(None)


def test_use_device_decides_what_auto_means(monkeypatch, restore_device):
    monkeypatch.setattr(_device, "_cuda_available", lambda: True)  # a machine with a GPU
    assert _device.resolve_device("auto") == "cuda"
    assert _device.use_device("cpu") == "cpu" == _device.chosen_device()
    assert _device.resolve_device("auto") == "cpu"  # --device cpu: the GPU is not used
    assert _device.resolve_device("cuda") == "cuda"  # a device the params name is kept
    assert _device.use_device("auto") == "cuda"
    assert _device.use_device(None) is None
    assert _device.resolve_device("auto") == "cuda"


def test_cuda_without_a_gpu_is_a_one_line_error(monkeypatch, restore_device):
    monkeypatch.setattr(_device, "_cuda_available", lambda: False)
    with pytest.raises(ValueError, match=r"no GPU is available; use --device cpu$"):
        _device.use_device("cuda")
    assert _device.chosen_device() is None
    assert _device.use_device("auto") == "cpu"


def test_the_reuse_digest_records_the_device(restore_device):
    from calbench.reuse import reuse_digest

    spec = {"calibrators": {"ts": {"method": "ts", "params": {}}}, "evaluation": {}, "plots": {}}
    meta = {"logits_sha256": "a", "order_hash": "b", "dataset": "d", "model": "m"}
    digests = set()
    for device in (None, "cpu"):
        _device.use_device(device)
        digests.add(reuse_digest("ts", spec, meta, "s", "c"))
    assert len(digests) == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without GPU")
def test_cli_device_cuda_without_a_gpu(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "calbench", "calibrate", "--logits", "x.npz", "--split", "s.npz",
         "--spec", '{"calibrators": {}}', "--device", "cuda", "--calibrators-dir", "c",
         "--metrics-dir", "m", "--plots-dir", "p", "--compare", "c.csv"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no GPU is available; use --device cpu" in lines[0]
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("method", ["ms_b", "vs_b", "dirichlet"])
def test_denormals_in_the_worker_threads_leave_the_fit_unchanged(low_threshold, method):
    """Sharp logits (as tests/calibrators/test_scaling.py's denormal case, scale 30): hundreds of
    float32 softmax terms fall in the denormal range, which the fit's own thread flushes to zero
    and the worker threads of the data term do not; the fitted parameters are still the same."""

    rng = np.random.default_rng(8)
    z = rng.normal(size=(600, 300)) * 30
    y = sample_labels(rng, softmax64(z))
    z = z.astype(np.float32)
    ref = _fit_digest(method, z, y, 1, max_iter=30)
    assert _fit_digest(method, z, y, 3, max_iter=30) == ref
    params = REGISTRY[method](device="cpu", max_iter=30).fit(z, y).params_
    x = torch.from_numpy(z)
    if method == "dirichlet":
        x = torch.log_softmax(x, dim=1)
    g = x @ torch.from_numpy(params["W"]) if "W" in params else x * torch.from_numpy(params["v"])
    logp = torch.log_softmax(g + torch.from_numpy(params["b"]), dim=1)
    assert int(((logp < -87.3) & (logp > -103.9)).sum()) > 100  # the case is really exercised


def test_worker_threads_flush_denormals_during_a_threaded_fit():
    """The flush-to-zero setting is per thread: a threaded fit sets it on the OpenMP workers of
    its data term too, and clears it on them afterwards."""
    tiny = torch.full((400_000,), 1e-39, dtype=torch.float32)  # float32 denormals
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        assert int((tiny * 1.5 != 0).sum()) == tiny.numel()
        with cpu_fit_settings(SINGLE_THREAD_MAX_ENTRIES + 1, "cpu", "ms_b", 1000) as data:
            assert data == 3
            with fit_threads.data_threads(data):
                assert int((tiny * 1.5 != 0).sum()) == 0  # every thread flushed
        assert int((tiny * 1.5 != 0).sum()) == tiny.numel()  # and none afterwards
    finally:
        torch.set_num_threads(before)


def test_threads_are_kept_with_scikit_learns_openmp_loaded_too():
    """scikit-learn ships its own libgomp: with both runtimes in the process the fit still finds
    torch's (its worker flush needs it) instead of falling back to one thread."""
    import sklearn.ensemble  # noqa: F401  (loads scikit-learn's libgomp)
    from threadpoolctl import threadpool_info

    assert len([i for i in threadpool_info() if i["user_api"] == "openmp"]) >= 2
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        with cpu_fit_settings(SINGLE_THREAD_MAX_ENTRIES + 1, "cpu", "ms_b", 1000) as data:
            assert data == 3
    finally:
        torch.set_num_threads(before)
