# Replicating a published study (config/coursework.yaml): its published numbers as the report's
# reference CSV, and ours vs published in the study's table layout with every model's
# full-test-set accuracy checked against the study's (`expected_acc`). Target: `replication`.

#: Published tables packaged with calbench (calbench.reference.AVAILABLE).
PACKAGED_REFERENCES = "coursework_2021"
REPLICATION_OUTPUTS = [
    "results/replication/replication.html",
    "results/replication/tables.md",
    "results/replication/cells.csv",
    "results/replication/accuracy_check.csv",
]


def replication_spec():
    """JSON slice of the config for `calbench replication-tables` (labels, groups, expected
    accuracies, calibrators, tolerances)."""
    rep = config["report"]
    ref = rep.get("reference") or {}
    spec = {
        "title": config["study"]["title"],
        "datasets": {d: {"display": v.get("display", d)} for d, v in config["datasets"].items()},
        "models": {
            m: {
                "dataset": v["dataset"],
                "group": v.get("group", 1),
                "display": v.get("display", {}),
                "expected_acc": v.get("expected_acc", v.get("expected_accuracy")),
            }
            for m, v in config["models"].items()
        },
        "calibrators": {
            c: {"display": (v or {}).get("display", c)} for c, v in config["calibrators"].items()
        },
        "table_metrics": rep["table_metrics"],
        "reference": {k: v for k, v in ref.items() if k in ("units", "tolerances")},
    }
    return json.dumps(spec)


def replication_targets():
    """The replication outputs when the config names a reference (else nothing)."""
    return REPLICATION_OUTPUTS if config["report"].get("reference") else []


rule reference_csv:
    output:
        csv="resources/reference/{name}.csv",
    input:
        lib=lib_sources("download_checkpoint") + [str(LIB_ROOT / "reference" / "__init__.py")],
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
        lib=lib_sources("download_checkpoint")
        + [str(LIB_ROOT / "reference" / "compare.py"), str(LIB_ROOT / "report" / "tables.py")],
    params:
        spec=replication_spec(),
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
        " --spec {params.spec:q} --logits {input.logits} --out-html {output.html}"
        " --out-md {output.md} --out-csv {output.cells} --out-accuracy {output.accuracy}"
        " > {log} 2>&1"


rule replication:
    input:
        "reports/report.html",
        replication_targets(),
