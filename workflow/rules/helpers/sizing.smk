# Sizing of the calibrate jobs (workflow/rules/calibrate.smk): threads, memory and the GPU
# follow the model's logits, N x K, read from the .npz's array header without loading the
# array. A 10k x 10 CIFAR-10 job stays at one thread next to its neighbours; an ImageNet
# 50k x 1000 job gets the cores its matrix products use (`--cores` still caps every job:
# Snakemake lowers a job's threads to it), or, when the workflow has a GPU (GPUS,
# rules/common.smk), one GPU and one thread. The outputs do not depend on the thread count
# (calbench.calibrators.fit_threads: only the scaling fits' matrix products are multi-threaded,
# and those are thread-count invariant); on the GPU they agree with the CPU's within float32
# tolerance (docs/reproducibility.md). Snakemake evaluates these functions again once a job's
# inputs exist, before it schedules the job. Functions only, kept apart from the rules as
# Snakemake's linter asks.
import math
from pathlib import Path

#: logit entries (N x K) up to which a calibrate job runs on one thread: calbench's scaling fits
#: use one thread up to 2^21 entries of their validation half anyway
#: (calbench.calibrators.scaling.SINGLE_THREAD_MAX_ENTRIES), and the rest of a job is numpy
CALIBRATE_ONE_THREAD_ENTRIES = 1 << 22
#: entries per further thread above that, and the most threads one job asks for. Four: only
#: M-scaling-b's (and the other scaling fits') matrix products use them, ~0.87 of its CPU and
#: ~3/4 of an ImageNet job's (perf/bench_fit_threads.py), so past four threads each further
#: one shortens the job by under 5% while holding a core another model's job could use (four
#: ImageNet models on 16 cores: ~10 min at 4 threads each, ~16 min at 8, simulated by
#: perf/bench_coursework_logits.py from the measured jobs)
CALIBRATE_ENTRIES_PER_THREAD = 1 << 22
CALIBRATE_MAX_THREADS = 4
#: on a local machine a calibrate job takes at most this fraction of --cores (16 cores: 4
#: threads, 2 cores: 1): a job holds its threads also while its single-threaded parts run, so
#: on a small machine a wide job leaves cores idle that other models' jobs could use (2 cores,
#: the coursework's 77 models: ~54 min with one thread per job, ~65 min with 2-thread ImageNet
#: jobs, simulated by perf/bench_coursework_logits.py)
CALIBRATE_CORES_SHARE = 0.25
#: fewest classes with which the scaling fits use threads at all
#: (calbench.calibrators.fit_threads.MIN_THREADED_CLASSES): below it a job gets one thread
CALIBRATE_MIN_THREADED_CLASSES = 300
#: logit entries (N x K) from which a calibrate job fits its torch-based calibrators on a GPU
#: when the workflow has one: ImageNet-sized (50k x 1000 = 5e7; 2^24 = 1.7e7). Below it a
#: fit's kernels are too small to gain from a GPU more than the ~2 s a process takes to start
#: CUDA, and the CPU's results are bit-for-bit reproducible.
CALIBRATE_GPU_MIN_ENTRIES = 1 << 24
#: memory of a calibrate job, a model of its measured peak RSS in N (samples) and K (classes)
#: (perf/bench_calibrate_memory.py: the default study's spec, one thread, CALIBRATE_ENV; peak MB
#: 10k x 10: 1,157, 50k x 10: 1,414, 200k x 10: 2,498, 400k x 10: 3,948, 10k x 100: 1,362,
#: 10k x 1000: 5,682, 20k x 1000: 8,612, the last two with M-scaling-b and Dirichlet capped
#: at 5 LBFGS iterations): start-up (python, numpy, torch, matplotlib), bytes per sample
#: whatever K (the per-sample values of the metrics, intervals, tests and ranks: ~4.3 kB, from
#: the tall shapes), bytes per logit entry (the float64 probabilities of both halves of every
#: calibrator, the cross-fitted predictions: ~290 B, from 10k and 20k x 1000) and bytes per class
#: pair (K^2: ~1,600 B measured at K = 1000, plus the 800 B of the matrix fits' full LBFGS
#: history, 100 pairs of K(K + 1) float32 vectors, which the capped runs leave out), times a
#: margin. Declared / peak: 1.22 to 1.39 on those shapes. The former model, 1,000 MB + 220 B per
#: entry, declared 0.48 to 0.78 of the tall shapes' peaks and 0.63 of 20k x 1000: jobs killed on
#: SLURM.
CALIBRATE_BASE_MB = 1100
CALIBRATE_BYTES_PER_SAMPLE = 4500
CALIBRATE_BYTES_PER_ENTRY = 300
CALIBRATE_BYTES_PER_CLASS_PAIR = 2400
CALIBRATE_MEM_MARGIN = 1.2
#: environment of a calibrate job's process: glibc's malloc keeps freed memory for reuse instead
#: of handing every large block back to the kernel (MALLOC_MMAP_MAX_=0: no block gets a mapping
#: of its own; MALLOC_TRIM_THRESHOLD_: the heap is not trimmed), so the scaling fits' tensors of
#: N x K floats, allocated and freed at every LBFGS evaluation, are not page-faulted in again
#: each time. Measured (one thread, same outputs byte for byte): the coursework's ImageNet job
#: with M-scaling-b capped at 5 iterations 210 -> 139 CPU-s (system time 96 -> 28 s; torch's
#: THP_MEM_ALLOC_ENABLE, used before, was the 210), each further M-scaling-b iteration ~0.3
#: CPU-s of page faults less; the default config on 10k x 100 139 -> 127 CPU-s.
CALIBRATE_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 36)}


def calibrate_env(wildcards):
    """CALIBRATE_ENV as ``NAME=value`` words for the rule's shell line."""
    return " ".join(f"{k}={v}" for k, v in CALIBRATE_ENV.items())


def calibrate_time_limit(wildcards, resources):
    """``--time-limit MINUTES`` of a calibrate job: its runtime resource (the rule's, or what
    --set-resources / a profile gives it), so that a local run honours it as SLURM does: past
    it the job stops with one line (calbench._deadline), e.g. a plug-in calibrator that hangs."""
    return shell_args("--time-limit", resources.runtime)


def logits_shape(path):
    """(N, K) of the ``logits`` array of an .npz, from its header (no array data is read);
    ``None`` when the file does not exist yet (the DAG is built before cache_logits runs) or its
    header cannot be read (the job itself then reports the problem)."""
    import zipfile
    from numpy.lib import format as npformat

    try:
        with zipfile.ZipFile(path) as zf, zf.open("logits.npy") as fh:
            version = npformat.read_magic(fh)
            read = (npformat.read_array_header_1_0 if version == (1, 0)
                    else npformat.read_array_header_2_0)
            shape = read(fh)[0]
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    if len(shape) != 2 or not all(isinstance(d, int) and d >= 0 for d in shape):
        return None
    return shape


def logits_entries(path):
    """N x K of the ``logits`` array of an .npz (logits_shape); ``None`` when unknown."""
    shape = logits_shape(path)
    return None if shape is None else shape[0] * shape[1]


def calibrate_gpu(wildcards, input):
    """GPUs of a calibrate job: 1 when the workflow has a GPU (GPUS) and the logits have at
    least CALIBRATE_GPU_MIN_ENTRIES entries, else 0 (unknown size: 0)."""
    entries = logits_entries(input.logits)
    return int(bool(GPUS) and entries is not None and entries >= CALIBRATE_GPU_MIN_ENTRIES)


def calibrate_device(wildcards, resources):
    """``calbench calibrate --device`` of a job: cuda when it holds a GPU (its gpu resource, as
    calibrate_gpu or a profile's set-resources gave it), else cpu."""
    return "cuda" if getattr(resources, "gpu", 0) else "cpu"


def local_cores():
    """--cores of a run whose jobs share this machine; ``None`` on a cluster (each job gets its
    own allocation), inside a cluster job, or outside Snakemake."""
    try:
        wf = workflow
    except NameError:  # the perf scripts exec this file without a workflow
        return None
    try:
        if not wf.local_exec or wf.remote_exec:
            return None
        cores = wf.global_resources["_cores"]
    except (AttributeError, KeyError, TypeError):
        return None
    cores = getattr(cores, "value", cores)
    return cores if isinstance(cores, int) and not isinstance(cores, bool) and cores > 0 else None


def calibrate_threads(wildcards, input):
    """Threads of a calibrate job: 1 up to CALIBRATE_ONE_THREAD_ENTRIES logit entries, one more
    per CALIBRATE_ENTRIES_PER_THREAD above, at most CALIBRATE_MAX_THREADS and, on a local
    machine, at most CALIBRATE_CORES_SHARE of --cores (local_cores); 1 for a job on the GPU (calibrate_gpu), whose CPU work is single-threaded, and
    for fewer than CALIBRATE_MIN_THREADED_CLASSES classes. Unknown size (logits not made
    yet): 1."""
    shape = logits_shape(input.logits)
    if shape is None or shape[1] < CALIBRATE_MIN_THREADED_CLASSES:
        return 1
    entries = shape[0] * shape[1]
    if entries <= CALIBRATE_ONE_THREAD_ENTRIES:
        return 1
    if calibrate_gpu(wildcards, input):
        return 1
    extra = -(-(entries - CALIBRATE_ONE_THREAD_ENTRIES) // CALIBRATE_ENTRIES_PER_THREAD)
    cores = local_cores()
    cap = CALIBRATE_MAX_THREADS if cores is None else int(cores * CALIBRATE_CORES_SHARE)
    return max(1, min(CALIBRATE_MAX_THREADS, cap, 1 + extra))


def calibrate_mem_mb(wildcards, input):
    """Memory (MB) of a calibrate job on N x K logits: CALIBRATE_MEM_MARGIN times
    CALIBRATE_BASE_MB plus CALIBRATE_BYTES_PER_SAMPLE per sample, CALIBRATE_BYTES_PER_ENTRY per
    logit entry and CALIBRATE_BYTES_PER_CLASS_PAIR per K^2; unknown size: 4000 MB (the rule's
    former fixed figure; Snakemake sizes the job again once its logits exist)."""
    shape = logits_shape(input.logits)
    if shape is None:
        return 4000
    return mem_mb_of(*shape)


def mem_mb_of(n, k):
    """calibrate_mem_mb of N x K logits."""
    extra = (
        n * CALIBRATE_BYTES_PER_SAMPLE + n * k * CALIBRATE_BYTES_PER_ENTRY
        + k * k * CALIBRATE_BYTES_PER_CLASS_PAIR
    )
    return math.ceil(CALIBRATE_MEM_MARGIN * (CALIBRATE_BASE_MB + extra / 1e6))


# --- batches of small models -------------------------------------------------------------------
# A calibrate job of a small model is mostly fixed cost: the process's start-up and imports
# (~2-4 s: numpy, scipy, torch when a scaling calibrator needs it, matplotlib) against a second or
# two of fitting (perf/bench_small_experiments.py). Models whose logits have at most
# CALIBRATE_BATCH_MAX_ENTRIES entries are calibrated in batches of at most
# CALIBRATE_BATCH_MAX_MODELS models of one dataset: one job, one process (`calbench calibrate`
# with one value per model of each per-model option), so the start-up is paid once per batch, and
# a cluster gets one job per batch instead of one per model. Every file keeps its per-model path
# and its bytes (the verb runs each model as a job of its own would). Membership is decided from
# the config alone, before anything runs, so that it is the same on every run: a model's size is
# read from the header of its own predictions file when the config names one that exists (a
# `logits_folder:` study, `logits.local_path`, a `mirrors:` directory) and is an .npz, or, for a
# `calarena:` study, from the benchmark's experiment index (cal_size + test_size, n_classes); a
# model whose size is unknown before the run (trained, downloaded from elsewhere, .pt or other
# formats) gets a job of its own, sized as above.

#: logit entries (N x K) up to which a model is calibrated in a batch: 2^17 = 131,072, e.g.
#: 2,000 x 65 or 13,000 x 10 (a job of that size fits in ~5 s, its start-up ~3 s)
CALIBRATE_BATCH_MAX_ENTRIES = 1 << 17
#: models of one batch at most: the start-up is then 1/8 of a job per model, and 100 models make
#: 13 batches, enough to keep 2 to 16 cores busy
CALIBRATE_BATCH_MAX_MODELS = 8


def source_shape(model, entry, mirrors=()):
    """(N, K) of ``model``'s predictions as the config gives them, before anything runs: the
    header of its local .npz file (``logits.local_path`` or a ``mirrors:`` directory,
    calbench.logits_sources.fetch.local_copy); ``None`` when there is none or it is not an .npz
    with a ``logits`` array."""
    if entry.get("source") != "logits":
        return None
    from calbench.logits_sources.fetch import local_copy

    try:
        found = local_copy(model, entry, mirrors)
    except (ValueError, OSError):
        return None
    if found is None or Path(found[0]).suffix != ".npz":
        return None
    return logits_shape(found[0])


def calarena_shapes(config):
    """(N, K) of each model of the config's ``calarena:`` section, from the benchmark's index
    (its ``cal_size + test_size`` and ``n_classes``, calbench.reference.calarena.experiments);
    ``{}`` without the section or an index that lacks the sizes."""
    section = config.get("calarena")
    if not isinstance(section, dict):
        return {}
    from calbench.reference.calarena import experiments, model_slug

    try:
        rows = experiments(section["benchmark"], section.get("experiments_csv"))
    except (KeyError, ValueError, OSError):
        return {}
    return {
        model_slug(r["dataset"], r["model"]): (r["n_samples"], r["n_classes"])
        for r in rows
        if r["n_samples"] is not None
    }


def calibrate_batches(models, shapes, max_entries=None, max_models=None):
    """``{name: [model, ...]}``: the batches of small models (see above). ``models`` maps each
    model to its dataset, in config order; ``shapes`` each model to its (N, K) or ``None``.
    Models with at most ``max_entries`` (CALIBRATE_BATCH_MAX_ENTRIES) entries are grouped per
    dataset, in config order, ``max_models`` (CALIBRATE_BATCH_MAX_MODELS) a batch, the last one
    the rest (a model added at the end changes only the last batch); batches are named
    ``<dataset>__<i>`` (i from 0); a batch of one model is no batch (its model keeps a job of its
    own)."""
    max_entries = CALIBRATE_BATCH_MAX_ENTRIES if max_entries is None else max_entries
    max_models = CALIBRATE_BATCH_MAX_MODELS if max_models is None else max_models
    small = {}
    for model, dataset in models.items():
        shape = shapes.get(model)
        if shape is not None and shape[0] * shape[1] <= max_entries:
            small[model] = dataset
    return model_batches(small, max_models)


def model_batches(models, max_models):
    """``{"<dataset>__<i>": [model, ...]}``: ``models`` (each mapped to its dataset, in config
    order) grouped per dataset, in config order, ``max_models`` a batch, the last one the rest;
    a batch of one model is left out (its model keeps a job of its own)."""
    per_dataset = {}
    for model, dataset in models.items():
        per_dataset.setdefault(dataset, []).append(model)
    batches = {}
    for dataset, members in per_dataset.items():
        for i in range(0, len(members), max_models):
            chunk = members[i : i + max_models]
            if len(chunk) > 1:
                batches[f"{dataset}__{i // max_models}"] = chunk
    return batches


# --- batches of imported models ----------------------------------------------------------------
# An import job of a small file is all start-up: the process and its imports (numpy, calbench;
# ~0.5-1 s) against a few milliseconds of reading and writing (perf/bench_small_experiments.py
# --imports-only). Models whose predictions need no download of their own (imported_in_batch)
# are imported in batches of at most IMPORT_BATCH_MAX_MODELS models of one dataset, one job and
# process per batch (`calbench import-logits` with one value per model of each per-model
# option; rules import_logits_batch_<dataset>__<i> and import_logits_presplit_batch_<dataset>__<i>
# in workflow/rules/logits.smk), each model's files at its own path and with its own bytes.
# Membership comes from the config alone, in config order: a model added at the end changes only
# the last batch. A batch's job reruns as a whole when one of its models' inputs changes, and
# rewrites each of its models' files (same bytes): their calibrate jobs rerun and copy their
# calibrators back from results/calibrate_cache/.

#: models of one import batch at most: 100 files make 7 jobs instead of 100, enough to keep 2 to
#: 8 cores busy; a batch of tiny files takes about one process's start-up
IMPORT_BATCH_MAX_MODELS = 16


def imported_in_batch(model, entry, mirrors=()):
    """Whether ``model``'s import joins a batch: a ``source: logits`` model whose predictions
    need no download of their own, a local copy the config names (``logits.local_path``, a
    ``logits_folder:`` file, a ``mirrors:`` directory; calbench.logits_sources.fetch.local_copy)
    or a Hugging Face file, which the models reading it share (CalArena's benchmark file:
    calbench.logits_sources.entry.model_dir). A model downloading a file of its own (the
    coursework's, Kängsepp's pickles) keeps a job of its own: that job is its download, which
    jobs of their own run side by side, where a batch would queue them in one job's runtime. A
    local copy that is not there: no batch (its own job reports it)."""
    if entry.get("source") != "logits":
        return False
    if (entry.get("logits") or {}).get("huggingface"):
        return True
    from calbench.logits_sources.fetch import local_copy

    try:
        return local_copy(model, entry, mirrors) is not None
    except (ValueError, OSError):
        return False


def import_batches(models, presplit=(), max_models=None):
    """``{rule: {"<dataset>__<i>": [model, ...]}}``: the import batches (see above), per rule
    each model of no batch would use: ``import_logits``, and ``import_logits_presplit`` for the
    models in ``presplit`` (their file brings its own split, which they also write). ``models``
    maps each model imported in a batch (imported_in_batch) to its dataset, in config order;
    grouped per rule and dataset by model_batches, ``max_models`` (IMPORT_BATCH_MAX_MODELS) a
    batch."""
    max_models = IMPORT_BATCH_MAX_MODELS if max_models is None else max_models
    kinds = {"import_logits": {}, "import_logits_presplit": {}}
    for model, dataset in models.items():
        kinds["import_logits_presplit" if model in presplit else "import_logits"][model] = dataset
    return {rule: model_batches(members, max_models) for rule, members in kinds.items()}
