# calbench workflow: the table of contents. Helpers and wildcard constraints live in
# workflow/rules/common.smk; one .smk per stage; see docs/workflow.md.
from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

min_version("9.0")


# config.yaml is the default study; `--configfile other.yaml` replaces it instead of merging into it.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


# Fail before any job runs: a typo or a wrong type names the key (additionalProperties: false),
# in one line (calbench.config_check.schema_error_line); names the schema cannot check (unknown
# calibrators, metrics, losses, architectures, calibrator params) fail in common.smk.
try:
    validate(config, "workflow/schemas/config.schema.yaml")
except WorkflowError as exc:
    from calbench.config_check import schema_error_line

    raise WorkflowError(schema_error_line(exc)) from None


# `snakemake --report report.zip`: workflow description; rules mark their key outputs report()
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/logits.smk"
include: "workflow/rules/calibrate.smk"
include: "workflow/rules/plots.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/shift.smk"
include: "workflow/rules/replication.smk"


rule all:
    input:
        "reports/report.html",
        all_tables(),
        all_plots(),
        replication_targets(),
        shift_targets(),
    default_target: True
