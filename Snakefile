# calbench workflow: the table of contents. Helpers and wildcard constraints live in
# workflow/rules/common.smk; one .smk per stage; see docs/workflow.md.
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

min_version("9.0")


# config.yaml is the default study; `--configfile other.yaml` replaces it instead of merging into it.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


# One validator, before any job runs: the schema (a typo or a wrong type names the key, in one
# line: calbench.config_check.schema_error_line), then one semantic check in the library (names
# the library must know: calibrators and their params, metrics, losses, architectures; and
# references between sections): calbench.config_check.validate.
from calbench.config_check import check_config_files, schema_error_line, validate as check_config
from calbench.study_config import complete as complete_study_config

try:
    # Snakemake parsed the config file(s) itself, with PyYAML's safe_load; parse them again with
    # calbench's one YAML loader first (calbench._yaml: duplicate keys, `on:` as a key, alias
    # bombs), before anything walks the config
    check_config_files([str(p) for p in workflow.configfiles] or ["config.yaml"])
    # what the config leaves out: the models of calarena: and logits_folder:, study, datasets,
    # and the default study's calibrators (config.yaml's, written once there): calbench.study_config
    complete_study_config(config, workflow.basedir)
    validate(config, "workflow/schemas/config.schema.yaml")
    check_config(config, schema=Path(workflow.basedir) / "workflow/schemas/config.schema.yaml")
except WorkflowError as exc:
    raise WorkflowError(schema_error_line(exc)) from None
except ValueError as exc:
    raise WorkflowError(str(exc)) from None


# `snakemake --report report.zip`: workflow description; rules mark their key outputs report()
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/helpers/data.smk"
include: "workflow/rules/helpers/logits.smk"
include: "workflow/rules/helpers/calibrate.smk"
include: "workflow/rules/helpers/sizing.smk"
include: "workflow/rules/helpers/report.smk"
include: "workflow/rules/helpers/shift.smk"
include: "workflow/rules/helpers/replication.smk"
include: "workflow/rules/helpers/check.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/logits.smk"
include: "workflow/rules/calibrate.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/shift.smk"
include: "workflow/rules/replication.smk"
include: "workflow/rules/check.smk"


rule all:
    input:
        "reports/report.html",
        all_tables(),
        all_plots(),
        replication_targets(),
        shift_targets(),
    default_target: True
