# Aggregate every result into the study's tables, then render the self-contained HTML report.
REFERENCE_TABLE = "results/tables/reference.csv"  # ours versus published (report.reference)
#: The report template, in the workflow's source tree (works with --directory elsewhere).
TEMPLATE = str(Path(workflow.basedir) / "workflow" / "templates" / "report.html.j2")
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


def run_info():
    """What only the workflow knows of this run, for the report's provenance
    (calbench.report.provenance.RUN_INFO_KEYS): the command line, Snakemake's version, the
    config files and the workflow's folder (for its git commit). An input of render_report
    marked ancient: another command line alone does not rerun the report."""
    import sys

    import snakemake

    files = [str(p) for p in workflow.configfiles] or ["config.yaml"]
    info = {
        "command": ["snakemake", *sys.argv[1:]],
        "snakemake_version": snakemake.__version__,
        "config_files": files,
        "workflow_dir": str(workflow.basedir),
    }
    return ancient(write_if_changed("results/specs/run_info.json", json.dumps(info, indent=1)))


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
        if "uncalibrated" in config["calibrators"]:
            out["reliability"][m] = f"results/plots/{d}/{m}/uncalibrated.png"
    return out


def objectives_inputs():
    return [p for files in objectives_files().values() for p in files.values()]


def report_spec():
    """study_spec() plus the report.studies sections and their files (render_report only)."""
    return json.dumps(report_specs.report_spec(config, objectives_files()))


rule aggregate:
    output:
        metrics="results/aggregate/metrics.csv",
        compare="results/aggregate/compare.csv",
        tables=[
            report(
                f,
                caption="../report/table.rst",
                category="Tables",
                labels={"table": Path(f).stem},
            )
            if f.endswith(".csv")
            else f
            for f in all_tables()
        ],
        # ours versus published, computed once here; render_report reads it
        reference_table=[REFERENCE_TABLE] if config["report"].get("reference") else [],
    input:
        metrics=expand(
            "results/metrics/{path}/{calibrator}.csv",
            path=model_paths("{dataset}/{model}"),
            calibrator=list(config["calibrators"]),
        ),
        compare=model_paths("results/compare/{dataset}/{model}.csv"),
        reference=reference_input(),
        lib=lib_sources("aggregate"),
        spec=spec_file("aggregate", study_spec()),
    params:
        reference=lambda wildcards, input: reference_arg(input),
    log:
        "logs/aggregate/aggregate.log",
    benchmark:
        "benchmarks/aggregate/aggregate.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "calbench aggregate --metrics {input.metrics} --compare {input.compare}"
        " --spec @{input.spec} {params.reference} --out-csv {output.metrics}"
        " --out-compare {output.compare} --tables-dir results/tables > {log} 2>&1"


rule render_report:
    output:
        report=report(
            "reports/report.html",
            caption="../report/report.rst",
            category="Report",
            labels={"file": "report.html"},
        ),
    input:
        metrics="results/aggregate/metrics.csv",
        compare="results/aggregate/compare.csv",
        template=TEMPLATE,
        grids=model_paths("results/plots/{dataset}/{model}/grid.png"),
        manifests=expand("resources/datasets/{dataset}/manifest.json", dataset=manifest_datasets()),
        logits=model_paths("results/logits/{dataset}/{model}.npz"),
        splits=split_files(),
        reference_table=[REFERENCE_TABLE] if config["report"].get("reference") else [],
        objectives=objectives_inputs(),
        sections=lambda wildcards: shift_sections(),  # extra sections (workflow/rules/shift.smk)
        plots=[p for p in all_plots() if Path(p).stem != "grid"],  # per-calibrator diagrams
        ts_files=model_paths("results/calibrators/{dataset}/{model}/ts.json")
        if "ts" in config["calibrators"]
        else [],
        lib=lib_sources("render-report"),
        spec=spec_file("render_report", report_spec()),
        config=spec_file("config", json.dumps(config, sort_keys=False)),
        run_info=run_info(),
        robustness=model_paths("results/robustness/{dataset}/{model}.csv"),
    params:
        reference=lambda wildcards, input: (
            f"--reference-table {input.reference_table[0]}" if input.reference_table else ""
        ),
    log:
        "logs/render_report/report.log",
    benchmark:
        "benchmarks/render_report/report.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "calbench render-report --template {input.template} --metrics {input.metrics}"
        " --compare {input.compare} --spec @{input.spec} --config @{input.config}"
        " --grids {input.grids} --manifests {input.manifests} --logits {input.logits}"
        " --splits {input.splits} {params.reference} --sections {input.sections}"
        " --plots {input.plots} --ts-files {input.ts_files} --run-info {input.run_info}"
        " --robustness {input.robustness}"
        " --out {output.report} > {log} 2>&1"
