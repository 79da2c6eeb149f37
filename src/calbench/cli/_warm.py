"""Warm start: run a short verb in a process forked from one that has its libraries imported.

Every workflow job is its own ``calbench <verb>`` process, and for the short, numerous verbs
start-up is most of the work: importing torch costs about 1.4 CPU-s and matplotlib about 0.4,
while fitting temperature scaling on 5,000 logits or computing six metrics takes milliseconds.

When ``CALBENCH_WARM`` names a folder (the workflow sets it for local runs), a verb listed in
:data:`WARM_VERBS` is handed to a *warm process* listening on ``<folder>/warm.sock``:

* the warm process has imported torch, numpy, scipy, scikit-learn, matplotlib and the calbench
  modules those verbs use, and has run nothing;
* for each request it forks a child, which takes over the caller's standard input, output and
  error, working folder, environment, ``sys.argv`` and umask, runs ``calbench.cli.main`` exactly
  as a new process would, and reports the exit status back; the caller exits with it;
* so the job costs the fork and its own work, not the imports.

What keeps it exact and safe:

* **Same code, same results.** A request carries a fingerprint of the calbench sources (every
  file's path, size and mtime), the interpreter and ``sys.path``; a warm process started from
  other code refuses it and exits, and the caller runs the verb itself.  Tests check that
  outputs are byte-identical with and without the warm process.
* **Same threads.** The warm process is started with one BLAS/OpenMP thread, and only callers
  whose environment also asks for one thread (``OMP_NUM_THREADS=1``, as the workflow's rules set
  for these verbs) are served, so numpy's BLAS runs as in a new process.
* **Kill and interrupt.** SIGINT, SIGTERM and SIGHUP sent to the caller are passed on to the
  child; if the caller dies (SIGKILL included), the child notices its connection closing and
  kills itself, so a killed workflow leaves no job running.
* **Only its owner.** The folder is created private (mode 0700), and the warm process serves
  only connections from its own user (``SO_PEERCRED``).
* **Never required.** Any failure to reach a warm process (none running, another version, a
  path too long, a platform without ``fork``) runs the verb in the calling process, as without
  ``CALBENCH_WARM``.  The first caller that finds none starts one in the background and runs
  its own verb itself; the warm process exits after :data:`IDLE_SECONDS` without requests, or
  when asked to (``python -m calbench.cli._warm stop <folder>``, which the workflow runs when
  it ends).

Set ``CALBENCH_WARM=0`` to turn it off (e.g. to measure each job's own CPU time: Snakemake's
``benchmark:`` files count the calling process and its children, and a warm child is the warm
process's, not the caller's).
"""

from __future__ import annotations

import array
import errno
import json
import os
import signal
import socket
import struct
import sys

from calbench._device import THREAD_VARIABLES

#: Verbs served by a warm process: the workflow's per-model steps that import torch or
#: matplotlib (when run with one thread).
WARM_VERBS = frozenset(
    {
        "import-logits",
        "train-model",
        "cache-logits",
        "fit-calibrator",
        "evaluate",
        "compare",
        "plot-reliability",
    }
)
#: Seconds a warm process waits for a request before it exits.
IDLE_SECONDS = 60.0
_SOCK, _LOCK, _LOG = "warm.sock", "warm.lock", "warm.log"
#: Values of ``CALBENCH_WARM`` that turn warm start off.
OFF_VALUES = frozenset({"", "0", "off", "false", "no"})


# --------------------------------------------------------------------------------------------
# the caller's side (cheap: no numpy, no calbench library import)
# --------------------------------------------------------------------------------------------
def folder() -> str | None:
    """The warm folder named by ``CALBENCH_WARM``, or None when warm start is off."""
    value = os.environ.get("CALBENCH_WARM", "").strip()
    if value.lower() in OFF_VALUES:
        return None
    return os.path.abspath(value)


def enable(default: str | os.PathLike) -> str | None:
    """Turn warm start on for this process and the jobs it starts, in ``default`` unless
    ``CALBENCH_WARM`` is already set (``0`` keeps it off); return the folder or None."""
    os.environ.setdefault("CALBENCH_WARM", str(default))
    return folder()


def fingerprint() -> str:
    """What a warm process must share with its caller: interpreter, module search path and
    every file of the calbench package (relative path, size, mtime in ns)."""
    import hashlib

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    # sys.path[0] is the script's folder, which differs between the console script and -m
    h.update(repr((sys.executable, sys.version, root, sys.path[1:])).encode())
    for base, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(base, name))
                rel = os.path.relpath(os.path.join(base, name), root)
                h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _one_thread(env) -> bool:
    """True when a new process with ``env`` would run numpy's BLAS and OpenMP on one thread."""
    # OpenBLAS and MKL read their own variable first, then OMP_NUM_THREADS (which must be set)
    return env.get("OMP_NUM_THREADS") == "1" and all(
        env.get(v, "1") == "1" for v in THREAD_VARIABLES
    )


def run(argv: list[str]) -> int | None:
    """Run ``calbench argv`` in a warm child and return its exit status, or None when no warm
    process can take it (the caller then runs the verb itself)."""
    where = folder()
    if where is None or not argv or argv[0] not in WARM_VERBS or not hasattr(os, "fork"):
        return None
    if not _one_thread(os.environ):
        return None
    try:
        conn = _connect(where)
    except OSError:  # e.g. the working folder was removed: let the verb report it
        return None
    if conn is None:
        _start(where)
        return None
    with conn:
        return _request(conn, argv)


def _connect(where: str) -> socket.socket | None:
    """A connection to the warm process of ``where``, or None."""
    try:
        st = os.stat(where)
    except OSError:
        return None
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None  # not ours or not private: never hand a job to it
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cwd = os.getcwd()
    try:
        os.chdir(where)  # a relative socket path: AF_UNIX paths are limited to ~107 bytes
        conn.connect(_SOCK)
    except OSError:
        conn.close()
        return None
    finally:
        os.chdir(cwd)
    return conn


def _request(conn: socket.socket, argv: list[str]) -> int | None:
    umask = os.umask(0)
    os.umask(umask)
    head = json.dumps(
        {
            "argv": argv,
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "umask": umask,
            "fingerprint": fingerprint(),
        }
    ).encode()
    fds = array.array("i", [0, 1, 2])
    try:
        conn.sendmsg(
            [struct.pack("!I", len(head)), head],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())],
        )
        answer = _read(conn, 1)
    except OSError:
        return None
    if answer != b"+":  # refused (other code), or no job started: run it here
        return None
    head = _read(conn, 4)
    pid = struct.unpack("!i", head)[0] if len(head) == 4 else 0
    received: list[int] = []

    def relay(signum, _frame):
        received.append(signum)
        if pid > 0:  # never 0: that would signal this process's own group
            try:
                os.kill(pid, signum)
            except OSError:
                pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, relay)
    status = _read(conn, 4)
    if len(status) == 4:
        return struct.unpack("!i", status)[0]
    if received:
        return 128 + received[-1]
    print(
        f"calbench {argv[0]}: error: its warm process (pid {pid}) ended without an exit status "
        "(killed, e.g. out of memory?); rerun with CALBENCH_WARM=0 to run it in its own process",
        file=sys.stderr,
    )
    return 1


def _read(conn: socket.socket, n: int) -> bytes:
    """Up to ``n`` bytes; fewer only when the other end closed."""
    out = b""
    while len(out) < n:
        try:
            chunk = conn.recv(n - len(out))
        except InterruptedError:
            continue
        if not chunk:
            break
        out += chunk
    return out


def _start(where: str) -> None:
    """Start a warm process for ``where`` in the background (its own session, output to
    ``warm.log``); a second one started at the same time exits at once (lock file)."""
    import subprocess

    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
        st = os.stat(where)
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            return
        env = dict(os.environ)
        env.update({v: "1" for v in THREAD_VARIABLES})
        with open(os.path.join(where, _LOG), "ab") as log:
            subprocess.Popen(
                [sys.executable, "-m", "calbench.cli._warm", "serve", where],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                close_fds=True,
                start_new_session=True,
            )
    except OSError:
        pass


def stop(where: str) -> bool:
    """Ask the warm process of ``where`` to exit; True when one was running."""
    conn = _connect(os.path.abspath(where))
    if conn is None:
        return False
    with conn:
        head = json.dumps({"stop": True}).encode()
        try:
            conn.sendall(struct.pack("!I", len(head)) + head)
            _read(conn, 1)
        except OSError:
            return False
    return True


# --------------------------------------------------------------------------------------------
# the warm process
# --------------------------------------------------------------------------------------------
def preload() -> None:
    """Import what the verbs of :data:`WARM_VERBS` use, without running anything."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.figure  # noqa: F401
    import numpy  # noqa: F401
    import scipy.special  # noqa: F401
    import sklearn.isotonic  # noqa: F401
    import torch  # noqa: F401
    import torch.optim  # noqa: F401

    import calbench.calibrators  # noqa: F401
    import calbench.cli
    import calbench.evaluation  # noqa: F401
    import calbench.logits_sources  # noqa: F401
    import calbench.metrics  # noqa: F401
    import calbench.plots  # noqa: F401
    import calbench.training  # noqa: F401

    calbench.cli.build_parser()  # imports every verb module


def serve(where: str, idle: float = IDLE_SECONDS) -> int:
    """Listen on ``<where>/warm.sock`` until :data:`IDLE_SECONDS` pass without a request."""
    import fcntl

    os.makedirs(where, mode=0o700, exist_ok=True)
    os.chdir(where)
    lock = open(_LOCK, "w")  # noqa: SIM115 (held for the process's life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another warm process serves this folder
    preload()
    mine = fingerprint()
    try:
        os.unlink(_SOCK)  # a dead warm process's socket (we hold the lock)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(_SOCK)
    listener.listen(64)
    listener.settimeout(idle)
    inode = os.stat(_SOCK).st_ino
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    print(f"warm process {os.getpid()} serving {where}", flush=True)
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                break
            except InterruptedError:
                continue
            try:
                still_ours = os.stat(_SOCK).st_ino == inode
            except OSError:
                still_ours = False
            if not _handle(conn, mine, (listener, lock)) or not still_ours:
                break
    finally:
        try:
            if os.stat(_SOCK).st_ino == inode:
                os.unlink(_SOCK)
        except OSError:
            pass
    print(f"warm process {os.getpid()} exits", flush=True)
    return 0


def _handle(conn: socket.socket, mine: str, inherited) -> bool:
    """Serve one request; False when the warm process should exit (stop, or other code).

    ``inherited``: the listening socket and the lock file, which a child closes (a long job
    must not keep the lock or the socket of a warm process that has exited)."""
    fds: list[int] = []
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        uid = struct.unpack("3i", creds)[1]
        head_len, fds = _recv_head(conn)
        request = json.loads(_read(conn, head_len)) if head_len else {}
        if uid != os.getuid() or request.get("stop"):
            conn.sendall(b"-")
            return uid != os.getuid()  # a stranger is refused; a stop request ends the loop
        if request.get("fingerprint") != mine or len(fds) != 3:
            conn.sendall(b"-")  # other code: the caller runs the verb itself
            return False
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child; covered through the tests' callers)
            for obj in inherited:
                obj.close()
            _child(conn, request, fds)
        print(f"job {pid}: calbench {request['argv'][0]}", flush=True)
        return True
    except (OSError, ValueError):
        return True
    finally:
        for fd in fds:
            os.close(fd)
        conn.close()


def _recv_head(conn: socket.socket) -> tuple[int, list[int]]:
    fds = array.array("i")
    msg, ancdata, _flags, _addr = conn.recvmsg(4, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    if len(msg) < 4:
        msg += _read(conn, 4 - len(msg))
    return struct.unpack("!I", msg)[0], list(fds)


def _child(conn: socket.socket, request: dict, fds: list[int]) -> None:  # pragma: no cover
    """The forked child: become the caller's job, run it, send the status, exit."""
    import threading

    rc = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.chdir(request["cwd"])
        os.umask(int(request["umask"]))
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["calbench", *request["argv"]]
        conn.sendall(b"+" + struct.pack("!i", os.getpid()))

        def watch():  # the caller died: so does its job
            _read(conn, 1)
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=watch, daemon=True).start()
        from calbench.cli import run_verb

        rc = run_verb(request["argv"])
    except KeyboardInterrupt:  # SIGINT relayed by the caller: the status of a new process
        rc = 128 + signal.SIGINT
    except SystemExit as exc:  # argparse's --help and usage errors
        code = exc.code
        rc = code if isinstance(code, int) else (0 if code is None else 1)
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
        rc = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        try:
            conn.sendall(struct.pack("!i", int(rc)))
        except Exception:
            pass
        os._exit(int(rc) & 0xFF)


def main(argv: list[str] | None = None) -> int:
    """``python -m calbench.cli._warm serve|stop <folder>``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ("serve", "stop"):
        print("usage: python -m calbench.cli._warm serve|stop <folder>", file=sys.stderr)
        return 2
    if args[0] == "stop":
        stop(args[1])
        return 0
    try:
        return serve(os.path.abspath(args[1]))
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.ENAMETOOLONG):
            return 0
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
