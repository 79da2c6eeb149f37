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
# Small models (N x K up to CALIBRATE_BATCH_MAX_ENTRIES, known from the config) are calibrated
# in batches instead, one job and process per batch (rules calibrate_batch_<dataset>__<i>
# below, membership in helpers/sizing.smk): the same files at the same paths, byte for byte.


#: the batches of small models (helpers/sizing.smk, calibrate_batches) and the wildcard
#: constraint of the per-model calibrate rule: every model of no batch
CALIBRATE_BATCHES = calibrate_batches(
    {m: v["dataset"] for m, v in config["models"].items()},
    {
        **{m: source_shape(m, v, config.get("mirrors") or []) for m, v in config["models"].items()},
        **calarena_shapes(config),
    },
)
UNBATCHED_MODELS = _names_regex(
    sorted(set(config["models"]) - {m for ms in CALIBRATE_BATCHES.values() for m in ms})
)

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
            for path in per_calibrator_plots("results/plots/{dataset}/{model}/{calibrator}.png")
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
    wildcard_constraints:
        model=UNBATCHED_MODELS,  # the models of no batch (below)
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


# One job per batch of small models of one dataset (helpers/sizing.smk, calibrate_batches): one
# `calbench calibrate` process calibrates every model of the batch in turn, each with the
# options its own job would get, and writes each model's files at its own job's paths (the same
# bytes). An error in one model names it (its --logits) and removes every file of the batch.
# Small jobs need no thread, GPU or size of their own: one thread, the CPU, the memory of the
# batch's largest model.
for batch, members in CALIBRATE_BATCHES.items():
    dataset = config["models"][members[0]]["dataset"]

    rule:
        name:
            f"calibrate_batch_{batch}"
        output:
            [
                path
                for m in members
                for path in per_calibrator(f"results/calibrators/{dataset}/{m}/{{calibrator}}.json")
                + per_calibrator(f"results/metrics/{dataset}/{m}/{{calibrator}}.csv")
                + [f"results/compare/{dataset}/{m}.csv", f"results/robustness/{dataset}/{m}.csv",
                   f"results/plots/{dataset}/{m}/grid.png"]
                + ([f"results/partitions/{dataset}/{m}.csv"] if CROSSFIT else [])
            ]
            + [
                report(
                    path,
                    caption="../report/reliability.rst",
                    category="Reliability diagrams",
                    subcategory=m,
                    labels={"model": m, "calibrator": Path(path).stem},
                )
                for m in members
                for path in per_calibrator_plots(f"results/plots/{dataset}/{m}/{{calibrator}}.png")
            ],
        input:
            logits=[f"results/logits/{dataset}/{m}.npz" for m in members],
            split=batch_splits(dataset, members),
            spec=calibrate_spec(),
            lib=lib_sources("calibrate"),
        log:
            f"logs/calibrate_batch/{batch}.log",
        benchmark:
            f"benchmarks/calibrate_batch/{batch}.tsv"
        threads: 1
        resources:
            mem_mb=batch_mem_mb(members),
            runtime=60,
        params:
            env=calibrate_env,
            time_limit=calibrate_time_limit,
            split=shell_args(*batch_splits(dataset, members)),
            logits=shell_args(*(f"results/logits/{dataset}/{m}.npz" for m in members)),
            cal=shell_args(*(f"results/calibrators/{dataset}/{m}" for m in members)),
            met=shell_args(*(f"results/metrics/{dataset}/{m}" for m in members)),
            plots=shell_args(*(f"results/plots/{dataset}/{m}" for m in members)),
            compare=shell_args(*(f"results/compare/{dataset}/{m}.csv" for m in members)),
            robustness=shell_args(*(f"results/robustness/{dataset}/{m}.csv" for m in members)),
            reuse=shell_args(*(f"results/calibrate_cache/{dataset}/{m}" for m in members)),
            partitions=(
                "--partitions "
                + shell_args(*(f"results/partitions/{dataset}/{m}.csv" for m in members))
                if CROSSFIT
                else ""
            ),
        conda:
            "../../envs/calbench.yaml"
        shell:
            "OMP_NUM_THREADS=1 {params.env} calbench calibrate --logits {params.logits}"
            " --split {params.split} --spec @{input.spec} --threads 1 --device cpu"
            " --calibrators-dir {params.cal} --metrics-dir {params.met}"
            " --plots-dir {params.plots} --compare {params.compare}"
            " --robustness {params.robustness} {params.time_limit} {params.partitions}"
            " --reuse-dir {params.reuse} > {log} 2>&1"
