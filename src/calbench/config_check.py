"""Checks of a workflow configuration that its JSON schema cannot make, run when the workflow
starts (before any job): every name the config uses must exist in the library.

* calibrators: each entry's method is registered (:data:`calbench.calibrators.REGISTRY`; the
  plug-ins the config names are loaded here, explicitly, :func:`calbench.plugins.find_calibrator`) and
  its ``params`` construct it (unknown keys name the accepted ones; bad values fail as they
  would in ``fit-calibrator``);
* metrics: every metric named anywhere (evaluation, compare, report, shift) is in
  :data:`calbench.metrics.METRICS`, the one registry of metric facts; the compared metrics
  are verdict-eligible (``Metric.verdicts``: :func:`calbench.stats.comparisons.check_verdict_metrics`
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
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from calbench._checks import MAX_BINS, MAX_TEXT, check_text
from calbench._paths import confined
from calbench._yaml import load_yaml_file
from calbench.calibrators import get_calibrator
from calbench.display import model_label
from calbench.logits_sources import check_entry as check_logits_entry
from calbench.logits_sources import is_presplit
from calbench.metrics import METRICS
from calbench.models import ZOOS
from calbench.plugins import calibrator_problem, metric_problem
from calbench.shift.corruptions import CORRUPTIONS
from calbench.shift.datasets import PUBLISHED_CORRUPTIONS
from calbench.stats.comparisons import check_verdict_metrics
from calbench.steps import MAX_RESAMPLES
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
    """Names of :data:`calbench.losses.registry.LOSSES` (the ``name`` of each class listed there)."""
    init = ROOT / "losses" / "registry.py"
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
        why = calibrator_problem(method)  # a built-in, or a plug-in: loaded here (calbench.plugins)
        if key == "ts" and method != "ts" and not why:  # the report's temperature scaling
            why = (
                f"the key 'ts' is temperature scaling in the report (fitted temperatures, "
                f"comparisons with TS) but names method {method!r}; name the entry after its "
                f"method ({method}: {{method: {method}}}) or use method ts"
            )
        if why:
            problems.append(f"{where}: {why}")
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
            why = metric_problem(m)  # a plug-in the config names is loaded here
            if why:
                problems.append(f"{where}: {why}")
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


def check_config_files(paths: Sequence[str | os.PathLike]) -> None:
    """Parse each config file with calbench's YAML loader (:mod:`calbench._yaml`: duplicate
    keys, YAML 1.1 booleans as keys, alias bombs, each a one-line ``ValueError`` naming the file
    and line). Snakemake reads ``--configfile`` itself with PyYAML's ``safe_load``; the
    Snakefile calls this before anything walks the config."""
    cwd = Path.cwd()
    for path in paths:
        p = Path(path).absolute()
        load_yaml_file(p.relative_to(cwd) if p.is_relative_to(cwd) else p)


def strict_type_problems(config: Mapping, schema: Mapping) -> list[str]:
    """Values the JSON schema lets through but no step can use, as ``"key: problem; fix"``:
    jsonschema counts ``20.0`` as an ``integer`` and ``.nan`` / ``.inf`` as a ``number`` (NaN
    passes every bound, since every comparison with it is false). Here an integer is an int and
    a number is finite."""
    from jsonschema import Draft202012Validator, validators  # lazy: only with a schema

    checker = Draft202012Validator.TYPE_CHECKER.redefine_many(
        {
            "integer": lambda _, x: isinstance(x, int) and not isinstance(x, bool),
            "number": lambda _, x: (
                isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            ),
        }
    )
    strict = validators.extend(Draft202012Validator, type_checker=checker)(schema)
    problems = []
    for err in strict.iter_errors(config):
        x = err.instance
        if err.validator != "type" or not isinstance(x, float):
            continue  # the schema check proper reports the rest
        key = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        if not math.isfinite(x):
            problems.append(f"{key}: {x} is not a finite number; write a number")
        elif x.is_integer():
            problems.append(
                f"{key}: {x!r} is not a whole number (YAML reads it as a float); write {int(x)}"
            )
        else:
            problems.append(f"{key}: {x!r} is not a whole number; write an integer")
    return problems


#: Upper bounds of sizes in the config: the bounds the verbs apply to their flags, named here
#: by config key so that a config fails before any job runs.
BOUNDS = {
    ("evaluation", "n_bootstrap"): MAX_RESAMPLES,
    ("compare", "n_bootstrap"): MAX_RESAMPLES,
    ("shift", "n_bootstrap"): MAX_RESAMPLES,
    ("plots", "n_bins"): MAX_BINS,
}


def _bound_problems(config: Mapping) -> list[str]:
    problems = []
    for (section, key), high in BOUNDS.items():
        value = (config.get(section) or {}).get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > high:
            problems.append(f"{section}.{key}: {value} is too large; use at most {high:,}")
    return problems


def _display_texts(config: Mapping):
    """``(key, text)`` of every label the tables, diagrams and report print."""
    study = config.get("study") or {}
    if isinstance(study.get("title"), str):
        yield "study.title", study["title"]
    for section in ("datasets", "calibrators"):
        for name, entry in (config.get(section) or {}).items():
            if isinstance(entry, Mapping) and isinstance(entry.get("display"), str):
                yield f"{section}.{name}.display", entry["display"]
    for name, entry in (config.get("models") or {}).items():
        display = entry.get("display") if isinstance(entry, Mapping) else None
        for field in ("name", "loss"):
            if isinstance(display, Mapping) and isinstance(display.get(field), str):
                yield f"models.{name}.display.{field}", display[field]


def _display_problems(config: Mapping) -> list[str]:
    problems = []
    for key, text in _display_texts(config):
        if "$" in text:
            problems.append(
                f"{key}: {text!r} holds '$', which the diagrams read as mathematics "
                "(matplotlib mathtext); write the label without '$'"
            )
        elif any(ord(c) < 32 or ord(c) == 127 for c in text):
            problems.append(
                f"{key}: {text!r} holds a line break or control character; write one line"
            )
        elif key != "study.title":  # what the calibrate and aggregate steps refuse of a name
            try:
                check_text(text, f"{key}:", f"write a plain label of at most {MAX_TEXT} characters")
            except ValueError as exc:
                problems.append(str(exc))
    return problems + _same_label_problems(config)


def _same_label_problems(config: Mapping) -> list[str]:
    """Two datasets, two calibrators or two models of one dataset displayed alike (a model as
    :func:`calbench.display.model_label`): the tables would have two identical rows or
    columns, which the aggregate step refuses (``check_display_names``), after every fit."""
    problems = []
    for section in ("datasets", "calibrators", "models"):
        seen: dict[tuple, str] = {}
        for key, entry in (config.get(section) or {}).items():
            entry = entry if isinstance(entry, Mapping) else {}
            display = entry.get("display")
            if section == "models":
                label = model_label(key, display if isinstance(display, Mapping) else None)
                group = entry.get("dataset")
            else:
                if isinstance(display, Mapping):
                    display = display.get("name")
                label, group = str(key if display is None else display), None
            other = seen.setdefault((group, label), key)
            if other != key:
                problems.append(
                    f"{section}.{other} and {section}.{key} are both displayed as {label!r}, "
                    "which gives two identical rows or columns; give each its own display name"
                )
    return problems


def _fold_problems(config: Mapping) -> list[str]:
    """``compare.select_folds`` against the validation halves whose size the config gives: a
    dataset's ``limit`` of ``n`` samples gives the study split's ``n // 2``
    (:func:`calbench.split.study_split`); the cross-fitted selection needs two a fold
    (:func:`calbench.selection.check_folds`). Other sizes (a whole dataset, a file's own split)
    are checked by the calibrate step when it has read its logits, before any fit."""
    k = (config.get("compare") or {}).get("select_folds", 5)
    if isinstance(k, bool) or not isinstance(k, int):
        return []
    studied = {
        v.get("dataset")
        for m, v in (config.get("models") or {}).items()
        if isinstance(v, Mapping) and not (v.get("source") == "logits" and is_presplit(v))
    }
    problems = []
    for d, entry in (config.get("datasets") or {}).items():
        limit = (entry or {}).get("limit") if isinstance(entry, Mapping) else None
        if d in studied and isinstance(limit, int) and not isinstance(limit, bool):
            if limit // 2 < 2 * k:
                problems.append(
                    f"compare.select_folds: {k} folds need at least {2 * k} validation samples, "
                    f"but datasets.{d}.limit: {limit} gives a validation half of {limit // 2}; "
                    "lower compare.select_folds or raise the limit"
                )
    return problems


def _file_name_problems(config: Mapping) -> list[str]:
    """File names the config gives for downloads and archives: plain names confined to their
    folder (:func:`calbench._paths.confined`), never ``../x`` or ``/abs``."""
    names = []
    for d, entry in (config.get("datasets") or {}).items():
        for field in ("archive", "devkit"):
            names.append((f"datasets.{d}.{field}", (entry or {}).get(field)))
    for m, entry in (config.get("models") or {}).items():
        ckpt = (entry or {}).get("checkpoint") or {}
        names.append((f"models.{m}.checkpoint.filename", ckpt.get("filename")))
        names.append((f"models.{m}.timm.file", ((entry or {}).get("timm") or {}).get("file")))
    for d, entry in ((config.get("shift") or {}).get("archives") or {}).items():
        names.append((f"shift.archives.{d}.archive", (entry or {}).get("archive")))
    problems = []
    for key, name in names:
        if name is not None:
            try:
                confined("resources", name, key, plain=True)
            except ValueError as exc:
                problems.append(str(exc))
    for m, entry in (config.get("models") or {}).items():
        member = ((entry or {}).get("checkpoint") or {}).get("archive_member")
        if member is not None:
            try:
                confined("archive", member, f"models.{m}.checkpoint.archive_member")
            except ValueError as exc:
                problems.append(str(exc))
    return problems


def check_config(config: Mapping, schema: Mapping | None = None) -> list[str]:
    """Every fault of ``config`` (a parsed workflow configuration, already valid against its
    JSON schema) as ``"key: problem; fix"``: with ``schema``, whole numbers and finite numbers
    (:func:`strict_type_problems`); sizes within the verbs' bounds (:data:`BOUNDS`), labels the
    diagrams can draw; names the library must know, then references between sections
    (:func:`_reference_problems`)."""
    return (
        (strict_type_problems(config, schema) if schema is not None else [])
        + _bound_problems(config)
        + _display_problems(config)
        + _fold_problems(config)
        + _file_name_problems(config)
        + _calibrator_problems(config)
        + _metric_problems(config)
        + _model_problems(config)
        + _reference_problems(config)
    )


def validate(config: Mapping, schema: Mapping | str | os.PathLike | None = None) -> None:
    """The workflow's one semantic check, run once before any job (after the schema): raise
    one ``ValueError`` naming every fault of :func:`check_config`; ``schema`` (the schema, or
    its YAML file) adds :func:`strict_type_problems`."""
    if schema is not None and not isinstance(schema, Mapping):
        schema = load_yaml_file(schema)
    problems = check_config(config, schema)
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
    per_calibrator = (config.get("plots") or {}).get("per_calibrator", True)
    if "reliability_by_objective" in (config["report"].get("studies") or []) and not per_calibrator:
        problems.append(
            "report.studies: reliability_by_objective shows each model's uncalibrated diagram, "
            "which plots.per_calibrator: false does not draw; set it true or leave the study out"
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
    if (config.get("evaluation") or {}).get("scheme") == "crossfit":
        problems.append(
            "shift: the shift stage evaluates the saved calibrators on corrupted copies of the "
            "test half, on which evaluation.scheme crossfit fits them (every labelled sample); "
            "use evaluation.scheme: holdout for a shift study"
        )
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
        if metric not in cfg.get("metrics", ["accuracy", "ece", "ece_ub", "nll"]):
            problems.append(f"shift.metrics must include {metric} (the report's box plots)")
    for m in cfg.get("compare_metrics", ["ece_ub", "nll"]):
        if m in METRICS:
            try:
                check_verdict_metrics([m], "shift.compare_metrics")
            except ValueError as exc:
                problems.append(str(exc))
    if cfg.get("compare_metrics", ["ece_ub", "nll"]):
        for c in ("ts", "uncalibrated"):
            if c not in config["calibrators"]:
                problems.append(f"shift.compare_metrics needs calibrator {c!r} in calibrators")
    return problems
