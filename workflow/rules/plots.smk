# Reliability diagrams: one grid per model (test half); the diagram of each (model, calibrator)
# is drawn by rule evaluate (calibrate.smk).


rule plot_reliability_grid:
    output:
        png="results/plots/{dataset}/{model}/grid.png",
    input:
        logits="results/logits/{dataset}/{model}.npz",
        split=split_file,
        calibrators=calibrator_files,
        lib=lib_sources("plot-reliability"),
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
        "OMP_NUM_THREADS={threads} calbench plot-reliability --grid --logits {input.logits} --split {input.split}"
        " --calibrator {input.calibrators} --n-bins {params.n_bins} --style {params.style}"
        " --out {output.png} > {log} 2>&1"
