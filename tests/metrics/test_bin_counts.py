"""The tables' ECE bin count and the reliability diagrams' bin count are one named constant each
(:data:`calbench.metrics.binning.ECE_BINS`, :data:`calbench.metrics.binning.DIAGRAM_BINS`):
every default and registry entry that stands for them reads the constant, and the study spec
records it without inspecting a signature."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import yaml

import calbench
from calbench import plots
from calbench.metrics import METRICS, adaptive_ece, classwise_ece, debiased_ece, ece, mce
from calbench.metrics.binning import DIAGRAM_BINS, ECE_BINS, reliability_bins
from calbench.report import spec as SP

SRC = Path(calbench.__file__).parent


def _default(fn, name="n_bins"):
    return inspect.signature(fn).parameters[name].default


def test_the_constants_are_the_studys_settings():
    # 15 equal-width bins for the tables (Guo et al. 2017, the coursework), 10 for the diagrams
    assert (ECE_BINS, DIAGRAM_BINS) == (15, 10)


@pytest.mark.parametrize("fn", [ece, mce, adaptive_ece, classwise_ece, debiased_ece])
def test_every_binned_error_defaults_to_the_tables_bins(fn):
    assert _default(fn) == ECE_BINS


@pytest.mark.parametrize("name", ["ece", "mce", "ace", "ece_l2_mass", "debiased_ece"])
def test_the_registry_entries_bin_with_the_tables_bins(name):
    assert METRICS[name].reduce.keywords["n_bins"] == ECE_BINS


@pytest.mark.parametrize(
    "fn",
    [
        reliability_bins,
        plots.reliability_diagram,
        plots.classwise_reliability_diagram,
        plots.reliability_grid,
        plots.reliability_curve,
    ],
)
def test_every_diagram_defaults_to_the_diagrams_bins(fn):
    assert _default(fn) == DIAGRAM_BINS


def test_the_study_spec_records_the_tables_bins():
    assert "inspect" not in SP.__dict__  # read from the constant, not from a signature
    config = yaml.safe_load((SRC.parents[1] / "config" / "test.yaml").read_text())
    config["plots"]["n_bins"] = 7
    protocol = SP.study_spec(config)["protocol"]
    assert (protocol["n_bins"], protocol["plot_bins"]) == (ECE_BINS, 7)


#: where a literal 15 or 10 stood for the tables' or the diagrams' bins
CONCEPT_FILES = ["metrics", "plots", "report", "reference", "synthetic.py"]


def test_no_literal_bin_count_is_left_for_these_concepts():
    pattern = re.compile(r"n_bins(?:: int)? ?= ?(?:15|10)\b")
    found = []
    for name in CONCEPT_FILES:
        paths = [SRC / name] if name.endswith(".py") else sorted((SRC / name).rglob("*.py"))
        for path in paths:
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    found.append(f"{path.relative_to(SRC)}:{i}: {line.strip()}")
    assert not found, "use ECE_BINS / DIAGRAM_BINS:\n" + "\n".join(found)
