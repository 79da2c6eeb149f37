"""The calibrate step's spec: the slice of the workflow's configuration ``calbench calibrate`` reads.

One builder for everyone who writes the file: the workflow (``calibrate_spec()`` in
``workflow/rules/helpers/calibrate.smk`` writes it under ``results/specs/``) and the perf
scripts that run the calibrate job as the rule does (``perf/bench_coursework_logits.py``). The
keys are :data:`calbench.evaluation.CALIBRATE_SPEC`'s, which ``calbench calibrate`` checks
(:func:`calbench.evaluation.check_calibrate_spec`); the config is the validated one (the
schema's defaults filled in, as Snakemake's ``validate`` leaves it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from calbench.evaluation import CALIBRATE_SPEC


def calibrate_spec(config: Mapping) -> dict:
    """The calibrate spec of a validated config: every calibrator (registry ``method``, default
    its key; ``params``; ``display`` name, default its key), in config order, and the
    ``evaluation``, ``compare`` and ``plots`` keys of :data:`CALIBRATE_SPEC` (an evaluation key
    the config leaves out is ``None``: the step's default)."""
    ev = config["evaluation"]
    spec: dict = {
        "calibrators": {
            c: {"method": (e or {}).get("method", c), "params": (e or {}).get("params", {}),
                "display": str((e or {}).get("display", c))}
            for c, e in config["calibrators"].items()
        },
        "evaluation": {k: ev.get(k) for k in CALIBRATE_SPEC["evaluation"]},
    }  # fmt: skip
    for section in ("compare", "plots"):
        spec[section] = {k: config[section][k] for k in CALIBRATE_SPEC[section]}
    return spec


def calibrate_spec_text(config: Mapping) -> str:
    """:func:`calibrate_spec` as the text of the spec file (key order kept: the file's digest,
    and so whether the calibrate jobs rerun, depends on it)."""
    return json.dumps(calibrate_spec(config), sort_keys=False)
