# Helpers of the calibrate stage (workflow/rules/calibrate.smk): functions and constants only,
# kept apart from the rules as Snakemake's linter asks; shared helpers live in common.smk.
def per_calibrator(pattern):
    """``pattern`` (with ``{calibrator}``) for every configured calibrator; the model wildcards stay."""
    return [pattern.replace("{calibrator}", c) for c in config["calibrators"]]


def calibrate_spec():
    """The calibrate step's slice of the config as a file (calbench.evaluation.CALIBRATE_SPEC):
    every calibrator, the evaluation, the comparisons and the diagrams' settings."""
    ev = config["evaluation"]
    spec = {
        "calibrators": {
            c: {"method": calibrator_method(c), "params": (e or {}).get("params", {}),
                "display": str((e or {}).get("display", c))}
            for c, e in config["calibrators"].items()
        },
        "evaluation": {k: ev.get(k) for k in
                       ("metrics", "halves", "n_bootstrap", "level", "seed", "ci_halves", "ci_metrics")},
        "compare": {k: config["compare"][k] for k in
                    ("metrics", "baselines", "n_bootstrap", "select_folds", "select_exclude")},
        "plots": {k: config["plots"][k] for k in ("n_bins", "style")},
    }
    return spec_file("calibrate", json.dumps(spec, sort_keys=False))
