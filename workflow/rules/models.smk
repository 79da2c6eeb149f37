# Models: train the study's own models; cache every model's test-set logits.


rule train_model:
    output:
        model="results/models/{dataset}/{model}/model.pt",
        history="results/models/{dataset}/{model}/history.csv",
    input:
        manifest="resources/datasets/{dataset}/manifest.json",
        lib=lib_sources("train_model"),
    params:
        spec=model_spec,
        root=lambda wildcards: data_root(wildcards.dataset),
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
        "OMP_NUM_THREADS={threads} calbench train-model --spec {params.spec:q} --threads {threads}"
        " --data-root {params.root} --out {output.model} --history {output.history} > {log} 2>&1"


rule cache_logits:
    output:
        logits="results/logits/{dataset}/{model}.npz",
    input:
        manifest="resources/datasets/{dataset}/manifest.json",
        weights=weights_input,
        lib=lib_sources("cache_logits"),
    params:
        spec=model_spec,
        root=lambda wildcards: data_root(wildcards.dataset),
        limit=limit_arg,
        dataset=dataset_spec,
    log:
        "logs/cache_logits/{dataset}/{model}.log",
    benchmark:
        "benchmarks/cache_logits/{dataset}/{model}.tsv"
    threads: 2
    priority: 10  # as train_model: it unlocks the model's calibration jobs
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=GPUS,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "OMP_NUM_THREADS={threads} calbench cache-logits --spec {params.spec:q} --threads {threads}"
        " --no-progress --checkpoint {input.weights} --data-root {params.root} {params.limit}"
        " --dataset-spec {params.dataset:q} --out {output.logits} > {log} 2>&1"
