# Replicating a published study (config/coursework.yaml): its published numbers as the report's
# reference CSV, and ours vs published in the study's table layout with every model's
# full-test-set accuracy checked against the study's (`expected_acc`). Target: `replication`.


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
        spec=spec_file("replication_tables", replication_spec()),
    log:
        "logs/replication_tables/replication.log",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=10,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "calbench replication-tables --metrics {input.metrics} --reference {input.reference}"
        " --spec @{input.spec} --logits {input.logits} --out-html {output.html}"
        " --out-md {output.md} --out-csv {output.cells} --out-accuracy {output.accuracy}"
        " > {log} 2>&1"


rule replication:
    input:
        "reports/report.html",
        replication_targets(),
