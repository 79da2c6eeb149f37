"""Checks of a workflow configuration that its JSON schema cannot make, run when the workflow
starts (before any job): every name the config uses must exist in the library.

* calibrators: each entry's method is registered (:data:`calbench.calibrators.REGISTRY`) and
  its ``params`` construct it (unknown keys name the accepted ones; bad values fail as they
  would in ``fit-calibrator``);
* metrics: every metric named anywhere (evaluation, compare, report, shift) is in
  :data:`calbench.metrics.METRICS`, the one registry of metric facts; the compared metrics
  are verdict-eligible (``Metric.verdicts``: :func:`calbench.comparisons.check_verdict_metrics`
  names the unbiased metric to use instead of a plug-in one);
* models trained by the workflow: the ``training`` block parses
  (:func:`calbench.training.parse_training`: method, options), the loss and the secondary
  loss are registered (:data:`calbench.losses.LOSSES`) and ``arch`` is in the dataset's zoo;
  published checkpoints' ``arch`` is a package architecture.

Loss and architecture names are read from the source with :mod:`ast` (the modules import
torch, seconds at every workflow start); ``tests/test_config_check.py`` checks that these
names equal the registries. :func:`check_config` returns one problem string per fault, each
naming the config key.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

from calbench.calibrators import REGISTRY, get_calibrator
from calbench.comparisons import check_verdict_metrics
from calbench.logits_sources import check_entry as check_logits_entry
from calbench.logits_sources import is_presplit
from calbench.metrics import METRICS
from calbench.models import ZOOS
from calbench.shift.corruptions import CORRUPTIONS
from calbench.shift.datasets import PUBLISHED_CORRUPTIONS
from calbench.training import parse_training

ROOT = Path(__file__).resolve().parent


def _dict_keys(path: Path, name: str) -> list[str]:
    """String keys of the literal dict assigned to ``name`` at module level of ``path``."""
    for node in ast.parse(path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and isinstance(
            node.value, ast.Dict
        ):
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
    raise RuntimeError(f"{path} assigns no literal dict {name}")


def loss_names() -> list[str]:
    """Names of :data:`calbench.losses.LOSSES` (the ``name`` of each class listed there)."""
    init = ROOT / "losses" / "__init__.py"
    listed: list[str] = []
    for node in ast.walk(ast.parse(init.read_text())):
        if isinstance(node, ast.DictComp) and isinstance(node.generators[0].iter, ast.Tuple):
            listed = [e.id for e in node.generators[0].iter.elts if isinstance(e, ast.Name)]
    names = {}
    for path in sorted((ROOT / "losses").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if (
                        isinstance(stmt, ast.Assign | ast.AnnAssign)
                        and isinstance(getattr(stmt, "value", None), ast.Constant)
                        and any(
                            isinstance(t, ast.Name) and t.id == "name"
                            for t in (
                                stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                            )
                        )
                    ):
                        names[node.name] = stmt.value.value
    return sorted(names[c] for c in listed if c in names)


def zoo_architectures(dataset: str) -> list[str] | None:
    """``arch`` names of the workflow's own zoo for ``dataset`` (``None``: no zoo)."""
    if dataset not in ZOOS:
        return None
    rel = ZOOS[dataset].removeprefix("calbench.").replace(".", "/")
    return _dict_keys(ROOT / f"{rel}.py", "ARCHITECTURES")


def package_architectures() -> list[str]:
    """``arch`` names of published checkpoints: ``huyvnphan_<name>`` and ``focal_<name>``."""
    out = [f"huyvnphan_{a}" for a in _dict_keys(ROOT / "models/cifar/__init__.py", "ARCHITECTURES")]
    out += [f"focal_{a}" for a in _dict_keys(ROOT / "models/focal/__init__.py", "ARCHITECTURES")]
    return out


def _calibrator_problems(config: Mapping) -> list[str]:
    problems = []
    for key, entry in (config.get("calibrators") or {}).items():
        entry = entry or {}
        method = entry.get("method", key)
        where = f"calibrators.{key}" + (".method" if "method" in entry else "")
        if method not in REGISTRY:
            problems.append(
                f"{where}: unknown calibrator {method!r}; choose one of {sorted(REGISTRY)}"
            )
            continue
        try:
            get_calibrator(method, **(entry.get("params") or {}))
        except (ValueError, TypeError) as exc:
            problems.append(f"calibrators.{key}.params: {exc}")
    return problems


def _metric_problems(config: Mapping) -> list[str]:
    problems = []
    lists = [("evaluation.metrics", (config.get("evaluation") or {}).get("metrics") or [])]
    for m in (config.get("evaluation") or {}).get("ci_metrics") or []:
        lists.append(("evaluation.ci_metrics", [m]))
    lists.append(("compare.metrics", (config.get("compare") or {}).get("metrics") or []))
    report = config.get("report") or {}
    lists.append(("report.table_metrics", report.get("table_metrics") or []))
    lists.append(("report.losses_metrics", report.get("losses_metrics") or []))
    shift = config.get("shift") or {}
    lists.append(("shift.compare_metrics", shift.get("compare_metrics") or []))
    for where, names in lists:
        for m in names:
            if m not in METRICS:
                problems.append(f"{where}: unknown metric {m!r}; choose one of {sorted(METRICS)}")
    return problems


def _model_problems(config: Mapping) -> list[str]:
    problems = []
    losses = loss_names()
    package = None
    for name, entry in (config.get("models") or {}).items():
        source = entry.get("source")
        arch = entry.get("arch")
        if source == "train":
            zoo = zoo_architectures(entry.get("dataset", ""))
            if zoo is None:
                problems.append(
                    f"models.{name}.dataset: no architecture zoo to train on {entry.get('dataset')!r}"
                )
            elif arch not in zoo:
                problems.append(
                    f"models.{name}.arch: unknown architecture {arch!r}; choose one of {zoo}"
                )
            training = entry.get("training") or {}
            try:
                parse_training(training)
            except ValueError as exc:
                problems.append(f"models.{name}.training: {exc}")
            loss = training.get("loss", "ce")
            if loss not in losses:
                problems.append(
                    f"models.{name}.training.loss: unknown loss {loss!r}; choose one of {losses}"
                )
            secondary = training.get("secondary") or {}
            if isinstance(secondary, Mapping) and secondary.get("name") not in (None, *losses):
                problems.append(
                    f"models.{name}.training.secondary.name: unknown loss "
                    f"{secondary.get('name')!r}; choose one of {losses}"
                )
        elif source == "checkpoint" and arch is not None:
            package = package if package is not None else package_architectures()
            if arch not in package:
                problems.append(
                    f"models.{name}.arch: unknown architecture {arch!r}; choose one of {package}"
                )
    return problems


def check_config(config: Mapping) -> list[str]:
    """Every fault of ``config`` (a parsed workflow configuration, already valid against its
    JSON schema) as ``"key: problem; fix"``: names the library must know, then references
    between sections (:func:`_reference_problems`)."""
    return (
        _calibrator_problems(config)
        + _metric_problems(config)
        + _model_problems(config)
        + _reference_problems(config)
    )


def validate(config: Mapping) -> None:
    """The workflow's one semantic check, run once before any job (after the schema): raise
    one ``ValueError`` naming every fault of :func:`check_config`."""
    problems = check_config(config)
    if problems:
        raise ValueError("invalid config: " + "; ".join(problems))


def schema_error_line(
    exc: BaseException, schema: str = "workflow/schemas/config.schema.yaml"
) -> str:
    """One line for a config that fails its JSON schema: the failing key's path and the
    validator's message (not the schema dump ``str(ValidationError)`` carries).

    ``exc`` is the ``jsonschema.ValidationError`` or an exception raised while handling one
    (Snakemake's ``WorkflowError("Error validating config file.", e)``).
    """
    err = exc
    while err is not None and not hasattr(err, "absolute_path"):
        err = err.__cause__ or err.__context__
    if err is None:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    path = ".".join(str(p) for p in err.absolute_path) or "(top level)"
    message = " ".join(str(err.message).split())
    return f"invalid config at {path}: {message}; fix the key or its value (schema: {schema})"


def _reference_problems(config: Mapping) -> list[str]:
    """References between config sections that the schema cannot express: a model's dataset, the
    metrics the report and comparisons name, the baselines, the Guo / Kull and shift sections."""
    problems = []
    models, calibrators = config["models"], config["calibrators"]
    for m, v in models.items():
        if v["dataset"] not in config["datasets"]:
            problems.append(f"models.{m}.dataset: {v['dataset']!r} is not a key of datasets")
        if v["source"] == "logits":
            try:
                check_logits_entry(m, v)
            except ValueError as exc:
                problems.append(f"models.{m}.logits: {exc}")
            else:
                if m == "split" and is_presplit(v):
                    problems.append(
                        "models.split: a model with its own split cannot be named split"
                    )
    ev = config["evaluation"]
    evaluated = set(ev["metrics"])
    named = [(f"report.{k}", config["report"][k]) for k in ("table_metrics", "losses_metrics")]
    named += [("compare.metrics", config["compare"]["metrics"])]
    named += [("evaluation.ci_metrics", ev.get("ci_metrics") or [])]
    # (names the library does not know are reported by _metric_problems)
    for key, metrics in named:
        problems += [
            f"{key}: {x!r} is not in evaluation.metrics"
            for x in metrics
            if x not in evaluated and x in METRICS
        ]
    for half in ev.get("ci_halves") or []:
        if half not in ev["halves"]:
            problems.append(f"evaluation.ci_halves: {half!r} is not in evaluation.halves")
    if "test" not in ev["halves"]:
        problems.append("evaluation.halves must include test (the tables report the test half)")
    for base in config["compare"]["baselines"]:
        if base not in calibrators:
            problems.append(f"compare.baselines: {base!r} is not a key of calibrators")
    for c in config["compare"].get("select_exclude") or []:
        if c not in calibrators:
            problems.append(f"compare.select_exclude: {c!r} is not a key of calibrators")
    for m in config["compare"]["metrics"]:
        if m in METRICS:
            try:
                check_verdict_metrics([m], "compare.metrics")
            except ValueError as exc:
                problems.append(str(exc))
    within = ev.get("calibrated_within", 0.01)
    if isinstance(within, bool) or not isinstance(within, int | float) or not 0 < within < 1:
        problems.append(
            f"evaluation.calibrated_within: must be a calibration error in (0, 1) (a fraction, "
            f"e.g. 0.01 = 1 point), got {within!r}"
        )
    g = config["report"].get("guo_kull") or {}
    if g.get("summary_model") and g["summary_model"] not in models:
        problems.append(
            f"report.guo_kull.summary_model: {g['summary_model']!r} is not a key of models"
        )
    for c in [*(g.get("summary_calibrators") or []), *(g.get("expected_to_differ") or [])]:
        if c not in calibrators:
            problems.append(f"report.guo_kull: calibrator {c!r} is not a key of calibrators")
    for q, metric in (g.get("metric_map") or {}).items():
        if metric not in evaluated:
            problems.append(
                f"report.guo_kull.metric_map.{q}: {metric!r} is not in evaluation.metrics"
            )
    if g.get("curve") and not g["curve"]["start"] < g["curve"]["stop"]:
        problems.append("report.guo_kull.curve: start must be below stop")
    return problems + _shift_problems(config)


def _shift_problems(config: Mapping) -> list[str]:
    cfg = config.get("shift")
    if not cfg:
        return []
    problems = []
    for m in cfg.get("models") or []:
        if m not in config["models"]:
            problems.append(f"shift.models: {m!r} is not a key of models")
        elif config["models"][m]["source"] == "logits":
            problems.append(f"shift.models: {m!r} has source logits (no images to corrupt)")
    known = CORRUPTIONS if cfg.get("source", "generate") == "generate" else PUBLISHED_CORRUPTIONS
    problems += [
        f"shift.corruptions: {c!r} is not one of {sorted(known)}"
        for c in cfg["corruptions"]
        if c not in known
    ]
    for metric in ("accuracy", "ece", "nll"):
        if metric not in cfg.get("metrics", ["accuracy", "ece", "nll"]):
            problems.append(f"shift.metrics must include {metric} (the report's box plots)")
    if cfg.get("compare_metrics", ["ece", "nll"]):
        for c in ("ts", "uncalibrated"):
            if c not in config["calibrators"]:
                problems.append(f"shift.compare_metrics needs calibrator {c!r} in calibrators")
    return problems
