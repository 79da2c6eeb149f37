# Reliability diagrams: one per (model, calibrator) and one grid per model (test half).


rule plot_reliability:
    output:
        png=report(
            "results/plots/{dataset}/{model}/{method}.png",
            caption="../report/reliability.rst",
            category="Reliability diagrams",
            subcategory="{model}",
            labels={"model": "{model}", "calibrator": "{method}"},
        ),
    input:
        logits="results/logits/{dataset}/{model}.npz",
        split=split_file,
        calibrator="results/calibrators/{dataset}/{model}/{method}.json",
        lib=lib_sources("plot_reliability"),
    params:
        n_bins=config["plots"]["n_bins"],
        style=config["plots"]["style"],
        title=lambda wildcards: str(
            (config["calibrators"][wildcards.method] or {}).get("display", wildcards.method)
        ),
    log:
        "logs/plot_reliability/{dataset}/{model}/{method}.log",
    benchmark:
        "benchmarks/plot_reliability/{dataset}/{model}/{method}.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "calbench plot-reliability --logits {input.logits} --split {input.split}"
        " --calibrator {input.calibrator} --n-bins {params.n_bins} --style {params.style}"
        " --title {params.title:q} --out {output.png} > {log} 2>&1"


rule plot_reliability_grid:
    output:
        png="results/plots/{dataset}/{model}/grid.png",
    input:
        logits="results/logits/{dataset}/{model}.npz",
        split=split_file,
        calibrators=calibrator_files,
        lib=lib_sources("plot_reliability"),
    params:
        n_bins=config["plots"]["n_bins"],
        style=config["plots"]["style"],
    log:
        "logs/plot_reliability_grid/{dataset}/{model}.log",
    benchmark:
        "benchmarks/plot_reliability_grid/{dataset}/{model}.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "calbench plot-reliability --grid --logits {input.logits} --split {input.split}"
        " --calibrator {input.calibrators} --n-bins {params.n_bins} --style {params.style}"
        " --out {output.png} > {log} 2>&1"
