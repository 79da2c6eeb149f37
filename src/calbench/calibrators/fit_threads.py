"""CPU threads and denormal handling of the torch scaling fits (:mod:`calbench.calibrators.scaling`).

A fit's fitted parameters must not depend on how many threads ran it. Measured with torch's
CPU build (OpenMP + MKL): a full ``.sum()`` or ``torch.dot`` of a few hundred thousand float32
values gives other bits on 2 threads than on 1 (the threads' partial sums are added in another
order), and ``torch.optim.LBFGS`` uses such dots on the flat parameter vector in every step
(two-loop recursion, ``y.dot(s)``, ``g.dot(d)``): ``ms_b`` on 25k x 1000 logits fitted other
parameters on 2 threads than on 1. The operations of the cross-entropy data term of the affine
maps (the matrix products ``z @ W`` and ``z^T @ G``, the row-wise log-softmax, the column sums
over samples of the bias and vector gradients) split their work by output element, each
computed whole by one thread, as long as there are enough classes per thread: with 1,000
classes their results are the same on 1 to 16 threads, and so are they with 300 to 1,500
classes on 2,700 and 25,000 samples and 300 to 1,000 on 60,000; with 200 classes they differ
on 8 threads, with 100 on 4, with 20 on 3 (MKL and ATen then split the sum over samples too).
Hence:

* the optimiser and the penalty terms always run on one thread;
* only the data term (forward and backward) of a fit with more than
  :data:`SINGLE_THREAD_MAX_ENTRIES` logit entries and at least :data:`MIN_THREADED_CLASSES`
  classes runs on several threads, at most :data:`MAX_THREADS`
  (:func:`calbench._device.set_fit_threads`, i.e. ``calbench calibrate --threads``, else
  ``torch.get_num_threads()`` on entry), and only for the parameterisations in
  :data:`THREADED_KINDS`: temperature scaling's single gradient is a full sum over N x K
  entries, whose bits depend on the thread count, so ``ts`` stays on one thread.

tests/calibrators/test_scaling_threads.py checks fits on 1, 2 and 3 threads; perf/
bench_fit_threads.py checks 1, 2, 4 and 8 on 25k x 1000 and times them.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from pathlib import Path

from calbench._device import fit_threads

#: CPU fits whose logit array has at most this many entries run on one intra-op thread: an
#: objective evaluation then takes about a millisecond, and splitting it across threads costs
#: more than it saves (up to 20x slower on a loaded machine).
SINGLE_THREAD_MAX_ENTRIES = 1 << 21
#: parameterisations whose data term (forward + backward) is thread-count invariant (module
#: docstring); every gradient entry of ``ts`` is a full sum, so it is not among them
THREADED_KINDS = frozenset({"vs", "vs_b", "ms_b"})
#: fewest classes, and most threads, with which the data term was measured thread-count
#: invariant (module docstring)
MIN_THREADED_CLASSES = 300
MAX_THREADS = 16


@contextlib.contextmanager
def cpu_fit_settings(
    n_entries: int, device: str, kind: str = "ts", n_classes: int = 0
) -> Iterator[int]:
    """One thread and denormals flushed to zero for one CPU fit; yields the thread count of its
    data term (:func:`data_threads`). Both settings are restored afterwards.

    * The fit runs on one thread; its data term on :func:`calbench._device.fit_threads`, else the
      caller's torch thread count (at most :data:`MAX_THREADS`), when ``kind`` is in
      :data:`THREADED_KINDS` and the fit has more than :data:`SINGLE_THREAD_MAX_ENTRIES` logit
      entries and at least :data:`MIN_THREADED_CLASSES` classes, else on one thread too
      (module docstring).
    * Denormal floats are flushed to zero (``torch.set_flush_denormal``). Calibrated logits
      that grow large (Dirichlet's weights reach ~10 on log-probabilities near -15) put many
      softmax outputs in float32's denormal range (1e-45 .. 1e-38), where arithmetic is
      slower on many CPUs: one Dirichlet objective + gradient on 5,000 x 100 at its fitted
      parameters took ~100 ms with denormals and ~4 ms flushed when this was introduced; on
      the 2-core machine of the latest measurement (5.3% of the outputs denormal) 7.1 and
      7.7 CPU-ms on one thread, 80 and 60 on two (perf/bench_speed.py --only denormal).
      Flushing only replaces values below 1.2e-38 by 0, far below float32's resolution of the
      loss and the gradients (the parameters fitted on the tests' data are identical).
      The setting is per thread, so a multi-threaded data term sets it on its OpenMP worker
      threads too (:func:`_flush_denormal_everywhere`), or runs on one thread where the OpenMP
      runtime cannot be reached: a worker that kept denormals would compute other bits where a
      gradient entry sums only denormal terms (on the tests' sharp logits, with hundreds of
      denormal softmax terms, the bits happen to agree either way; the flush makes it sure).
      On exit it is set back to PyTorch's default (off), on the workers too.

    Off the CPU it does nothing and yields 1.
    """
    if device != "cpu":
        yield 1
        return
    import torch

    threads = torch.get_num_threads()
    data = min(fit_threads() or threads, MAX_THREADS)
    wide = n_entries > SINGLE_THREAD_MAX_ENTRIES and n_classes >= MIN_THREADED_CLASSES
    if not (wide and kind in THREADED_KINDS):
        data = 1
    if threads > 1:
        torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    if data > 1 and not _flush_denormal_everywhere(True, data):
        data = 1
    try:
        yield data
    finally:
        torch.set_flush_denormal(False)
        if data > 1:
            _flush_denormal_everywhere(False, data)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


@contextlib.contextmanager
def data_threads(n: int) -> Iterator[None]:
    """Run the enclosed torch operations on ``n`` intra-op threads (``n == 1``: as they are),
    then go back to one thread."""
    if n == 1:
        yield
        return
    import torch

    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(1)


@functools.cache
def _omp_parallel():
    """``GOMP_parallel`` of the OpenMP runtime torch's intra-op threads come from (libgomp, or an
    Intel or LLVM runtime, which export it too), or ``None`` when torch's parallel backend is
    not OpenMP or its runtime is not found."""
    import ctypes

    import torch
    from threadpoolctl import threadpool_info

    if "parallel backend: OpenMP" not in torch.__config__.parallel_info():
        return None
    libs = [i["filepath"] for i in threadpool_info() if i["user_api"] == "openmp"]
    if len(libs) > 1:  # e.g. scikit-learn's own libgomp beside torch's: take the one in torch
        home = str(Path(torch.__file__).resolve().parent)
        libs = [lib for lib in libs if str(Path(lib).resolve()).startswith(home + os.sep)]
    if len(libs) != 1:  # which runtime torch uses is not known
        return None
    try:
        fn = ctypes.CDLL(libs[0]).GOMP_parallel
    except (OSError, AttributeError):
        return None
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
    return fn


def _flush_denormal_everywhere(flag: bool, n: int) -> bool:
    """``torch.set_flush_denormal(flag)`` on each of the ``n`` threads of an OpenMP team (the
    calling thread and the pool's first ``n - 1`` workers, the threads torch's and MKL's
    parallel regions of up to ``n`` threads run on): one parallel region whose threads each
    call it (ctypes releases the GIL around the region; each thread takes it for the call).
    Returns whether it could."""
    import ctypes

    import torch

    parallel = _omp_parallel()
    if parallel is None:
        return False
    done = []

    def body(_data):
        torch.set_flush_denormal(flag)
        done.append(1)

    callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(body)
    parallel(ctypes.cast(callback, ctypes.c_void_p), None, n, 0)
    return len(done) == n
