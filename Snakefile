# calbench workflow: the table of contents. Helpers and wildcard constraints live in
# workflow/rules/common.smk; one .smk per stage; see docs/workflow.md.
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config.yaml"


# Fail before any job runs: a typo or a wrong type names the key (additionalProperties: false).
validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/calibrate.smk"
include: "workflow/rules/plots.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        "reports/report.html",
        all_tables(),
        all_plots(),
    default_target: True
