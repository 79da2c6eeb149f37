# Helpers shared by the rules: config slices, path functions, library-source inputs.
# Only functions, constants and wildcard constraints live here (no rules).
import importlib.util
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

SLUG = "[a-z0-9][a-z0-9_]*"


wildcard_constraints:
    dataset=SLUG,
    model=SLUG,
    calibrator=r"(?!grid\b)[a-z0-9][a-z0-9_]*",
    corruption=SLUG,


# --- the calbench library sources each rule runs ------------------------------------------
# A rule lists the library files its verb executes as inputs, so that editing one module reruns
# exactly the jobs that run it (and what depends on their outputs). The lists are derived from
# the code (calbench._sources: the verb's handler and the imports it reaches, read with ast),
# never kept by hand; tests/workflow/test_lib_sources.py checks them against what a verb loads.
from calbench._sources import all_verb_sources

LIB_ROOT = Path(importlib.util.find_spec("calbench").submodule_search_locations[0])
# cached in .snakemake/ with the fingerprint (path, mtime, size) of every library file: reading
# the code costs ~0.5 s, which every invocation (a no-op rerun included) would pay
VERB_SOURCES = all_verb_sources(cache=".snakemake/calbench/lib_sources.json")


def lib_sources(verb):
    """The code input of ``calbench <verb>`` (the verb as typed, e.g. ``fit-calibrator``):
    ``results/code/<verb>.sha256``, the SHA-256 of every library file the verb executes
    (``calbench._sources``), rewritten only when one of them changes. One small file per job
    instead of the ~50 library files themselves keeps Snakemake's bookkeeping of ~340 jobs
    short (a no-op run, and every job of a rebuild); an edit still reruns exactly the jobs
    whose verb executes the edited file."""
    if verb not in VERB_SOURCES:
        raise ValueError(f"lib_sources({verb!r}): calbench has no verb {verb!r}; verbs: {sorted(VERB_SOURCES)}")
    return code_file(verb)


CODE_DIR = Path("results/code")


def write_if_changed(path, text):
    """Write ``text`` to ``path`` atomically unless the file already holds it: an unchanged
    file keeps its mtime, so the steps that read it do not rerun."""
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        tmp.replace(path)


def code_file(verb):
    """Write ``results/code/<verb>.sha256`` when its content (the digests of the verb's library
    files, calbench._sources.code_manifest_text) differs from the file's, and return its path."""
    from calbench._sources import code_manifest_text

    path = CODE_DIR / f"{verb}.sha256"
    text = code_manifest_text(VERB_SOURCES[verb])
    write_if_changed(path, text)
    return str(path)


# --- config slices as files -----------------------------------------------------------------
#: Steps that read a slice of the config (or all of it) get it as a JSON file, not as one
#: command-line argument (Linux caps an argument at 128 KiB; a large zoo's config exceeds it).
SPEC_DIR = Path("results/specs")


def spec_file(name, text):
    """Write ``text`` to ``results/specs/<name>-<sha256 prefix>.json`` when the workflow starts
    (once: the name is the content's hash) and return the path, for a rule's input (the verb
    reads ``--spec @<path>``). A changed config slice is a new input file, so the steps reading
    it rerun; a dry run with another config leaves the files of this one untouched."""
    import hashlib

    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = SPEC_DIR / f"{name}-{digest}.json"
    write_if_changed(path, text)
    return str(path)


# --- runtime facts (not configuration) ----------------------------------------------------
# Rules call `calbench` from the Python environment that runs Snakemake: its bin/ goes first on
# PATH, so a job does not start through a version manager's shim (pyenv's costs ~0.15 s a job,
# ~50 CPU-s over the default study's 340 jobs) and cannot pick another environment's calbench.
import os
import sys

_BIN = str(Path(sys.executable).parent)
if (Path(_BIN) / "calbench").is_file() and os.environ.get("PATH", "").split(os.pathsep)[0] != _BIN:
    os.environ.update(PATH=_BIN + os.pathsep + os.environ.get("PATH", ""))


def local_cpus():
    """CPUs this process may run on (the affinity mask: containers and taskset included)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# A local run never starts more jobs than the machine has CPUs: the steps are single-threaded,
# so `--cores 8` on a 2-core machine would only time-share them (measured: training CPU time
# rose from 157 to 252 s). Cluster runs (--jobs, an executor plugin) are not affected.
def is_local_run():
    """True unless jobs go to a cluster (--jobs N, an executor plugin: Snakemake's _nodes)."""
    res = workflow.global_resources
    return "_nodes" not in res or res["_nodes"].value is None


def cap_local_cores():
    from snakemake.resources import Resource

    res = workflow.global_resources
    cores = res["_cores"].value if "_cores" in res else None
    if is_local_run() and isinstance(cores, int) and cores > local_cpus():
        res["_cores"] = Resource("_cores", local_cpus())
        print(
            f"calbench: --cores {cores} capped to the {local_cpus()} CPUs of this machine "
            "(more jobs than CPUs only time-share them)",
            file=sys.stderr,
        )


cap_local_cores()


# Local runs hand the short, numerous verbs (fit, evaluate, compare, grids) to a warm process
# that has torch, matplotlib and calbench imported and forks one child per job
# (calbench.cli._warm): a fit costs ~0.1 s instead of ~1.5 s of imports, with byte-identical
# outputs. Cluster runs start every job cold. CALBENCH_WARM=0 turns it off (e.g. to read each
# job's own CPU time in benchmarks/, which counts only the calling process's tree).
def warm_folder():
    if not is_local_run():
        return None
    from calbench.cli._warm import enable

    return enable(Path(".snakemake", "calbench", "warm").resolve())


WARM = warm_folder()


def stop_warm():
    if WARM is not None:
        from calbench.cli._warm import stop

        stop(WARM)


onsuccess:
    stop_warm()


onerror:
    stop_warm()


# One GPU is requested by train_model / cache_logits when this machine has one; profiles
# (e.g. profiles/slurm) override it with set-resources.
GPUS = 1 if shutil.which("nvidia-smi") else 0


#: The report template, in the workflow's source tree (works with --directory elsewhere).
TEMPLATE = str(Path(workflow.basedir) / "workflow" / "templates" / "report.html.j2")


# --- config slices --------------------------------------------------------------------------
def dataset_cfg(dataset):
    return config["datasets"][dataset]


def model_cfg(model):
    return config["models"][model]


#: Model entry fields that only label or check results (tables, reference join, accuracy
#: check): left out of the spec the download / train / logits rules get, so editing them reruns
#: only the steps that read them.
LABEL_FIELDS = frozenset({"display", "group", "expected_acc", "study_key"})


def model_spec(wildcards):
    """The model's own config entry as JSON (a params value: editing it reruns only this model).

    Label fields (:data:`LABEL_FIELDS`, e.g. ``display``) are left out: renaming reruns aggregate
    and report only.
    """
    entry = {k: v for k, v in model_cfg(wildcards.model).items() if k not in LABEL_FIELDS}
    return json.dumps(entry, sort_keys=True)


def global_mirror_args(wildcards=None):
    """``--mirror DIR`` for every top-level ``mirrors:`` directory (local copies of downloads)."""
    return " ".join(f"--mirror {m}" for m in config.get("mirrors") or [])


def strict_arg():
    """``--strict-checksums`` when config strict_checksums is true (refuse unpinned downloads)."""
    return "--strict-checksums" if config.get("strict_checksums") else ""


def used_datasets():
    """Datasets that at least one model uses, in config order."""
    used = {v["dataset"] for v in config["models"].values()}
    return [d for d in config["datasets"] if d in used]


def models_of(dataset):
    return [m for m, v in config["models"].items() if v["dataset"] == dataset]


def model_paths(pattern):
    """``pattern`` formatted for every configured model (keys: dataset, model)."""
    return [pattern.format(dataset=v["dataset"], model=m) for m, v in config["models"].items()]


def calibrator_method(calibrator):
    """The registry name (``calbench.calibrators.REGISTRY``) of config calibrator ``calibrator``:
    its ``method`` key, else its own name."""
    entry = config["calibrators"][calibrator] or {}
    return entry.get("method", calibrator)


def calibrator_params(wildcards):
    entry = config["calibrators"][wildcards.calibrator] or {}
    return json.dumps(entry.get("params", {}), sort_keys=True)


def data_root(dataset):
    root = dataset_cfg(dataset).get("root")
    return root if root else f"resources/datasets/{dataset}"


def download_args(wildcards):
    d = dataset_cfg(wildcards.dataset)
    args = [f"--dataset {d.get('name', wildcards.dataset)}"]
    args += [f"--mirror {m}" for m in [*d.get("mirrors", []), *(config.get("mirrors") or [])]]
    if not d.get("default_mirrors", True):
        args.append("--no-default-mirrors")
    return " ".join(args)


def limit_arg(wildcards):
    limit = dataset_cfg(wildcards.dataset).get("limit")
    return f"--limit {limit}" if limit else ""


def weights_input(wildcards):
    """What cache_logits loads: our trained model, or a downloaded checkpoint."""
    source = model_cfg(wildcards.model)["source"]
    if source == "train":
        return f"results/models/{wildcards.dataset}/{wildcards.model}/model.pt"
    return f"resources/checkpoints/{wildcards.dataset}/{wildcards.model}/checkpoint.pt"


def split_source(wildcards):
    """The split is a function of N only. It is computed from the logits of one model of the
    dataset that takes the study split, marked ancient: retraining or adding models does not
    rebuild it (and so does not rerun every other model's steps); a change of the dataset entry
    (e.g. limit) does, through params. The model is the one the existing split records it was
    made from (calbench.split.split_made_from) while that model is configured, else the
    dataset's first such model: adding a model in front of the others keeps the split. Every
    step that reads logits with the split checks that they agree (N, sample order)."""
    from calbench.split import split_made_from

    models = [m for m in models_of(wildcards.dataset) if not presplit(m)]
    candidates = [f"results/logits/{wildcards.dataset}/{m}.npz" for m in models]
    recorded = split_made_from(f"results/split/{wildcards.dataset}/split.npz")
    return ancient(recorded if recorded in candidates else candidates[0])


# --- models whose logits come from a file (source: logits; workflow/rules/logits.smk) -------
def presplit(model):
    """True for a ``source: logits`` model whose file carries its own validation/test split
    (``logits.split: file``; Kängsepp's pickles): its steps read
    ``results/split/{dataset}/{model}.npz`` (written by import_logits_presplit) instead of the
    dataset's study split."""
    from calbench.logits_sources import is_presplit

    v = model_cfg(model)
    return v["source"] == "logits" and is_presplit(v)


def split_file(wildcards):
    """The split a model's fit/evaluate/compare/plot steps use (see :func:`presplit`)."""
    if presplit(wildcards.model):
        return f"results/split/{wildcards.dataset}/{wildcards.model}.npz"
    return f"results/split/{wildcards.dataset}/split.npz"


def split_files():
    """Every split file of the configured models, once each (the report's provenance)."""
    files = [
        split_file(SimpleNamespace(dataset=v["dataset"], model=m))
        for m, v in config["models"].items()
    ]
    return list(dict.fromkeys(files))


def manifest_datasets():
    """Datasets a model reads images of (every source but logits), in config order."""
    used = {v["dataset"] for v in config["models"].values() if v["source"] != "logits"}
    return [d for d in config["datasets"] if d in used]


def _names_regex(names):
    """A wildcard constraint matching exactly ``names`` (slugs), or nothing when empty."""
    return "|".join(sorted(names, key=len, reverse=True)) if names else "(?!)"


#: wildcard constraints of import_logits / import_logits_presplit (cache_logits: everything else)
IMPORTED_MODELS = _names_regex(
    [m for m, v in config["models"].items() if v["source"] == "logits" and not presplit(m)]
)
PRESPLIT_MODELS = _names_regex([m for m in config["models"] if presplit(m)])


def dataset_spec(wildcards):
    """The dataset's own config entry (minus its display name) as JSON, for params."""
    entry = {k: v for k, v in dataset_cfg(wildcards.dataset).items() if k != "display"}
    return json.dumps(entry, sort_keys=True)


def calibrator_files(wildcards):
    return [
        f"results/calibrators/{wildcards.dataset}/{wildcards.model}/{c}.json"
        for c in config["calibrators"]
    ]


# --- evaluation / report settings -------------------------------------------------------------
def ev(key):
    return config["evaluation"][key]


def ci_args():
    """``--ci-halves`` / ``--ci-metrics`` of evaluate (config: evaluation.ci_halves/ci_metrics;
    null or absent = intervals for every half / metric evaluated)."""
    args = []
    if config["evaluation"].get("ci_halves"):
        args.append("--ci-halves " + ",".join(config["evaluation"]["ci_halves"]))
    if config["evaluation"].get("ci_metrics"):
        args.append("--ci-metrics " + ",".join(config["evaluation"]["ci_metrics"]))
    return " ".join(args)


from calbench.report import spec as report_specs  # the reporting steps' config slices


def study_spec():
    """The slice of the config the tables and the report use (JSON for ``--spec``;
    calbench.report.spec)."""
    return json.dumps(report_specs.study_spec(config))  # key order = config order = table order


def reference_input():
    ref = config["report"].get("reference")
    return [ref["csv"]] if ref else []


def reference_arg(input):
    return f"--reference {input.reference[0]}" if input.reference else ""


def losses_tables():
    has_losses = any((v.get("display") or {}).get("loss") for v in config["models"].values())
    return config["report"]["losses_metrics"] if has_losses else []


def all_tables():
    files = []
    for metric in config["report"]["table_metrics"]:
        files += [f"results/tables/{metric}.{ext}" for ext in ("html", "md", "csv", "tex")]
    for metric in losses_tables():
        files += [f"results/tables/losses_{metric}.{ext}" for ext in ("html", "md", "csv", "tex")]
    return files


def all_plots():
    files = model_paths("results/plots/{dataset}/{model}/grid.png")
    for c in config["calibrators"]:
        files += model_paths(f"results/plots/{{dataset}}/{{model}}/{c}.png")
    return files


# --- cross-field checks the JSON schema cannot express --------------------------------------
def check_config():
    """Raise one clear error for references between config sections that do not resolve."""
    problems = []
    for m, v in config["models"].items():
        if v["dataset"] not in config["datasets"]:
            problems.append(f"models.{m}.dataset: {v['dataset']!r} is not a key of datasets")
        if v["source"] == "logits":
            from calbench.logits_sources import check_entry as check_logits_entry

            try:
                check_logits_entry(m, v)
            except ValueError as exc:
                problems.append(f"models.{m}.logits: {exc}")
            if m == "split" and presplit(m):
                problems.append("models.split: a model with its own split cannot be named split")
    evaluated = set(ev("metrics"))
    for key in ("table_metrics", "losses_metrics"):
        for metric in config["report"][key]:
            if metric not in evaluated:
                problems.append(f"report.{key}: {metric!r} is not in evaluation.metrics")
    for metric in config["compare"]["metrics"]:
        if metric not in evaluated:
            problems.append(f"compare.metrics: {metric!r} is not in evaluation.metrics")
    for base in config["compare"]["baselines"]:
        if base not in config["calibrators"]:
            problems.append(f"compare.baselines: {base!r} is not a key of calibrators")
    for metric in config["evaluation"].get("ci_metrics") or []:
        if metric not in evaluated:
            problems.append(f"evaluation.ci_metrics: {metric!r} is not in evaluation.metrics")
    for half in config["evaluation"].get("ci_halves") or []:
        if half not in ev("halves"):
            problems.append(f"evaluation.ci_halves: {half!r} is not in evaluation.halves")
    if "test" not in ev("halves"):
        problems.append("evaluation.halves must include test (the tables report the test half)")
    # names the library must know: calibrators and their params, metrics, losses, architectures
    from calbench.config_check import check_config as library_names

    problems += library_names(config)
    if problems:
        raise ValueError("invalid config: " + "; ".join(problems))


check_config()


# --- replicating a published study (workflow/rules/replication.smk) --------------------------
#: Published tables packaged with calbench (calbench.reference.AVAILABLE).
PACKAGED_REFERENCES = "coursework_2021"
REPLICATION_OUTPUTS = [
    "results/replication/replication.html",
    "results/replication/tables.md",
    "results/replication/cells.csv",
    "results/replication/accuracy_check.csv",
]


def replication_spec():
    """JSON slice of the config for `calbench replication-tables` (calbench.report.spec)."""
    return json.dumps(report_specs.replication_spec(config))


def replication_targets():
    """The replication outputs when the config names a reference (else nothing), plus the Guo /
    Kull study's when the config has report.guo_kull."""
    files = REPLICATION_OUTPUTS if config["report"].get("reference") else []
    return files + guo_kull_targets()


# --- the Guo et al. 2017 / Kull et al. 2019 study (report.guo_kull; replication.smk) --------
GUO_KULL_OUTPUTS = [
    "results/guo_kull/guo_kull.html",
    "results/guo_kull/tables.md",
    "results/guo_kull/cells.csv",
    "results/guo_kull/summary.csv",
]
SWEEP_FIGURES = ("reliability.png", "ece_vs_temperature.png")


def guo_kull_cfg():
    return config["report"].get("guo_kull") or {}


def guo_kull_targets():
    return GUO_KULL_OUTPUTS if config["report"].get("guo_kull") else []


def guo_kull_sweeps(names):
    """results/guo_kull/sweep/{dataset}/{model}/<name> of every model, for each of ``names``."""
    return [
        f"results/guo_kull/sweep/{v['dataset']}/{m}/{name}"
        for m, v in config["models"].items()
        for name in names
    ]


def guo_kull_summary_calibrators():
    g = guo_kull_cfg()
    return g.get("summary_calibrators") or [c for c in ("uncalibrated", "ts") if c in config["calibrators"]]


def guo_kull_summary_inputs(wildcards):
    """The summary model's logits, split and calibrator JSONs (empty without summary_model)."""
    m = guo_kull_cfg().get("summary_model")
    if not m:
        return {}
    d = model_cfg(m)["dataset"]
    return {
        "summary_logits": f"results/logits/{d}/{m}.npz",
        "summary_split": split_file(SimpleNamespace(dataset=d, model=m)),
        "summary_calibrators": [
            f"results/calibrators/{d}/{m}/{c}.json" for c in guo_kull_summary_calibrators()
        ],
    }


def guo_kull_summary_args(wildcards, input):
    if not hasattr(input, "summary_logits"):
        return ""
    return (
        f"--summary-logits {input.summary_logits} --summary-split {input.summary_split}"
        " --summary-calibrators " + " ".join(input.summary_calibrators)
    )


def guo_kull_spec():
    """JSON slice of the config for `calbench guo-kull-tables` (calbench.report.spec)."""
    return json.dumps(report_specs.guo_kull_spec(config))


def sweep_args():
    """--temperatures / --curve of temperature-sweep (report.guo_kull)."""
    g = guo_kull_cfg()
    args = []
    if g.get("sweep_temperatures"):
        args.append("--temperatures " + ",".join(str(t) for t in g["sweep_temperatures"]))
    if g.get("curve"):
        c = g["curve"]
        args.append(f"--curve {c['start']},{c['stop']},{c['num']}")
    return " ".join(args)


def sweep_calibrator(wildcards):
    """The fitted temperature-scaling JSON the ECE-vs-T curve marks (when ts is configured)."""
    if "ts" not in config["calibrators"] or calibrator_method("ts") != "ts":
        return []
    return [f"results/calibrators/{wildcards.dataset}/{wildcards.model}/ts.json"]


def check_guo_kull():
    """Cross-field checks of report.guo_kull (one error naming every problem)."""
    g = config["report"].get("guo_kull")
    if not g:
        return
    problems = []
    m = g.get("summary_model")
    if m and m not in config["models"]:
        problems.append(f"report.guo_kull.summary_model: {m!r} is not a key of models")
    for c in [*(g.get("summary_calibrators") or []), *(g.get("expected_to_differ") or [])]:
        if c not in config["calibrators"]:
            problems.append(f"report.guo_kull: calibrator {c!r} is not a key of calibrators")
    for q, metric in (g.get("metric_map") or {}).items():
        if metric not in ev("metrics"):
            problems.append(f"report.guo_kull.metric_map.{q}: {metric!r} is not in evaluation.metrics")
    c = g.get("curve")
    if c and not c["start"] < c["stop"]:
        problems.append("report.guo_kull.curve: start must be below stop")
    if problems:
        raise ValueError("invalid config: " + "; ".join(problems))


check_guo_kull()


# --- calibration-during-training report sections (workflow/rules/report.smk) --------------
def objectives_files():
    """Files of the calibration-during-training sections (report.studies, docs/objectives.md):
    ``{"ts_files": {model: ts JSON}, "histories": {model: history CSV}, "reliability": {model:
    uncalibrated reliability PNG}}``; empty when report.studies is empty."""
    if not config["report"].get("studies"):
        return {}
    models = config["models"]
    out = {"ts_files": {}, "histories": {}, "reliability": {}}
    for m, v in models.items():
        d = v["dataset"]
        if "ts" in config["calibrators"]:
            out["ts_files"][m] = f"results/calibrators/{d}/{m}/ts.json"
        if v["source"] == "train":
            out["histories"][m] = f"results/models/{d}/{m}/history.csv"
        if "uncalibrated" in config["calibrators"]:
            out["reliability"][m] = f"results/plots/{d}/{m}/uncalibrated.png"
    return out


def objectives_inputs():
    return [p for files in objectives_files().values() for p in files.values()]


def report_spec():
    """study_spec() plus the report.studies sections and their files (render_report only)."""
    return json.dumps(report_specs.report_spec(config, objectives_files()))


# --- dataset shift (workflow/rules/shift.smk, docs/workflow.md "Dataset shift") ------------
def shift_cfg():
    return config.get("shift") or None


def shift_models():
    """Models of the shift study (shift.models, default every model that reads images)."""
    cfg = shift_cfg()
    if not cfg:
        return []
    wanted = cfg.get("models") or [m for m, v in config["models"].items()]
    return [m for m in wanted if config["models"][m]["source"] != "logits"]


def shift_datasets():
    used = {model_cfg(m)["dataset"] for m in shift_models()}
    return [d for d in config["datasets"] if d in used]


def shift_corrupted(dataset):
    return [f"resources/corrupted/{dataset}/{c}.npy" for c in shift_cfg()["corruptions"]]


def shift_model_paths(pattern):
    return [pattern.format(dataset=model_cfg(m)["dataset"], model=m) for m in shift_models()]


def shift_targets():
    if not shift_models():
        return []
    return ["results/shift/section.html", "results/shift/mean_ece.csv"]


def shift_sections():
    """The report's extra section files (render_report --sections)."""
    return ["results/shift/section.html"] if shift_models() else []


def shift_report_spec():
    """Labels and the confidence level of the shift section (JSON, results/specs/shift_report.json)."""
    return json.dumps(report_specs.shift_report_spec(config), sort_keys=False)


def shift_archive_args(wildcards):
    entry = (shift_cfg().get("archives") or {}).get(wildcards.dataset)
    return f"--archive {json.dumps(entry, sort_keys=True)!r}" if entry else ""


def shift_corrupt_inputs(wildcards):
    files = {"manifest": f"resources/datasets/{wildcards.dataset}/manifest.json"}
    if shift_cfg().get("source", "generate") == "published":
        files["archive"] = f"resources/corrupted/{wildcards.dataset}/published.tar"
    return files


def shift_corrupt_args(wildcards, input):
    if shift_cfg().get("source", "generate") == "published":
        return f"--source published --archive-file {input.archive} {shift_archive_args(wildcards)}"
    return f"--source generate --seed {shift_cfg().get('seed', 0)}"


def check_shift():
    cfg = shift_cfg()
    if not cfg:
        return
    problems = []
    for m in cfg.get("models") or []:
        if m not in config["models"]:
            problems.append(f"shift.models: {m!r} is not a key of models")
        elif config["models"][m]["source"] == "logits":
            problems.append(f"shift.models: {m!r} has source logits (no images to corrupt)")
    if cfg.get("source", "generate") == "generate":
        from calbench.shift.corruptions import CORRUPTIONS as known
    else:
        from calbench.shift.datasets import PUBLISHED_CORRUPTIONS as known
    for c in cfg["corruptions"]:
        if c not in known:
            problems.append(f"shift.corruptions: {c!r} is not one of {sorted(known)}")
    for metric in ("accuracy", "ece", "nll"):
        if metric not in cfg.get("metrics", ["accuracy", "ece", "nll"]):
            problems.append(f"shift.metrics must include {metric} (the report's box plots)")
    if cfg.get("compare_metrics", ["ece", "nll"]):
        for c in ("ts", "uncalibrated"):
            if c not in config["calibrators"]:
                problems.append(f"shift.compare_metrics needs calibrator {c!r} in calibrators")
    if problems:
        raise ValueError("invalid config: " + "; ".join(problems))


check_shift()
