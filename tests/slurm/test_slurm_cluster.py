"""The workflow on a real SLURM cluster: ``profiles/slurm`` through snakemake-executor-plugin-slurm.

A one-node SLURM cluster (munged, slurmctld, slurmd) is started on localhost by
``tests/slurm/cluster.sh`` (Debian's packages, installed by the script if missing). The tiny
test configuration (``config/test.yaml``) is run once locally and once with
``--profile profiles/slurm`` (adapted to this cluster the way docs/slurm.md tells users to adapt
it: partition, no account, CPUs of one node, fast polling, ``squeue`` status without an
accounting database). The tests check that

* every job of the SLURM run went through ``sbatch`` and ended COMPLETED with exit code 0
  (``scontrol show job`` and the slurmctld log), and no rule but ``all`` ran on the submit host;
* every result file is byte-for-byte equal to the local run's;
* a job cancelled with ``scancel`` while it runs fails the invocation without leaving partial
  results, and the next invocation reruns it cleanly (same bytes again).

Skipped, with the reason in the output, only where the machine cannot run the daemons at all
(not Linux, not root, or no SLURM and no apt-get). Run by hand:
``python -m pytest tests/slurm -q -m slurm``; the cluster alone: ``tests/slurm/cluster.sh``.
"""

from __future__ import annotations

import filecmp
import importlib.metadata
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CLUSTER = Path(__file__).resolve().parent / "cluster.sh"
PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
CONFIG = REPO / "config" / "test.yaml"
SNAKEFILE = REPO / "Snakefile"
#: Fixed scratch directory, so a session killed before its teardown is cleaned up by the next.
BASE = Path(os.environ.get("CALBENCH_SLURM_BASE", "/tmp/calbench-slurm"))
#: Upper bound of one Snakemake invocation (seconds); it runs under ``timeout -k 10``.
RUN_LIMIT = 420
#: What is compared byte for byte (logs, benchmarks and .snakemake legitimately differ).
COMPARED = ("results", "reports")
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+)")


# --- the cluster ------------------------------------------------------------------------------
def _cluster(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CLUSTER), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _log_tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return f"({path} unreadable)"


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Path]:
    """A running one-node cluster; every daemon it started is stopped by PID afterwards."""
    check = _cluster("check")
    if check.returncode == 3:
        pytest.skip(
            f"SLURM test skipped: this machine cannot run the SLURM daemons: {check.stdout}"
        )
    assert check.returncode == 0, check.stderr
    install = _cluster("install", timeout=1000)
    assert install.returncode == 0, f"apt installation failed:\n{install.stderr}"
    try:
        importlib.metadata.version("snakemake-executor-plugin-slurm")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("pip install snakemake-executor-plugin-slurm (a test dependency) first")

    _cluster("stop", str(BASE))  # daemons of an earlier session that was killed
    shutil.rmtree(BASE, ignore_errors=True)
    BASE.mkdir(parents=True)
    BASE.chmod(0o755)  # munged (user munge) writes its log below it
    try:
        start = _cluster("start", str(BASE), timeout=90)
        assert start.returncode == 0, (
            f"cluster did not start:\n{start.stderr}\n"
            f"slurmctld.log:\n{_log_tail(BASE / 'logs' / 'slurmctld.log')}\n"
            f"slurmd.log:\n{_log_tail(BASE / 'logs' / 'slurmd.log')}"
        )
        yield BASE
    finally:
        stop = _cluster("stop", str(BASE))
        sys.stderr.write(stop.stderr)
        if stop.returncode == 0:  # keep BASE/logs for a look after a failure
            for sub in ("state", "etc", "pids"):
                shutil.rmtree(BASE / sub, ignore_errors=True)


def site_profile(dest: Path) -> Path:
    """``profiles/slurm`` pointed at the test cluster, as docs/slurm.md tells users to do."""
    profile = yaml.safe_load(PROFILE.read_text())
    cpus = len(os.sched_getaffinity(0))  # the node's CPUs (cluster.sh: what slurmd measures)
    profile["default-resources"]["slurm_partition"] = "debug"
    profile["slurm-no-account"] = True  # the test cluster has no accounts
    profile["slurm-status-command"] = "squeue"  # and no accounting database for sacct
    profile["seconds-between-status-checks"] = 1  # the plugin's defaults poll every 40+ s
    profile["slurm-init-seconds-before-status-checks"] = 1
    profile["latency-wait"] = 5  # one node: no file-system delay
    profile["jobs"] = 4
    profile["cores"] = min(profile["cores"], cpus)  # a group job must fit on the node
    for resources in profile.get("set-resources", {}).values():
        if "cpus_per_gpu" in resources:
            resources["cpus_per_gpu"] = min(resources["cpus_per_gpu"], cpus)
    for rule, threads in profile.get("set-threads", {}).items():
        profile["set-threads"][rule] = min(threads, cpus)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    return dest


def profile_args(profile: Path) -> list[str]:
    """The cluster profile alone: without ``--workflow-profile none`` Snakemake would also load
    the workflow's local ``profiles/default``, whose keys override the cluster profile's."""
    return ["--profile", str(profile), "--workflow-profile", "none"]


def snakemake_cmd(workdir: Path, *extra: str) -> list[str]:
    return [
        "timeout", "-k", "10", str(RUN_LIMIT),
        sys.executable, "-m", "snakemake",
        "--snakefile", str(SNAKEFILE),
        "--configfile", str(CONFIG),
        "--directory", str(workdir),
        *extra,
    ]  # fmt: skip


def run_snakemake(workdir: Path, *extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        snakemake_cmd(workdir, *extra),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=RUN_LIMIT + 30,
    )
    (workdir / f"snakemake-{int(time.time() * 1000)}.out").write_text(proc.stdout + proc.stderr)
    return proc


def _fail_text(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}; last output:\n" + "\n".join(
        (proc.stdout + proc.stderr).splitlines()[-40:]
    )


# --- what SLURM knows about the jobs -----------------------------------------------------------
def slurm_jobs(workdir: Path) -> dict[int, dict[str, str]]:
    """Jobs slurmctld still holds (MinJobAge=3600 s) whose working directory is ``workdir``."""
    out = subprocess.run(
        ["scontrol", "show", "job", "--oneliner"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout
    jobs = {}
    for line in out.splitlines():
        fields = dict(re.findall(r"(\S+?)=(\S*)", line))
        if fields.get("WorkDir") == str(workdir) and "JobId" in fields:
            jobs[int(fields["JobId"])] = fields
    return jobs


def batch_submissions(base: Path) -> set[int]:
    """Job ids slurmctld logged as batch submissions (what ``sbatch`` sends)."""
    text = (base / "logs" / "slurmctld.log").read_text(errors="replace")
    return {int(j) for j in re.findall(r"_slurm_rpc_submit_batch_job: JobId=(\d+)", text)}


def assert_all_through_sbatch(proc: subprocess.CompletedProcess, workdir: Path, base: Path):
    output = proc.stdout + proc.stderr
    submitted = {int(j) for j in SUBMITTED.findall(output)}
    assert submitted, "Snakemake submitted no SLURM job"
    local = set(re.findall(r"^localrule (\w+):", output, flags=re.M))
    assert local <= {"all"}, f"rules ran on the submit host instead of SLURM: {local - {'all'}}"
    jobs = slurm_jobs(workdir)
    assert set(jobs) >= submitted, f"SLURM does not know jobs {submitted - set(jobs)}"
    assert submitted <= batch_submissions(base), "a job did not arrive through sbatch"
    for job_id in submitted:
        state = (jobs[job_id]["JobState"], jobs[job_id]["ExitCode"])
        assert state == ("COMPLETED", "0:0"), f"job {job_id} ({jobs[job_id]['Comment']}): {state}"
    return submitted


# --- comparing results --------------------------------------------------------------------------
def result_files(workdir: Path) -> set[str]:
    return {
        str(p.relative_to(workdir))
        for top in COMPARED
        if (workdir / top).exists()
        for p in (workdir / top).rglob("*")
        if p.is_file()
    }


def _same(a: Path, b: Path) -> bool:
    """Byte for byte (no other output records wall-clock times), except the report's run date,
    command line and wall time, which differ between a local and a SLURM run by design."""
    if a.name == "report.html" and b.name == "report.html":
        mask = re.compile(rb'(<tr id="run-(?:date|command|wall)">).*?(</tr>)', re.S)
        return mask.sub(rb"\1\2", a.read_bytes()) == mask.sub(rb"\1\2", b.read_bytes())
    return filecmp.cmp(a, b, shallow=False)


def assert_nothing_partial(local: Path, cluster: Path) -> None:
    """Every result file of ``cluster`` is complete (equal to the local run's) or absent."""
    extra = result_files(cluster) - result_files(local)
    assert not extra, f"files no complete run writes (partial or temporary): {sorted(extra)}"
    partial = [f for f in sorted(result_files(cluster)) if not _same(local / f, cluster / f)]
    assert not partial, f"partial or wrong result files after the cancel: {partial}"


def assert_same_results(local: Path, cluster: Path) -> None:
    ours, theirs = result_files(local), result_files(cluster)
    assert ours, "the local run wrote no results"
    assert ours == theirs, (
        f"only local: {sorted(ours - theirs)[:10]}; only SLURM: {sorted(theirs - ours)[:10]}"
    )
    differ = [f for f in sorted(ours) if not _same(local / f, cluster / f)]
    assert not differ, f"{len(differ)} files differ between the local and the SLURM run: {differ}"


# --- fixtures: one local run, one SLURM run -------------------------------------------------------
@pytest.fixture(scope="session")
def runs_root(tmp_path_factory) -> Path:
    if not (CONFIG.exists() and SNAKEFILE.exists()):
        pytest.fail(f"the workflow's tiny configuration is missing: {CONFIG}, {SNAKEFILE}")
    return tmp_path_factory.mktemp("slurm_runs")


@pytest.fixture(scope="session")
def runs(slurm_cluster, runs_root) -> dict:
    """The local reference run and the SLURM run, side by side (they share the machine's CPUs
    while the SLURM run waits on the scheduler)."""
    local, cluster = runs_root / "local", runs_root / "cluster"
    local.mkdir()
    cluster.mkdir()
    cores = str(min(2, len(os.sched_getaffinity(0))))
    profile = site_profile(runs_root / "profile")
    # torch's CPU results depend on the thread count: the local reference run uses the threads
    # the cluster profile gives each rule, so both runs compute the same numbers
    threads = yaml.safe_load((profile / "config.yaml").read_text()).get("set-threads", {})
    thread_args = ["--set-threads", *(f"{r}={t}" for r, t in threads.items())] if threads else []
    local_proc = subprocess.Popen(
        snakemake_cmd(local, "--cores", cores, *thread_args),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        proc = run_snakemake(cluster, *profile_args(profile))
        local_out, _ = local_proc.communicate(timeout=RUN_LIMIT + 30)
    finally:
        if local_proc.poll() is None:
            os.killpg(local_proc.pid, signal.SIGKILL)
            local_proc.wait(timeout=30)
    assert local_proc.returncode == 0, f"local reference run failed:\n{local_out[-3000:]}"
    assert proc.returncode == 0, "SLURM run failed: " + _fail_text(proc)
    return {"local": local, "cluster": cluster, "profile": profile, "proc": proc}


# --- tests --------------------------------------------------------------------------------------
def test_every_job_goes_through_sbatch_and_matches_the_local_run(slurm_cluster, runs):
    workdir, proc = runs["cluster"], runs["proc"]
    submitted = assert_all_through_sbatch(proc, workdir, slurm_cluster)
    # grouping (profiles/slurm: groups) puts the small CPU jobs together: fewer SLURM jobs than
    # workflow jobs, and group jobs among them
    comments = [slurm_jobs(workdir)[j]["Comment"] for j in submitted]
    assert any(c.startswith("rule_calibrate") for c in comments), comments
    assert any(c.startswith("rule_train_model") for c in comments), comments
    assert_same_results(runs["local"], workdir)


def _batch_script(job_id: int) -> str:
    return subprocess.run(
        ["scontrol", "write", "batch_script", str(job_id), "-"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout


def _wait_running(
    workdir: Path, prefix: str, limit: float, exclude=(), mentions: str = ""
) -> int | None:
    """Id of a new job of ``workdir`` whose comment starts with ``prefix`` and whose batch
    script contains ``mentions``, once it RUNS."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        for job_id, fields in slurm_jobs(workdir).items():
            if job_id in exclude:
                continue
            if (
                fields["Comment"].startswith(prefix)
                and fields["JobState"] == "RUNNING"
                and mentions in _batch_script(job_id)
            ):
                return job_id
        time.sleep(0.2)
    return None


def test_cancelled_job_is_rerun_cleanly(slurm_cluster, runs):
    workdir, profile, local = runs["cluster"], runs["profile"], runs["local"]
    # One calibrator of one model, as if never run: its model's calibration job and the report rerun.
    fitted = sorted((workdir / "results" / "calibrators").glob("*/*/*.json"))
    cheap = [p for p in fitted if p.stem == "uncalibrated"]
    target = (cheap or fitted)[0]
    dataset, model, method = target.parent.parent.name, target.parent.name, target.stem
    removed = [
        target,
        workdir / "results" / "metrics" / dataset / model / f"{method}.csv",
        workdir / "results" / "plots" / dataset / model / f"{method}.png",
    ]
    for path in removed:
        path.unlink()
    before = set(slurm_jobs(workdir))
    proc = subprocess.Popen(
        snakemake_cmd(workdir, *profile_args(profile)),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        job_id = _wait_running(
            workdir,
            "rule_calibrate",
            limit=RUN_LIMIT - 60,
            exclude=before,
            mentions=f"calibrate:dataset={dataset},model={model}",
        )
        assert job_id is not None, "the calibration job never started running"
        time.sleep(2)  # mid-run: the job is fitting its calibrators
        subprocess.run(["scancel", str(job_id)], check=True, timeout=30)
        out, _ = proc.communicate(timeout=RUN_LIMIT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    (workdir / "snakemake-cancelled.out").write_text(out)
    assert proc.returncode != 0, "Snakemake did not notice the cancelled job:\n" + out[-3000:]
    assert f"SLURM jobid {job_id}" in out, out[-3000:]
    deadline = time.monotonic() + 30
    while slurm_jobs(workdir)[job_id]["JobState"] != "CANCELLED" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert slurm_jobs(workdir)[job_id]["JobState"] == "CANCELLED"
    # the cancel interrupted the job: its outputs are not all there
    assert not all(path.exists() for path in removed), "the job finished before the cancel"
    assert_nothing_partial(local, workdir)

    rerun = run_snakemake(workdir, *profile_args(profile))
    assert rerun.returncode == 0, "rerun after scancel failed: " + _fail_text(rerun)
    submitted = assert_all_through_sbatch(rerun, workdir, slurm_cluster)
    assert job_id not in submitted
    comments = {slurm_jobs(workdir)[j]["Comment"] for j in submitted}
    assert any(c.startswith("rule_calibrate") for c in comments), comments
    assert all(path.exists() for path in removed)
    assert_same_results(local, workdir)
