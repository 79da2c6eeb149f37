"""Fixtures of the workflow tests."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

#: the workflow's sizing helpers (plain Python: functions and constants only)
SIZING = Path(__file__).resolve().parents[2] / "workflow" / "rules" / "helpers" / "sizing.smk"


@pytest.fixture()
def sizing():
    """workflow/rules/helpers/sizing.smk's names, with ``GPUS`` as rules/common.smk sets it on a
    machine without nvidia-smi."""
    ns: dict = {"GPUS": 0}
    exec(compile(SIZING.read_text(), str(SIZING), "exec"), ns)
    return SimpleNamespace(**ns)
