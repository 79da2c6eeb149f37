"""Warm start (calbench.cli._warm): same bytes as a new process, errors, kill and refusal paths.

One warm process serves the module's tests; each test runs ``calbench`` as a real command (a
new Python process) with ``CALBENCH_WARM`` pointing at it, and reads the warm process's log to
tell whether a job was served warm.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from calbench.cli import _warm
from calbench.split import save_split, study_split

N, K = 400, 5


def _env(warm, **extra):
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", CALBENCH_WARM=str(warm) if warm else "0")
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(var, None)
    env.update(extra)
    return env


def _calbench(args, warm, **kw):
    env = _env(warm, **kw.pop("env", {}))
    return subprocess.run(
        [sys.executable, "-m", "calbench", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        **kw,
    )


def _log(warm: Path) -> str:
    path = warm / "warm.log"
    return path.read_text() if path.exists() else ""


def _jobs(warm: Path) -> list[str]:
    return [ln for ln in _log(warm).splitlines() if ln.startswith("job ")]


def _wait(cond, what, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("warmdata")
    rng = np.random.default_rng(3)
    z = (rng.normal(size=(N, K)) * 3.0).astype(np.float32)
    y = rng.integers(0, K, N)
    z[np.arange(N), y] += 2.0
    np.savez(d / "logits.npz", logits=z, labels=y, order_hash="abc", model="m", dataset="ds")
    val, test = study_split(N)
    save_split(d / "split.npz", val, test)
    return d


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A warm process, started the way the first caller starts one, stopped at the end."""
    root = tmp_path_factory.mktemp("warm")
    folder = root / "w"
    _warm._start(str(folder))  # noqa: SLF001 (the caller's own start-up path)
    _wait(lambda: (folder / "warm.sock").exists(), "the warm process's socket")
    yield folder
    _warm.stop(str(folder))
    _wait(lambda: "exits" in _log(folder), "the warm process to exit", 30)


def _fit(data, out, warm):
    return _calbench(
        ["fit-calibrator", "--logits", data / "logits.npz", "--split", data / "split.npz",
         "--method", "ts", "--params", '{"precision": "float32"}', "--threads", 1, "--out", out],
        warm,
    )


def _evaluate(data, cal, out, warm, logits=None):
    return _calbench(
        ["evaluate", "--logits", logits or data / "logits.npz", "--split", data / "split.npz",
         "--calibrator", cal, "--metrics", "accuracy,ece,cwece,nll", "--halves", "test,val",
         "--n-bootstrap", 50, "--seed", 0, "--plot", out.with_suffix(".png"), "--title", "TS",
         "--out", out],
        warm,
    )


def test_warm_jobs_write_the_same_bytes_as_new_processes(data, warm, tmp_path):
    cold, hot = tmp_path / "cold", tmp_path / "hot"
    for where, w in ((cold, None), (hot, warm)):
        before = len(_jobs(warm))
        for name in ("ts", "iso", "uncalibrated"):
            r = _calbench(
                ["fit-calibrator", "--logits", data / "logits.npz", "--split",
                 data / "split.npz", "--method", name, "--threads", 1,
                 "--out", where / f"{name}.json"],
                w,
            )
            assert r.returncode == 0, r.stderr
            r = _evaluate(data, where / f"{name}.json", where / f"{name}.csv", w)
            assert r.returncode == 0, r.stderr
        cals = [where / f"{c}.json" for c in ("uncalibrated", "ts", "iso")]
        r = _calbench(
            ["compare", "--logits", data / "logits.npz", "--split", data / "split.npz",
             "--calibrators", *cals, "--metrics", "ece,nll", "--baselines", "uncalibrated",
             "--n-bootstrap", 100, "--out", where / "compare.csv"],
            w,
        )
        assert r.returncode == 0, r.stderr
        r = _calbench(
            ["plot-reliability", "--grid", "--logits", data / "logits.npz", "--split",
             data / "split.npz", "--calibrator", *cals, "--out", where / "grid.png"],
            w,
        )
        assert r.returncode == 0, r.stderr
        served = len(_jobs(warm)) - before
        assert served == (8 if w else 0), _log(warm)
    names = sorted(p.name for p in cold.iterdir())
    assert names == sorted(p.name for p in hot.iterdir()) and len(names) == 11
    for name in names:
        assert (cold / name).read_bytes() == (hot / name).read_bytes(), name


def test_a_user_error_is_one_line_and_status_2_through_the_warm_process(data, warm, tmp_path):
    before = len(_jobs(warm))
    r = _evaluate(data, tmp_path / "none.json", tmp_path / "e.csv", warm)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("calbench evaluate: error:"), r.stderr
    assert "none.json" in lines[0]
    r = _calbench(["evaluate", "--no-such-option"], warm)
    assert r.returncode == 2 and "arguments are required" in r.stderr
    assert len(_jobs(warm)) - before == 2
    assert not (tmp_path / "e.csv").exists()


def test_output_and_working_folder_are_the_callers(data, warm, tmp_path):
    r = _calbench(
        ["fit-calibrator", "--logits", data / "logits.npz", "--split", data / "split.npz",
         "--method", "ts", "--out", "rel/ts.json"],
        warm,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "rel" / "ts.json").is_file()
    r = _calbench(["evaluate", "--help"], warm)  # printed by the warm child on our stdout
    assert r.returncode == 0 and r.stdout.startswith("usage: calbench evaluate"), r.stderr


def _long_evaluate(data, warm, tmp_path):
    """An evaluate that would run for hours (10^8 bootstrap resamples), started warm; returns
    (caller, warm child's pid)."""
    cal = tmp_path / "ts.json"
    assert _fit(data, cal, warm).returncode == 0
    before = len(_jobs(warm))
    proc = subprocess.Popen(
        [sys.executable, "-m", "calbench", "evaluate", "--logits", str(data / "logits.npz"),
         "--split", str(data / "split.npz"), "--calibrator", str(cal), "--metrics", "ece",
         "--halves", "test", "--n-bootstrap", str(10**8), "--out", str(tmp_path / "e.csv")],
        env=_env(warm),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait(lambda: len(_jobs(warm)) > before, "the evaluate job to start")
    pid = int(_jobs(warm)[-1].split()[1].rstrip(":"))
    _wait(lambda: _alive(pid), "the warm child")
    return proc, pid


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_killing_the_caller_kills_its_warm_job(data, warm, tmp_path):
    proc, pid = _long_evaluate(data, warm, tmp_path)
    time.sleep(0.3)
    assert _alive(pid) and proc.poll() is None
    proc.kill()  # SIGKILL: nothing can be relayed; the child sees its connection close
    proc.wait(10)
    _wait(lambda: not _alive(pid), "the orphaned warm job to die", 20)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_is_passed_on_and_sets_the_status(data, warm, tmp_path, sig):
    """The shell's status of a new process stopped by the signal: 128 + its number."""
    proc, pid = _long_evaluate(data, warm, tmp_path)
    time.sleep(0.3)
    proc.send_signal(sig)
    assert proc.wait(20) == 128 + sig
    _wait(lambda: not _alive(pid), "the warm job to end", 20)
    assert not (tmp_path / "e.csv").exists()


def test_unsafe_or_mismatched_callers_run_cold(data, warm, tmp_path):
    before = len(_jobs(warm))
    # two threads asked for: numpy's BLAS would differ from the warm process's one thread
    r = _calbench(
        ["fit-calibrator", "--logits", data / "logits.npz", "--split", data / "split.npz",
         "--method", "ts", "--out", tmp_path / "a.json"],
        warm,
        env={"OMP_NUM_THREADS": "2"},
    )
    assert r.returncode == 0, r.stderr
    # a verb that is not served warm
    r = _calbench(["split", "--logits", data / "logits.npz", "--out", tmp_path / "s.npz"], warm)
    assert r.returncode == 0, r.stderr
    assert len(_jobs(warm)) == before


def test_a_folder_others_can_enter_is_never_used(data, tmp_path):
    folder = tmp_path / "open"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    r = _fit(data, tmp_path / "a.json", folder)
    assert r.returncode == 0, r.stderr
    time.sleep(0.5)
    assert not (folder / "warm.log").exists() and not (folder / "warm.sock").exists()


def test_a_request_from_other_code_is_refused_and_the_warm_process_exits(tmp_path):
    folder = tmp_path / "w"
    _warm._start(str(folder))  # noqa: SLF001
    _wait(lambda: (folder / "warm.sock").exists(), "the warm process's socket")
    conn = _warm._connect(str(folder))  # noqa: SLF001
    assert conn is not None
    head = json.dumps({"argv": ["evaluate"], "cwd": str(tmp_path), "env": {}, "umask": 0o22,
                       "fingerprint": "other code"}).encode()
    r, w = os.pipe()
    try:
        fds = [r, w, w]
        conn.sendmsg([struct.pack("!I", len(head)), head],
                     [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("3i", *fds))])
        assert conn.recv(1) == b"-"
    finally:
        conn.close()
        os.close(r)
        os.close(w)
    _wait(lambda: not (folder / "warm.sock").exists(), "the warm process to exit", 20)
    assert "exits" in _log(folder) and not _jobs(folder)


def test_fingerprint_follows_the_sources(tmp_path, monkeypatch):
    base = _warm.fingerprint()
    assert base == _warm.fingerprint()
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    assert _warm.fingerprint() != base


def test_off_values_and_enable(monkeypatch, tmp_path):
    for value in ("0", "off", "", "false"):
        monkeypatch.setenv("CALBENCH_WARM", value)
        assert _warm.folder() is None
        assert _warm.run(["evaluate"]) is None
    monkeypatch.setenv("CALBENCH_WARM", "0")
    assert _warm.enable(tmp_path) is None  # an explicit 0 wins
    monkeypatch.delenv("CALBENCH_WARM")
    assert _warm.enable(tmp_path) == str(tmp_path)
