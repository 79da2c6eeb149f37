# Replicating a published study (config/coursework.yaml): its published numbers as the report's
# reference CSV, and ours vs published in the study's table layout with every model's
# full-test-set accuracy checked against the study's (`expected_acc`). Target: `replication`.
# Also the Guo et al. 2017 / Kull et al. 2019 study from published logits (report.guo_kull).


#: Published tables packaged with calbench (calbench.reference.AVAILABLE).


rule reference_csv:
    output:
        csv="resources/reference/{name}.csv",
    input:
        lib=lib_sources("reference-csv"),
    wildcard_constraints:
        name=PACKAGED_REFERENCES,
    log:
        "logs/reference_csv/{name}.log",
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "calbench reference-csv --name {wildcards.name} --out {output.csv} > {log} 2>&1"


rule replication_tables:
    output:
        html=REPLICATION_OUTPUTS[0],
        md=REPLICATION_OUTPUTS[1],
        cells=REPLICATION_OUTPUTS[2],
        accuracy=REPLICATION_OUTPUTS[3],
    input:
        metrics="results/aggregate/metrics.csv",
        reference=reference_input(),
        logits=model_paths("results/logits/{dataset}/{model}.npz"),
        lib=lib_sources("replication-tables"),
        templates=templates_input("reference"),
        spec=spec_file("replication_tables", replication_spec()),
    params:
        reference=lambda wildcards, input: reference_arg(input),
    log:
        "logs/replication_tables/replication.log",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=10,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "calbench replication-tables --metrics {input.metrics} {params.reference}"
        " --spec @{input.spec} --logits {input.logits} --out-html {output.html}"
        " --out-md {output.md} --out-csv {output.cells} --out-accuracy {output.accuracy}"
        " > {log} 2>&1"


rule replication:
    input:
        "reports/report.html",
        replication_targets(),


# The Guo et al. 2017 / Kull et al. 2019 study (config/guo_kull_logits.yaml, report.guo_kull):
# per model a temperature sweep, then every published cell beside ours, the summary table and the
# figures in results/guo_kull/ (calbench.reference.guo_kull).
rule temperature_sweep:
    output:
        grid="results/guo_kull/sweep/{dataset}/{model}/reliability.png",
        curve="results/guo_kull/sweep/{dataset}/{model}/ece_vs_temperature.png",
        csv="results/guo_kull/sweep/{dataset}/{model}/sweep.csv",
    input:
        logits="results/logits/{dataset}/{model}.npz",
        split=split_file,
        ts=sweep_calibrator,
        lib=lib_sources("temperature-sweep"),
    params:
        args=sweep_args(),
        calibrator=lambda wildcards, input: shell_args("--calibrator", *input.ts) if input.ts else "",
    log:
        "logs/temperature_sweep/{dataset}/{model}.log",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=10,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "OMP_NUM_THREADS={threads} calbench temperature-sweep --logits {input.logits}"
        " --split {input.split} {params.calibrator} --model {wildcards.model} {params.args}"
        " --out-grid {output.grid} --out-curve {output.curve} --out-csv {output.csv} > {log} 2>&1"


rule guo_kull_tables:
    output:
        html=GUO_KULL_OUTPUTS[0],
        md=GUO_KULL_OUTPUTS[1],
        cells=GUO_KULL_OUTPUTS[2],
        summary=GUO_KULL_OUTPUTS[3],
    input:
        unpack(guo_kull_summary_inputs),
        metrics="results/aggregate/metrics.csv",
        sweep_csvs=guo_kull_sweeps(["sweep.csv"]),
        sweep_figures=guo_kull_sweeps(SWEEP_FIGURES),
        reference=portable_path(LIB_ROOT / "reference" / "guo_kull_logits.csv"),
        lib=lib_sources("guo-kull-tables"),
        templates=templates_input("reference"),
        spec=spec_file("guo_kull_tables", guo_kull_spec()),
    params:
        summary=guo_kull_summary_args,
    log:
        "logs/guo_kull_tables/guo_kull.log",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=10,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "calbench guo-kull-tables --metrics {input.metrics} --spec @{input.spec} {params.summary}"
        " --sweep-csvs {input.sweep_csvs} --sweep-figures {input.sweep_figures}"
        " --out-html {output.html} --out-md {output.md} --out-csv {output.cells}"
        " --out-summary {output.summary} > {log} 2>&1"
