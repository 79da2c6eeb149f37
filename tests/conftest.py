"""Test-session settings shared by every test.

Small torch operations are up to 40x faster with one intra-op thread on a loaded 2-core machine,
and workflow tests run several jobs in parallel: use one BLAS/OpenMP thread per process unless
the caller chose otherwise. Set before any test module imports numpy or torch; subprocesses
(snakemake jobs) inherit it.
"""

import os
from pathlib import Path

import pytest

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


#: Fashion-MNIST as Debian's dataset-fashion-mnist package installs it (scripts/setup.sh)
DEBIAN_FMNIST = Path("/usr/share/datasets/fashion-mnist")


@pytest.fixture(scope="session")
def fmnist_root(tmp_path_factory):
    """Fashion-MNIST prepared from the Debian package into a temporary data root (skips the
    test when the package is not installed)."""
    if not (DEBIAN_FMNIST / "t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Debian package dataset-fashion-mnist is not installed")
    from calbench.data import fashion_mnist

    root = tmp_path_factory.mktemp("fm")
    fashion_mnist.prepare(root, mirrors=[DEBIAN_FMNIST], urls=())
    return root


@pytest.fixture(autouse=True)
def _process_settings_restored():
    """A verb run in-process (``calbench.cli.main``) sets this process's device and fit threads
    (calbench._device.use_device / set_fit_threads) as a workflow job's process would; each test
    starts from the defaults again, whatever an earlier test ran."""
    from calbench import _device

    saved = dict(_device._CHOSEN)
    yield
    _device._CHOSEN.clear()
    _device._CHOSEN.update(saved)
