# Helpers of the report stage (workflow/rules/report.smk): functions and constants only,
# kept apart from the rules as Snakemake's linter asks; shared helpers live in common.smk.
REFERENCE_TABLE = "results/tables/reference.csv"  # ours versus published (report.reference)
def templates_input(kind):
    """The templates a step renders its HTML from (package data of calbench: templates/<kind>/,
    calbench.pages) as a code input: the manifest of their contents (results/code/, like
    lib_sources): an edited template reruns the steps using it, a moved folder or another
    install of the same files does not."""
    files = sorted(p for p in (LIB_ROOT / "templates" / kind).rglob("*.j2") if p.is_file())
    return write_if_changed(f"results/code/templates-{kind}.sha256", code_manifest_text(files))
from calbench.report import spec as report_specs  # the reporting steps' config slices
from calbench.display import losses_calibrators  # the one rule for the losses tables


def study_spec():
    """The slice of the config the tables and the report use (JSON for ``--spec``;
    calbench.report.spec)."""
    return json.dumps(report_specs.study_spec(config))  # key order = config order = table order


def reference_input():
    ref = config["report"].get("reference")
    return [ref["csv"]] if ref else []


def reference_arg(input):
    return shell_args("--reference", input.reference[0]) if input.reference else ""


def losses_tables():
    displays = [v.get("display") or {} for v in config["models"].values()]
    by_loss = losses_calibrators(displays, config["calibrators"])
    return config["report"]["losses_metrics"] if "uncalibrated" in by_loss else []


def all_tables():
    files = []
    for metric in config["report"]["table_metrics"]:
        files += [f"results/tables/{metric}.{ext}" for ext in ("html", "md", "csv", "tex")]
    for metric in losses_tables():
        files += [f"results/tables/losses_{metric}.{ext}" for ext in ("html", "md", "csv", "tex")]
    return files


def all_plots():
    files = model_paths("results/plots/{dataset}/{model}/grid.png")
    for c in config["calibrators"] if config["plots"].get("per_calibrator", True) else []:
        files += model_paths(f"results/plots/{{dataset}}/{{model}}/{c}.png")
    return files


def run_info():
    """What only the workflow knows of this run, for the report's provenance
    (calbench.report.provenance.RUN_INFO_KEYS): the command line, Snakemake's version, the
    config files (relative to the study folder when inside it), the workflow's folder (for its
    git commit; never shown) and the benchmarks folder (the run's wall time). An input of
    render_report marked ancient: another command line or folder alone does not rerun the
    report."""
    import sys

    import snakemake

    files = [portable_path(p) for p in workflow.configfiles] or ["config.yaml"]
    info = {
        "command": ["snakemake", *sys.argv[1:]],
        "snakemake_version": snakemake.__version__,
        "config_files": files,
        "workflow_dir": str(workflow.basedir),
        "benchmarks_dir": "benchmarks",
    }
    # under .snakemake/: it holds this machine's paths, so it is not a result of the study
    path = write_if_changed(".snakemake/calbench/run_info.json", json.dumps(info, indent=1))
    return ancient(path)


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


# --- calibration-during-training sections (report.studies, docs/objectives.md) ---------------
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
        if "uncalibrated" in config["calibrators"] and config["plots"].get("per_calibrator", True):
            out["reliability"][m] = f"results/plots/{d}/{m}/uncalibrated.png"
    return out


def objectives_inputs():
    return [p for files in objectives_files().values() for p in files.values()]


def report_spec():
    """study_spec() plus the report.studies sections and their files (render_report only)."""
    return json.dumps(report_specs.report_spec(config, objectives_files()))
