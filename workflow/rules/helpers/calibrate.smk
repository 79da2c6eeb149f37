# Helpers of the calibrate stage (workflow/rules/calibrate.smk): functions and constants only,
# kept apart from the rules as Snakemake's linter asks; shared helpers live in common.smk.
from calbench.protocol import CalibrateSpec  # the one builder (perf/ uses it too)


def per_calibrator(pattern):
    """``pattern`` (with ``{calibrator}``) for every configured calibrator; the model wildcards stay."""
    return [pattern.replace("{calibrator}", c) for c in config["calibrators"]]


def per_calibrator_plots(pattern):
    """:func:`per_calibrator` of a diagram's ``pattern``, or none when the study draws each
    model's grid alone (``plots.per_calibrator: false``)."""
    return per_calibrator(pattern) if config["plots"].get("per_calibrator", True) else []


def calibrate_spec():
    """The calibrate step's slice of the config as a file (calbench.protocol.CalibrateSpec, with
    the keys of calbench.calibrate_spec.CALIBRATE_SPEC): every calibrator, the evaluation, the
    comparisons and the diagrams' settings."""
    return spec_file("calibrate", CalibrateSpec.from_config(config).to_json())


def batch_splits(dataset, members):
    """The split of each model of a batch (split_file), in the batch's order."""
    return [split_file(SimpleNamespace(dataset=dataset, model=m)) for m in members]


def batch_mem_mb(members):
    """Memory (MB) of a batch's job: that of its largest model (mem_mb_of of its source shape)."""
    known = calarena_shapes(config)
    shapes = [
        known.get(m) or source_shape(m, config["models"][m], config.get("mirrors") or [])
        for m in members
    ]
    return max(mem_mb_of(*shape) for shape in shapes)
