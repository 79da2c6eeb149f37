# Dataset shift (docs/workflow.md "Dataset shift"; calbench.shift): corrupted copies of each
# dataset's test set at severities 1-5, every shifted model's logits on their test half, the
# clean-fitted calibrators evaluated on them, and the report section. Active when the config has
# a shift: section (checked with the rest of the config by calbench.config_check).


rule download_corrupted:
    output:
        archive="resources/corrupted/{dataset}/published.tar",
    input:
        lib=lib_sources("download-corrupted"),
    params:
        archive=shift_archive_args,
        mirrors=global_mirror_args,
    log:
        "logs/download_corrupted/{dataset}.log",
    benchmark:
        "benchmarks/download_corrupted/{dataset}.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=120,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "calbench download-corrupted --dataset {wildcards.dataset} {params.archive}"
        " {params.mirrors} --out {output.archive} > {log} 2>&1"


rule corrupt_dataset:
    output:
        images="resources/corrupted/{dataset}/{corruption}.npy",
        manifest="resources/corrupted/{dataset}/{corruption}.json",
    input:
        unpack(shift_corrupt_inputs),
        lib=lib_sources("corrupt-dataset"),
        dataset=dataset_spec,
    params:
        root=data_root_arg,
        limit=limit_arg,
        source=shift_corrupt_args,
    log:
        "logs/corrupt_dataset/{dataset}/{corruption}.log",
    benchmark:
        "benchmarks/corrupt_dataset/{dataset}/{corruption}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "OMP_NUM_THREADS={threads} calbench corrupt-dataset --dataset {wildcards.dataset}"
        " --corruption {wildcards.corruption} {params.source} --data-root {params.root}"
        " {params.limit} --dataset-spec @{input.dataset} --out {output.images} > {log} 2>&1"


rule shift_logits:
    output:
        logits="results/shift/{dataset}/{model}/logits.npz",
    input:
        corrupted=lambda wildcards: shift_corrupted(wildcards.dataset),
        clean="results/logits/{dataset}/{model}.npz",
        split=split_file,
        weights=weights_input,
        lib=lib_sources("shift-logits"),
        spec=model_spec,
        dataset=dataset_spec,
    log:
        "logs/shift_logits/{dataset}/{model}.log",
    benchmark:
        "benchmarks/shift_logits/{dataset}/{model}.tsv"
    # one thread: jobs run side by side; two OpenMP threads per job on a busy machine spin-wait
    # (measured: 5x the CPU time and 2.5x the wall time of one thread, identical logits)
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=GPUS,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "OMP_NUM_THREADS={threads} calbench shift-logits --spec @{input.spec} --threads {threads}"
        " --checkpoint {input.weights} --logits {input.clean} --split {input.split}"
        " --corrupted {input.corrupted} --dataset-spec @{input.dataset}"
        " --out {output.logits} > {log} 2>&1"


rule evaluate_shift:
    output:
        metrics="results/shift/{dataset}/{model}/metrics.csv",
        compare="results/shift/{dataset}/{model}/compare.csv",
    input:
        shift="results/shift/{dataset}/{model}/logits.npz",
        clean="results/logits/{dataset}/{model}.npz",
        split=split_file,
        calibrators=calibrator_files,
        lib=lib_sources("evaluate-shift"),
    params:
        args=evaluate_shift_args,
    log:
        "logs/evaluate_shift/{dataset}/{model}.log",
    benchmark:
        "benchmarks/evaluate_shift/{dataset}/{model}.tsv"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=30,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "OMP_NUM_THREADS={threads} calbench evaluate-shift --shift-logits {input.shift}"
        " --logits {input.clean} --split {input.split} --calibrators {input.calibrators}"
        " {params.args}"
        " --out-metrics {output.metrics} --out-compare {output.compare} > {log} 2>&1"


rule shift_report:
    output:
        section="results/shift/section.json",
        mean_ece="results/shift/mean_ece.csv",
        metrics="results/shift/metrics.csv",
        compare="results/shift/compare.csv",
    input:
        metrics=shift_model_paths("results/shift/{dataset}/{model}/metrics.csv"),
        compare=shift_model_paths("results/shift/{dataset}/{model}/compare.csv"),
        manifests=[
            f"resources/corrupted/{d}/{c}.json"
            for d in shift_datasets()
            for c in (shift_cfg() or {}).get("corruptions", [])
        ],
        spec=lambda wildcards: spec_file("shift_report", shift_report_spec()),
        lib=lib_sources("shift-report"),
    log:
        "logs/shift_report/shift_report.log",
    benchmark:
        "benchmarks/shift_report/shift_report.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "calbench shift-report --metrics {input.metrics} --compare {input.compare}"
        " --manifests {input.manifests} --spec @{input.spec} --out-section {output.section}"
        " --out-dir results/shift > {log} 2>&1"
