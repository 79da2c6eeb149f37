# Helpers of the logits stage (workflow/rules/logits.smk): functions and constants only,
# kept apart from the rules as Snakemake's linter asks; shared helpers live in common.smk.
def _names_regex(names):
    """A wildcard constraint matching exactly ``names`` (slugs), or nothing when empty."""
    return "|".join(sorted(names, key=len, reverse=True)) if names else "(?!)"


def _as_list(value):
    """An input function's value as a list (a path, or a list of paths)."""
    return [value] if isinstance(value, str) else list(value)


STRICT = "--strict-checksums" if config.get("strict_checksums") else ""


def split_inputs(wildcards):
    """What the dataset's study split is made of: the split is a function of N (and the seed),
    recorded with the dataset's labels and sample order, against which each model's logits are
    checked when read with it (calbench.split.load_split). So its inputs are the dataset's own,
    never a model's logits: a dataset the workflow reads (some model's logits are computed by
    cache_logits) gives its download manifest and its entry's spec (limit, pinned files), and
    the split job reads the labels and order from the data (calbench.split.split_dataset).
    Adding, retraining or re-caching a model leaves the split as it is; a changed limit
    rebuilds it. A dataset of imported files only (source: logits) has no data but its files:
    its split is made from its first such model's file, a plain input (no ancient(): Snakemake 9
    leaves a job out of the plan when the producer of an ancient() input reruns, so a changed
    file would leave a stale split for one run). Re-importing that file reruns the split and the
    dataset's calibrate jobs, which restore every calibrator from results/calibrate_cache/ when
    N and the labels are unchanged (the split's bytes then are too). Pre-split models
    (logits.split: file) bring their own split and are not counted."""
    models = [m for m in models_of(wildcards.dataset) if not presplit(m)]
    if any(model_cfg(m)["source"] != "logits" for m in models):
        return {
            "manifest": f"resources/datasets/{wildcards.dataset}/manifest.json",
            "dataset": dataset_spec(wildcards),
        }
    return {"logits": f"results/logits/{wildcards.dataset}/{models[0]}.npz"}


def split_args(wildcards, input):
    """The split verb's source: the dataset read from its folder, or the imported file."""
    if "logits" in input.keys():
        return shell_args("--logits", input.logits)
    source = shell_args(
        "--dataset", wildcards.dataset, "--data-root", data_root(wildcards.dataset),
        "--dataset-spec", f"@{input.dataset}",
    )
    return f"{source} {limit_arg(wildcards)}"


#: digests of the local copies import_logits reads, keyed by path and the file's stat
#: (size, mtime, ctime, inode): a DAG build hashes only files that changed since the last
LOCAL_DIGESTS = Path(".snakemake/calbench/local_digests.json")


def _stat_key(path):
    st = Path(path).stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _local_digest(path, cache):
    """sha256 of ``path``, through ``cache`` (``{abspath: [stat key..., sha256]}``)."""
    from calbench.io import file_digest

    key, where = _stat_key(path), str(Path(path).absolute())
    hit = cache.get(where)
    if not (isinstance(hit, list) and hit[:-1] == key):
        cache[where] = hit = [*key, file_digest(path)]
    return hit[-1]


def local_logits_input(wildcards):
    """The local copy a ``source: logits`` model's import reads (``logits.local_path``, else a
    ``mirrors:`` directory holding it; calbench.logits_sources.fetch.local_copy), as an input:
    ``results/inputs/logits/{dataset}/{model}.sha256`` with the file's (and its targets.txt's)
    SHA-256, rewritten when they change. Replacing the file, whatever its mtime, reruns exactly
    the import and what depends on it; a file to be downloaded gives no input (its pin checks
    it). A lookup that fails gives none either: the job reports the problem."""
    from calbench.logits_sources.fetch import local_copy

    try:
        found = local_copy(wildcards.model, model_cfg(wildcards.model), config.get("mirrors") or [])
    except (ValueError, OSError):
        found = None
    if found is None:
        return []
    try:
        cache = json.loads(LOCAL_DIGESTS.read_text())
    except (OSError, ValueError):
        cache = {}
    cache = cache if isinstance(cache, dict) else {}
    files = {"logits": found[0], "targets": found[1]}
    text = "".join(
        f"{_local_digest(p, cache)}  {role}\n" for role, p in files.items() if p is not None
    )
    write_if_changed(LOCAL_DIGESTS, json.dumps(cache, sort_keys=True))
    return write_if_changed(f"results/inputs/logits/{wildcards.dataset}/{wildcards.model}.sha256", text)
