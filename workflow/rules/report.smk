# Aggregate every result into the study's tables, then render the self-contained HTML report.


rule aggregate:
    output:
        metrics="results/aggregate/metrics.csv",
        compare="results/aggregate/compare.csv",
        # verdicts over models (a header alone below 5 models); render_report reads them
        win_rates="results/tables/win_rates.csv",
        improvement="results/tables/improvement.csv",
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
        templates=templates_input("report"),  # calbench/templates/report (helpers/report.smk)
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
        over_models=["results/tables/win_rates.csv", "results/tables/improvement.csv"],
        arena=arena_targets(),  # implementations side by side (workflow/rules/check.smk)
        partitions=model_paths("results/partitions/{dataset}/{model}.csv") if CROSSFIT else [],
    params:
        reference=lambda wildcards, input: (
            shell_args("--reference-table", input.reference_table[0]) if input.reference_table else ""
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
        "calbench render-report --metrics {input.metrics}"
        " --compare {input.compare} --spec @{input.spec} --config @{input.config}"
        " --grids {input.grids} --manifests {input.manifests} --logits {input.logits}"
        " --splits {input.splits} {params.reference} --sections {input.sections}"
        " --plots {input.plots} --ts-files {input.ts_files} --run-info {input.run_info}"
        " --robustness {input.robustness} --over-models {input.over_models}"
        " --arena {input.arena} --partitions {input.partitions}"
        " --out {output.report} > {log} 2>&1"
