"""The calibrate spec's keys and every default of its settings, once (no imports: the CLI's
parsers read them to build ``--help`` without loading the library).

:class:`calbench.protocol.CalibrateSpec` is the spec; the workflow's config schema
(``workflow/schemas/config.schema.yaml``) states the same ``default:`` values, which the
validated config carries into the spec file, the verbs ``evaluate`` and ``compare`` and their
library functions take theirs from here, and ``tests/test_protocol.py`` checks that the schema's,
the CLI's and the library's defaults agree.
"""

#: every default of the calibrate spec's ``evaluation``, ``compare`` and ``plots`` sections, in
#: the spec file's key order (``None``: every half / metric evaluated)
DEFAULTS = {
    "evaluation": {
        "metrics": (
            "accuracy", "ece", "mce", "cwece", "ece_ub", "ece_ub_mass", "cwece_ub", "ace",
            "ece_l2_mass", "nll", "nll_modern", "brier", "ks", "sbece", "dece", "debiased_ece",
            "marginal_ce",
        ),
        "halves": ("test", "val"),
        "n_bootstrap": 200,
        "level": 0.95,
        "seed": 0,
        "ci_halves": None,
        "ci_metrics": None,
        "scheme": "holdout",
        "folds": 5,
        "repeats": 3,
    },
    "compare": {
        "metrics": ("ece_ub", "cwece_ub", "nll", "brier"),
        "baselines": ("uncalibrated", "ts"),
        "n_bootstrap": 1000,
        "select_folds": 5,
        "select_exclude": (),
    },
    "plots": {"n_bins": 10, "style": "guo", "per_calibrator": True},
}  # fmt: skip

#: keys of the ``calibrate`` spec (the JSON file the workflow writes from the config) and of its
#: sections, in the file's order; every key is required, so a spec written by another version
#: fails by name (``calibrators``: ``{key: {"method", "params", "display"}}``)
CALIBRATE_SPEC = {"calibrators": None, **{s: tuple(keys) for s, keys in DEFAULTS.items()}}

#: the evaluation schemes: ``holdout`` (fit on the validation half, report the test half) and
#: ``crossfit`` (every labelled sample predicted out of fold, ``folds`` x ``repeats``)
SCHEMES = ("holdout", "crossfit")
#: the ``evaluation`` keys of the scheme: written to the spec file only for ``crossfit`` (a
#: ``holdout`` spec's file, and so its digest and whether its jobs rerun, is what it was before
#: the scheme existed); a spec file without them is ``holdout`` with these keys' defaults
SCHEME_KEYS = ("scheme", "folds", "repeats")
#: the ``plots`` keys written to the spec file only when they differ from their default (a spec
#: file without them, every spec written before they existed, has the defaults): whether each
#: calibrator's reliability diagram is drawn as its own PNG besides the model's grid (``False``
#: for studies of many small models, where the diagrams cost more than the fits; the report
#: then shows each model's grid)
PLOT_OPTIONAL_KEYS = ("per_calibrator",)
