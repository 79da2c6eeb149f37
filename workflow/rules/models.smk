# Models: train the study's own models; download published checkpoints (same code as
# `calbench stage`).


rule train_model:
    output:
        model="results/models/{dataset}/{model}/model.pt",
        history="results/models/{dataset}/{model}/history.csv",
    input:
        manifest="resources/datasets/{dataset}/manifest.json",
        lib=lib_sources("train-model"),
        spec=model_spec,
    params:
        root=data_root_arg,
    log:
        "logs/train_model/{dataset}/{model}.log",
    benchmark:
        "benchmarks/train_model/{dataset}/{model}.tsv"
    threads: 2
    # trainings before everything else: each unlocks a model's whole chain, and a long training
    # left waiting behind short jobs of trained models would run alone at the end
    priority: 10
    resources:
        mem_mb=4000,
        runtime=120,
        gpu=GPUS,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "OMP_NUM_THREADS={threads} calbench train-model --spec @{input.spec} --threads {threads}"
        " --data-root {params.root} --out {output.model} --history {output.history} > {log} 2>&1"


rule download_checkpoint:
    output:
        checkpoint="resources/checkpoints/{dataset}/{model}/checkpoint.pt",
    input:
        lib=lib_sources("download-checkpoint"),
        spec=model_spec,
    params:
        mirrors=global_mirror_args,
        strict="--strict-checksums" if config.get("strict_checksums") else "",
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
        "calbench download-checkpoint --spec @{input.spec} --out {output.checkpoint}"
        " --resources resources {params.mirrors} {params.strict} > {log} 2>&1"
