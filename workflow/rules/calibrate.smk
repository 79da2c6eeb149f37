# Calibration: fit on the validation half; evaluate both halves and draw the reliability
# diagram (test half); paired comparisons per model.


rule fit_calibrator:
    output:
        calibrator="results/calibrators/{dataset}/{model}/{calibrator}.json",
    input:
        logits="results/logits/{dataset}/{model}.npz",
        split=split_file,
        lib=lib_sources("fit-calibrator"),
    params:
        method=lambda wildcards: calibrator_method(wildcards.calibrator),
        params=calibrator_params,
    log:
        "logs/fit_calibrator/{dataset}/{model}/{calibrator}.log",
    benchmark:
        "benchmarks/fit_calibrator/{dataset}/{model}/{calibrator}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "OMP_NUM_THREADS={threads} calbench fit-calibrator --logits {input.logits}"
        " --split {input.split} --method {params.method} --params {params.params:q} --threads {threads}"
        " --out {output.calibrator} > {log} 2>&1"


rule evaluate:
    # one job per (model, calibrator) computes its metrics and draws its reliability diagram:
    # both read the same calibrated probabilities, and one process instead of two halves the
    # start-up cost (interpreter, numpy, calbench) of the study's most numerous step
    output:
        metrics="results/metrics/{dataset}/{model}/{calibrator}.csv",
        png=report(
            "results/plots/{dataset}/{model}/{calibrator}.png",
            caption="../report/reliability.rst",
            category="Reliability diagrams",
            subcategory="{model}",
            labels={"model": "{model}", "calibrator": "{calibrator}"},
        ),
    input:
        logits="results/logits/{dataset}/{model}.npz",
        split=split_file,
        calibrator="results/calibrators/{dataset}/{model}/{calibrator}.json",
        lib=lib_sources("evaluate"),
    params:
        metrics=",".join(ev("metrics")),
        halves=",".join(ev("halves")),
        n_bootstrap=ev("n_bootstrap"),
        level=ev("level"),
        seed=ev("seed"),
        ci=ci_args(),
        n_bins=config["plots"]["n_bins"],
        style=config["plots"]["style"],
        title=lambda wildcards: str(
            (config["calibrators"][wildcards.calibrator] or {}).get("display", wildcards.calibrator)
        ),
    log:
        "logs/evaluate/{dataset}/{model}/{calibrator}.log",
    benchmark:
        "benchmarks/evaluate/{dataset}/{model}/{calibrator}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "OMP_NUM_THREADS={threads} calbench evaluate --logits {input.logits} --split {input.split}"
        " --calibrator {input.calibrator} --metrics {params.metrics} --halves {params.halves}"
        " --n-bootstrap {params.n_bootstrap} --level {params.level} --seed {params.seed}"
        " {params.ci} --plot {output.png} --n-bins {params.n_bins} --style {params.style}"
        " --title {params.title:q} --out {output.metrics} > {log} 2>&1"


rule compare:
    output:
        compare="results/compare/{dataset}/{model}.csv",
    input:
        logits="results/logits/{dataset}/{model}.npz",
        split=split_file,
        calibrators=calibrator_files,
        lib=lib_sources("compare"),
    params:
        metrics=",".join(config["compare"]["metrics"]),
        baselines=",".join(config["compare"]["baselines"]),
        n_bootstrap=config["compare"]["n_bootstrap"],
        level=ev("level"),
        seed=ev("seed"),
    log:
        "logs/compare/{dataset}/{model}.log",
    benchmark:
        "benchmarks/compare/{dataset}/{model}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../../envs/calbench.yaml"
    shell:
        "OMP_NUM_THREADS={threads} calbench compare --logits {input.logits} --split {input.split}"
        " --calibrators {input.calibrators} --metrics {params.metrics}"
        " --baselines {params.baselines} --n-bootstrap {params.n_bootstrap}"
        " --level {params.level} --seed {params.seed} --out {output.compare} > {log} 2>&1"
