"""calbench._device: one device resolver and one thread setter for the library and the CLI."""

import json
import subprocess
import sys

import pytest

from calbench import _device as _torch


def test_resolve_device_is_the_one_of_models_and_the_scaling_calibrators():
    from calbench.calibrators import scaling
    from calbench.models import resolve_device

    assert resolve_device is _torch.resolve_device is scaling.resolve_device
    assert _torch.resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="is not a torch device"):
        _torch.resolve_device("gpu0")


def test_set_threads_checks_its_argument():
    _torch.set_threads(None)  # leaves everything as it is
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="--threads must be >= 1"):
            _torch.set_threads(bad)


SCRIPT = """
import json, os, sys
from calbench._device import set_threads
set_threads(int(sys.argv[1]), torch_now=sys.argv[2] == "1")
imported = "torch" in sys.modules
import torch
print(json.dumps([imported, torch.get_num_threads(), os.environ["OMP_NUM_THREADS"]]))
"""


@pytest.mark.parametrize("torch_now", [True, False])
def test_set_threads_limits_torch_now_or_when_it_is_imported(torch_now):
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, "1", "1" if torch_now else "0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    imported, threads, env = json.loads(out)
    assert imported is torch_now and threads == 1 and env == "1"


def test_the_cli_set_threads_delegates_to_the_library():
    from calbench.cli._args import set_threads

    with pytest.raises(ValueError, match="--threads must be >= 1, got 0"):
        set_threads(0)
