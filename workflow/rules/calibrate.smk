# Calibration: one job per (dataset, model) fits every configured calibrator on the validation
# half, evaluates each on both halves with its reliability diagram (test half), compares them
# (paired tests) and draws the model's grid of diagrams. One process per model instead of one
# per (model, calibrator) and step: the ~1.5 s of interpreter and library start-up is paid once
# per model, and a cluster gets one job per model instead of hundreds of one-second jobs. The
# outputs stay one file per calibrator, so every later step reads what it always read.
# results/calibrate_cache/ keeps each calibrator's files under a digest of everything they
# depend on (calbench.reuse.reuse_digest): when the spec changes (a calibrator added,
# another's parameters edited) the job reruns but copies back every unchanged calibrator instead
# of refitting it. It is not a declared output: Snakemake removes a job's outputs before it runs.

CROSSFIT = config["evaluation"].get("scheme", "holdout") == "crossfit"


rule calibrate:
    output:
        calibrators=per_calibrator("results/calibrators/{dataset}/{model}/{calibrator}.json"),
        metrics=per_calibrator("results/metrics/{dataset}/{model}/{calibrator}.csv"),
        plots=[
            report(
                path,
                caption="../report/reliability.rst",
                category="Reliability diagrams",
                subcategory="{model}",
                labels={"model": "{model}", "calibrator": Path(path).stem},
            )
            for path in per_calibrator("results/plots/{dataset}/{model}/{calibrator}.png")
        ],
        compare="results/compare/{dataset}/{model}.csv",
        grid="results/plots/{dataset}/{model}/grid.png",
        robustness="results/robustness/{dataset}/{model}.csv",
        # evaluation.scheme crossfit: each comparison's spread over the partitions
        **({"partitions": "results/partitions/{dataset}/{model}.csv"} if CROSSFIT else {}),
    input:
        logits="results/logits/{dataset}/{model}.npz",
        split=split_file,
        spec=calibrate_spec(),
        lib=lib_sources("calibrate"),
    log:
        "logs/calibrate/{dataset}/{model}.log",
    benchmark:
        "benchmarks/calibrate/{dataset}/{model}.tsv"
    # threads and GPU sized by N x K (helpers/sizing.smk): only the scaling fits' matrix
    # products use the threads (calbench calibrate --threads; OMP_NUM_THREADS=1 keeps numpy's
    # and torch's other work on one), and their results are the same on any number of threads,
    # so the outputs do not depend on --cores. A large job on a machine with a GPU (GPUS,
    # common.smk) holds it and fits there (--device cuda: results within float32 tolerance of
    # the CPU's, not bit for bit); every other job says --device cpu.
    threads: calibrate_threads
    resources:
        mem_mb=calibrate_mem_mb,
        runtime=60,
        gpu=calibrate_gpu,
    params:
        device=calibrate_device,
        env=calibrate_env,
        time_limit=calibrate_time_limit,
        partitions=lambda wildcards, output: (
            f"--partitions {output.partitions}" if CROSSFIT else ""
        ),
    conda:
        "../../envs/calbench.yaml"
    # params.env: malloc keeps freed memory for reuse (helpers/sizing.smk, CALIBRATE_ENV);
    # --time-limit: the runtime resource (minutes) is honoured on a local machine too: past it
    # the job stops with one line (calbench._deadline), e.g. a plug-in calibrator that hangs
    shell:
        "OMP_NUM_THREADS=1 {params.env} calbench calibrate --logits {input.logits}"
        " --split {input.split} --spec @{input.spec}"
        " --threads {threads} --device {params.device}"
        " --calibrators-dir results/calibrators/{wildcards.dataset}/{wildcards.model}"
        " --metrics-dir results/metrics/{wildcards.dataset}/{wildcards.model}"
        " --plots-dir results/plots/{wildcards.dataset}/{wildcards.model}"
        " --compare {output.compare} --robustness {output.robustness}"
        " {params.time_limit} {params.partitions}"
        " --reuse-dir results/calibrate_cache/{wildcards.dataset}/{wildcards.model} > {log} 2>&1"
