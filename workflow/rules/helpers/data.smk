# Helpers of the data stage (workflow/rules/data.smk): functions and constants only,
# kept apart from the rules as Snakemake's linter asks; shared helpers live in common.smk.
def download_args(wildcards):
    d = dataset_cfg(wildcards.dataset)
    args = [shell_args("--dataset", d.get("name", wildcards.dataset))]
    args.append(mirror_args([*d.get("mirrors", []), *(config.get("mirrors") or [])]))
    if not d.get("default_mirrors", True):
        args.append("--no-default-mirrors")
    return " ".join(a for a in args if a)
