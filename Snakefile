# calbench workflow: the table of contents. Helpers and wildcard constraints live in
# workflow/rules/common.smk; one .smk per stage; see docs/workflow.md.
from snakemake.utils import min_version, validate

min_version("9.0")


# config.yaml is the default study; `--configfile other.yaml` replaces it instead of merging into it.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


# Fail before any job runs: a typo or a wrong type names the key (additionalProperties: false).
validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/logits.smk"
include: "workflow/rules/calibrate.smk"
include: "workflow/rules/plots.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/replication.smk"


rule all:
    input:
        "reports/report.html",
        all_tables(),
        all_plots(),
        replication_targets(),
    default_target: True
