"""Test-session settings shared by every test.

Small torch operations are up to 40x faster with one intra-op thread on a loaded 2-core machine,
and workflow tests run several jobs in parallel: use one BLAS/OpenMP thread per process unless
the caller chose otherwise. Set before any test module imports numpy or torch; subprocesses
(snakemake jobs) inherit it.
"""

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
