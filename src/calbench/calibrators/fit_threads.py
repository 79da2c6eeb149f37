"""CPU threads and denormal handling of the torch scaling fits (:mod:`calbench.calibrators.scaling`).

A fit's fitted parameters must not depend on how many threads ran it. Measured with torch's
CPU build (OpenMP + MKL): a full ``.sum()`` or ``torch.dot`` of a few hundred thousand float32
values gives other bits on 2 threads than on 1 (the threads' partial sums are added in another
order), and ``torch.optim.LBFGS`` uses such dots on the flat parameter vector in every step
(two-loop recursion, ``y.dot(s)``, ``g.dot(d)``): ``ms_b`` on 25k x 1000 logits fitted other
parameters on 2 threads than on 1. The operations of the cross-entropy data term of the affine
maps, on the other hand (the matrix products ``z @ W`` and ``z^T @ G``, the row-wise
log-softmax, the column sums over samples of the bias and vector gradients), split their work by
output element, each computed whole by one thread, so their results are the same on any number
of threads (tests/calibrators/test_scaling_threads.py; perf/bench_fit_threads.py measures it on
the ImageNet shape). Hence:

* the optimiser and the penalty terms always run on one thread;
* only the data term (forward and backward) of a fit with more than
  :data:`SINGLE_THREAD_MAX_ENTRIES` logit entries runs on several threads
  (:func:`calbench._device.set_fit_threads`, i.e. ``calbench calibrate --threads``, else
  ``torch.get_num_threads()`` on entry), and only for the parameterisations
  in :data:`THREADED_KINDS`: temperature scaling's single gradient is a full sum over N x K
  entries, whose bits depend on the thread count, so ``ts`` stays on one thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

#: CPU fits whose logit array has at most this many entries run on one intra-op thread: an
#: objective evaluation then takes about a millisecond, and splitting it across threads costs
#: more than it saves (up to 20x slower on a loaded machine).
SINGLE_THREAD_MAX_ENTRIES = 1 << 21
#: parameterisations whose data term (forward + backward) is thread-count invariant (module
#: docstring); every gradient entry of ``ts`` is a full sum, so it is not among them
THREADED_KINDS = frozenset({"vs", "vs_b", "ms_b"})


@contextlib.contextmanager
def cpu_fit_settings(n_entries: int, device: str, kind: str = "ts") -> Iterator[int]:
    """One thread and denormals flushed to zero for one CPU fit; yields the thread count of its
    data term (:func:`data_threads`). Both settings are restored afterwards.

    * The fit runs on one thread; its data term on :func:`calbench._device.fit_threads`, else the
      caller's torch thread count, when ``kind`` is in
      :data:`THREADED_KINDS` and the fit has more than :data:`SINGLE_THREAD_MAX_ENTRIES` logit
      entries, else on one thread too (module docstring).
    * Denormal floats are flushed to zero (``torch.set_flush_denormal``). Calibrated logits
      that grow large (Dirichlet's weights reach ~10 on log-probabilities near -15) put many
      softmax outputs in float32's denormal range (1e-45 .. 1e-38), where arithmetic is
      far slower: one Dirichlet objective + gradient on 5,000 x 100 at its fitted parameters
      takes ~100 ms with denormals and ~4 ms flushed (perf/bench_calibrators.py).
      Flushing only replaces values below 1.2e-38 by 0, far below float32's resolution of the
      loss and the gradients (the parameters fitted on the tests' data are identical).
      The setting is per thread: worker threads of a multi-threaded data term keep denormals,
      whose products (below 1e-38) are far below the rounding of the sums they enter.
      On exit it is set back to PyTorch's default (off).

    Off the CPU it does nothing and yields 1.
    """
    if device != "cpu":
        yield 1
        return
    import torch

    from calbench._device import fit_threads

    threads = torch.get_num_threads()
    many = n_entries > SINGLE_THREAD_MAX_ENTRIES and kind in THREADED_KINDS
    if threads > 1:
        torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    try:
        yield (fit_threads() or threads) if many else 1
    finally:
        torch.set_flush_denormal(False)
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
