# Implementations side by side: where the config runs another library's implementation of a
# method calbench also has (calbench.adapters, docs/plugins.md), the largest differences in
# calibrated probabilities and in each metric per pair, one table per model; render_report
# aggregates them (the "Implementations side by side" section). No job for the default config.


rule compare_implementations:
    output:
        csv="results/arena/{dataset}/{model}.csv",
        html="results/arena/{dataset}/{model}.html",
    input:
        logits="results/logits/{dataset}/{model}.npz",
        split=split_file,
        params=lambda wildcards: arena_spec(),
        lib=lib_sources("compare-implementations"),
        templates=templates_input("arena"),
    params:
        calibrators=lambda wildcards: shell_args(",".join(arena_calibrators())),
        metrics=lambda wildcards: shell_args(",".join(arena_metrics())),
    log:
        "logs/compare_implementations/{dataset}/{model}.log",
    benchmark:
        "benchmarks/compare_implementations/{dataset}/{model}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "OMP_NUM_THREADS={threads} calbench compare-implementations --logits {input.logits}"
        " --split {input.split} --calibrators {params.calibrators} --metrics {params.metrics}"
        " --params @{input.params} --csv {output.csv} --html {output.html} > {log} 2>&1"
