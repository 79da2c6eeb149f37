"""The study specs: the slices of the workflow's configuration the reporting steps read.

Each function takes the configuration (the dict Snakemake loads from ``config.yaml``) and returns
the spec as plain data; the workflow writes it as JSON (``results/specs/``) and the verb reads it
with ``--spec @file`` (cli/report.py describes the fields). Key order follows the configuration:
it is the order of the tables' rows and columns.

* :func:`study_spec`: ``aggregate`` (the tables) and the base of the others.
* :func:`report_spec`: ``render-report`` (adds the calibration-during-training sections).
* :func:`shift_report_spec`: ``shift-report`` (adds the confidence level).
* :func:`replication_spec`: ``replication-tables`` (groups, expected accuracies, tolerances).
* :func:`guo_kull_spec`: ``guo-kull-tables`` (Guo et al. 2017 / Kull et al. 2019 study).
"""

from __future__ import annotations

from collections.abc import Mapping

from calbench.metrics.binning import ECE_BINS
from calbench.report.partitions import scheme_protocol


def _calibrators(config: Mapping) -> dict:
    """Each calibrator's display name and registry method (the report cites the method)."""
    return {
        c: {"display": (v or {}).get("display", c), "method": (v or {}).get("method", c)}
        for c, v in config["calibrators"].items()
    }


def _datasets(config: Mapping) -> dict:
    return {d: {"display": v.get("display", d)} for d, v in config["datasets"].items()}


def study_spec(config: Mapping) -> dict:
    """The slice of the config the tables and the report use."""
    rep = config["report"]
    ev = config["evaluation"]
    ref = rep.get("reference") or None
    return {
        "title": config["study"]["title"],
        "description": config["study"].get("description", ""),
        "protocol": {
            "n_bins": ECE_BINS,
            "plot_bins": config["plots"]["n_bins"],
            "n_bootstrap": ev["n_bootstrap"],
            "level": ev["level"],
            "calibrated_within": ev.get("calibrated_within", 0.01),
            **scheme_protocol(ev),
        },
        "datasets": _datasets(config),
        "models": {
            m: {"dataset": v["dataset"], "display": v.get("display", {})}
            for m, v in config["models"].items()
        },
        "calibrators": _calibrators(config),
        "table_metrics": rep["table_metrics"],
        "losses_metrics": rep["losses_metrics"],
        "reference": None if ref is None else {k: v for k, v in ref.items() if k != "csv"},
    }


def report_spec(config: Mapping, objectives_files: Mapping) -> dict:
    """:func:`study_spec` plus the ``report.studies`` sections and their files
    (``objectives_files``: ``{"ts_files": {model: path}, "histories": ..., "reliability": ...}``,
    the workflow's paths; see :func:`calbench.report.context.study_sections`)."""
    spec = study_spec(config)
    spec["studies"] = list(config["report"].get("studies") or [])
    spec.update(objectives_files)
    return spec


def shift_report_spec(config: Mapping) -> dict:
    """:func:`study_spec` plus the confidence level of the shift section."""
    return {**study_spec(config), "level": config["evaluation"]["level"]}


def replication_spec(config: Mapping) -> dict:
    """Labels, groups, expected accuracies, calibrators and tolerances for
    ``calbench replication-tables`` (:mod:`calbench.reference.ours_vs_published`)."""
    rep = config["report"]
    ref = rep.get("reference") or {}
    return {
        "title": config["study"]["title"],
        "datasets": _datasets(config),
        "models": {
            m: {
                "dataset": v["dataset"],
                "group": v.get("group", 1),
                "display": v.get("display", {}),
                "expected_acc": v.get("expected_acc"),
            }
            for m, v in config["models"].items()
        },
        "calibrators": _calibrators(config),
        "table_metrics": rep["table_metrics"],
        "reference": {k: v for k, v in ref.items() if k in ("units", "tolerances")},
    }


def guo_kull_spec(config: Mapping) -> dict:
    """The slice of the config for ``calbench guo-kull-tables`` (``report.guo_kull``)."""
    g = config["report"].get("guo_kull") or {}
    return {
        "title": config["study"]["title"],
        "description": config["study"].get("description", ""),
        "models": {
            m: {
                "dataset": v["dataset"],
                "num_classes": v.get("num_classes"),
                "display": v.get("display", {}),
            }
            for m, v in config["models"].items()
        },
        "calibrators": _calibrators(config),
        "summary_model": g.get("summary_model"),
        "metric_map": g.get("metric_map") or {},
        "tolerances": g.get("tolerances") or {},
        "expected_to_differ": g.get("expected_to_differ") or [],
        "sources": g.get("sources"),
    }
