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
    step that reads logits with the split checks that they agree (N, sample order)."""
    from calbench.split import split_made_from

    models = [m for m in models_of(wildcards.dataset) if not presplit(m)]
    candidates = [f"results/logits/{wildcards.dataset}/{m}.npz" for m in models]
    recorded = split_made_from(f"results/split/{wildcards.dataset}/split.npz")
    return ancient(recorded if recorded in candidates else candidates[0])
