# Helpers of the check stage (workflow/rules/check.smk): functions only, kept apart from the
# rules as Snakemake's linter asks; shared helpers live in common.smk.


def arena_calibrators():
    """``{method: params}`` of the configured calibrators whose method is implemented twice or
    more among them (calbench's own and adapters whose ``same_as`` names it:
    calbench.arena.implementation_groups), in config order; the first entry of a
    method gives its hyperparameters. Empty when the config has no such pair, e.g. the default
    config: then no comparison runs and the report has no arena section."""
    from calbench.arena import implementation_groups

    params = {}
    for c, entry in config["calibrators"].items():
        params.setdefault(calibrator_method(c), (entry or {}).get("params") or {})
    groups = implementation_groups(list(params))
    return {n: params[n] for n in params if any(n in v for v in groups.values())}


def arena_metrics():
    """The metrics compared between implementations: the report's table metrics."""
    return config["report"]["table_metrics"]


def arena_spec():
    """The hyperparameters of the compared implementations as a spec file (``--params @file``)."""
    return spec_file("compare_implementations", json.dumps(arena_calibrators()))


def arena_targets(ext="csv"):
    """``results/arena/{dataset}/{model}.<ext>`` of every model when the config compares
    implementations, else none."""
    return model_paths(f"results/arena/{{dataset}}/{{model}}.{ext}") if arena_calibrators() else []
