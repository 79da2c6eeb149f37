# Logits: every model's test-set logits, from its network (cache_logits) or from a file, and the
# study's validation/test split of a dataset (split).
#
# Models whose logits come from a file (source: logits): download or find the published /
# user-supplied file, verify it, and write the same results/logits/{dataset}/{model}.npz that
# cache_logits writes (calbench import-logits; calbench.logits_sources). Sources with their own
# validation/test split (logits.split: file, e.g. Kängsepp's pickles) also write
# results/split/{dataset}/{model}.npz, which split_file() gives to that model's later steps.
# The wildcard constraints list the models each rule serves; cache_logits serves the others.


ruleorder: import_logits_presplit > import_logits > cache_logits


rule import_logits:
    output:
        logits="results/logits/{dataset}/{model}.npz",
        provenance="results/logits/{dataset}/{model}.source.json",
    input:
        lib=lib_sources("import-logits"),
        spec=model_spec,
        local=local_logits_input,  # a replaced local file reruns the import (helpers/logits.smk)
    wildcard_constraints:
        model=IMPORTED_MODELS,
    params:
        mirrors=global_mirror_args,
        strict=STRICT,
        split_out="",
    log:
        "logs/import_logits/{dataset}/{model}.log",
    benchmark:
        "benchmarks/import_logits/{dataset}/{model}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "OMP_NUM_THREADS={threads} calbench import-logits --spec @{input.spec} --out {output.logits}"
        " {params.split_out} --provenance {output.provenance} --resources resources"
        " {params.mirrors} {params.strict} > {log} 2>&1"


# The same step for files that carry their own split: it also writes the model's split.
use rule import_logits as import_logits_presplit with:
    output:
        logits="results/logits/{dataset}/{model}.npz",
        provenance="results/logits/{dataset}/{model}.source.json",
        split="results/split/{dataset}/{model}.npz",
    wildcard_constraints:
        model=PRESPLIT_MODELS,
    params:
        mirrors=global_mirror_args,
        strict=STRICT,
        split_out=lambda wildcards, output: f"--split-out {output.split}",


rule cache_logits:
    output:
        logits="results/logits/{dataset}/{model}.npz",
    input:
        manifest="resources/datasets/{dataset}/manifest.json",
        weights=weights_input,
        lib=lib_sources("cache-logits"),
        spec=model_spec,
        dataset=dataset_spec,
    params:
        root=data_root_arg,
        limit=limit_arg,
    log:
        "logs/cache_logits/{dataset}/{model}.log",
    benchmark:
        "benchmarks/cache_logits/{dataset}/{model}.tsv"
    threads: 2
    priority: 10  # as train_model (models.smk): it unlocks the model's calibration jobs
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=GPUS,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "OMP_NUM_THREADS={threads} calbench cache-logits --spec @{input.spec} --threads {threads}"
        " --no-progress --checkpoint {input.weights} --data-root {params.root} {params.limit}"
        " --dataset-spec @{input.dataset} --out {output.logits} > {log} 2>&1"


rule split:
    output:
        split="results/split/{dataset}/split.npz",
    input:
        unpack(split_inputs),  # the dataset's own, no model's logits (helpers/logits.smk)
        lib=lib_sources("split"),
    params:
        source=split_args,
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
        "calbench split {params.source} --out {output.split} > {log} 2>&1"
