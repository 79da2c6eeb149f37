# Helpers of the logits stage (workflow/rules/logits.smk): functions and constants only,
# kept apart from the rules as Snakemake's linter asks; shared helpers live in common.smk.
def _names_regex(names):
    """A wildcard constraint matching exactly ``names`` (slugs), or nothing when empty."""
    return "|".join(sorted(names, key=len, reverse=True)) if names else "(?!)"


IMPORTED_MODELS = _names_regex(
    [m for m, v in config["models"].items() if v["source"] == "logits" and not presplit(m)]
)
PRESPLIT_MODELS = _names_regex([m for m in config["models"] if presplit(m)])
STRICT = "--strict-checksums" if config.get("strict_checksums") else ""


def split_source(wildcards):
    """The split is a function of N only. It is computed from the logits of one model of the
    dataset that takes the study split, marked ancient: retraining or adding models does not
    rebuild it (and so does not rerun every other model's steps); a change of the dataset entry
    (e.g. limit) does, through its spec. The model is the one the existing split records it was
    made from (calbench.split.split_made_from) while that model is configured, else the
    dataset's first such model: adding a model in front of the others keeps the split. Every
    step that reads logits with the split checks that they agree (N, sample order).

    ancient() only while the split is at least as new as its other inputs (the dataset entry's
    spec, the split code): Snakemake does not look at the inputs of a job downstream of one that
    reruns, so when a change of the dataset entry (e.g. limit) also reruns cache_logits, an
    ancient edge would leave the old split in place (a stale-split failure, then success on the
    second run). A stale split takes the logits as a plain input and is rebuilt after them."""
    from calbench.split import split_made_from

    models = [m for m in models_of(wildcards.dataset) if not presplit(m)]
    candidates = [f"results/logits/{wildcards.dataset}/{m}.npz" for m in models]
    split = Path(f"results/split/{wildcards.dataset}/split.npz")
    recorded = split_made_from(split)
    logits = recorded if recorded in candidates else candidates[0]
    others = [dataset_spec(wildcards), lib_sources("split")]
    if split.is_file() and all(Path(p).stat().st_mtime <= split.stat().st_mtime for p in others):
        return ancient(logits)
    return logits


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
