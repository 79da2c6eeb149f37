# Logits: every model's test-set logits, from its network (cache_logits) or from a file, and the
# study's validation/test split of a dataset (split).
#
# Models whose logits come from a file (source: logits): download or find the published /
# user-supplied file, verify it, and write the same results/logits/{dataset}/{model}.npz that
# cache_logits writes (calbench import-logits; calbench.logits_sources). Sources with their own
# validation/test split (logits.split: file, e.g. Kängsepp's pickles) also write
# results/split/{dataset}/{model}.npz, which split_file() gives to that model's later steps.
# Models whose predictions need no download of their own (a folder's or local file, a mirror's
# copy, CalArena's shared file) are imported in batches, one job and process per batch (rules
# import_logits_batch_<dataset>__<i> and import_logits_presplit_batch_<dataset>__<i> at the end,
# membership in helpers/sizing.smk): the same files at the same paths, byte for byte.
# The wildcard constraints list the models each per-model rule serves (those of no batch); the
# batch rules name their files outright, which Snakemake prefers to cache_logits's pattern;
# cache_logits serves the others.


#: the import batches, per rule their models would otherwise use (helpers/sizing.smk,
#: import_batches), and the wildcard constraints of those rules: every model of no batch
IMPORT_BATCHES = import_batches(
    {
        m: v["dataset"]
        for m, v in config["models"].items()
        if imported_in_batch(m, v, config.get("mirrors") or [])
    },
    presplit={m for m in config["models"] if presplit(m)},
)
_BATCHED_IMPORTS = {m for b in IMPORT_BATCHES.values() for ms in b.values() for m in ms}
IMPORTED_MODELS = _names_regex(
    [
        m
        for m, v in config["models"].items()
        if v["source"] == "logits" and not presplit(m) and m not in _BATCHED_IMPORTS
    ]
)
PRESPLIT_MODELS = _names_regex(
    [m for m in config["models"] if presplit(m) and m not in _BATCHED_IMPORTS]
)


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


# One job per batch (helpers/sizing.smk, import_batches): one `calbench import-logits` process
# imports every model of the batch in turn, each with the options its own job would get, and
# writes each model's files at its own job's paths (the same bytes). Its inputs are its models'
# inputs together (spec files, local copies' digests, the code), so an edit of one model's
# entry or file reruns its batch alone. An error in one model names it and removes every file
# of the batch.
for _rule, _batches in IMPORT_BATCHES.items():
    for batch, members in _batches.items():
        dataset = config["models"][members[0]]["dataset"]
        wcs = [SimpleNamespace(dataset=dataset, model=m) for m in members]
        own_split = _rule == "import_logits_presplit"

        rule:
            name:
                f"{_rule}_batch_{batch}"
            output:
                logits=[f"results/logits/{dataset}/{m}.npz" for m in members],
                provenance=[f"results/logits/{dataset}/{m}.source.json" for m in members],
                # a file that brings its own split: each model's split too
                **({"split": [f"results/split/{dataset}/{m}.npz" for m in members]} if own_split else {}),
            input:
                lib=lib_sources("import-logits"),
                spec=[model_spec(w) for w in wcs],
                local=[path for w in wcs for path in _as_list(local_logits_input(w))],
            params:
                mirrors=global_mirror_args,
                strict=STRICT,
                spec=shell_args(*(f"@{model_spec(w)}" for w in wcs)),
                out=shell_args(*(f"results/logits/{dataset}/{m}.npz" for m in members)),
                provenance=shell_args(
                    *(f"results/logits/{dataset}/{m}.source.json" for m in members)
                ),
                split_out=(
                    "--split-out "
                    + shell_args(*(f"results/split/{dataset}/{m}.npz" for m in members))
                    if own_split
                    else ""
                ),
            log:
                f"logs/{_rule}_batch/{batch}.log",
            benchmark:
                f"benchmarks/{_rule}_batch/{batch}.tsv"
            threads: 1
            resources:
                mem_mb=2000,
                runtime=30,
            conda:
                "../../envs/calbench.yaml"
            shell:
                "OMP_NUM_THREADS={threads} calbench import-logits --spec {params.spec}"
                " --out {params.out} {params.split_out} --provenance {params.provenance}"
                " --resources resources {params.mirrors} {params.strict} > {log} 2>&1"
