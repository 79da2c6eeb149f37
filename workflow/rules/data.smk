# Data: download and verify datasets; download published checkpoints (same code as
# `calbench stage`: a staged resources/ is what these rules would write); the study's split.


rule download_dataset:
    output:
        manifest="resources/datasets/{dataset}/manifest.json",
    input:
        lib=lib_sources("download_dataset"),
    params:
        args=download_args,
        root=lambda wildcards: data_root(wildcards.dataset),
        dataset=dataset_spec,
    log:
        "logs/download_dataset/{dataset}.log",
    benchmark:
        "benchmarks/download_dataset/{dataset}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "calbench download-dataset {params.args} --root {params.root} --spec {params.dataset:q}"
        " --manifest {output.manifest} > {log} 2>&1"


rule download_checkpoint:
    output:
        checkpoint="resources/checkpoints/{dataset}/{model}/checkpoint.pt",
    input:
        lib=lib_sources("download_checkpoint"),
    params:
        spec=model_spec,
        mirrors=global_mirror_args,
        strict=strict_arg(),
    log:
        "logs/download_checkpoint/{dataset}/{model}.log",
    benchmark:
        "benchmarks/download_checkpoint/{dataset}/{model}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "calbench download-checkpoint --spec {params.spec:q} --out {output.checkpoint}"
        " --resources resources {params.mirrors} {params.strict} > {log} 2>&1"


rule split:
    output:
        split="results/split/{dataset}/split.npz",
    input:
        logits=split_source,
        lib=lib_sources("split"),
    params:
        dataset=dataset_spec,
    log:
        "logs/split/{dataset}.log",
    benchmark:
        "benchmarks/split/{dataset}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "calbench split --logits {input.logits} --out {output.split} > {log} 2>&1"
