# Data: download and verify datasets (same code as `calbench stage`: a staged resources/ is
# what this rule would write).


rule download_dataset:
    output:
        manifest="resources/datasets/{dataset}/manifest.json",
    input:
        lib=lib_sources("download-dataset"),
        dataset=download_spec,
    params:
        args=download_args,
        root=data_root_arg,
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
        "calbench download-dataset {params.args} --root {params.root} --spec @{input.dataset}"
        " --manifest {output.manifest} > {log} 2>&1"
