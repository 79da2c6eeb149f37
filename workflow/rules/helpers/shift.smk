# Helpers of the shift stage (workflow/rules/shift.smk): functions and constants only,
# kept apart from the rules as Snakemake's linter asks; shared helpers live in common.smk.
def shift_cfg():
    return config.get("shift") or None


def shift_models():
    """Models of the shift study (shift.models, default every model that reads images)."""
    cfg = shift_cfg()
    if not cfg:
        return []
    wanted = cfg.get("models") or [m for m, v in config["models"].items()]
    return [m for m in wanted if config["models"][m]["source"] != "logits"]


def shift_datasets():
    used = {model_cfg(m)["dataset"] for m in shift_models()}
    return [d for d in config["datasets"] if d in used]


def shift_corrupted(dataset):
    return [f"resources/corrupted/{dataset}/{c}.npy" for c in shift_cfg()["corruptions"]]


def shift_model_paths(pattern):
    return [pattern.format(dataset=model_cfg(m)["dataset"], model=m) for m in shift_models()]


def shift_targets():
    if not shift_models():
        return []
    return ["results/shift/section.json", "results/shift/mean_ece.csv"]


def shift_sections():
    """The report's extra section files (render_report --sections)."""
    return ["results/shift/section.json"] if shift_models() else []


def shift_report_spec():
    """Labels and the confidence level of the shift section (JSON, results/specs/shift_report.json)."""
    return json.dumps(report_specs.shift_report_spec(config), sort_keys=False)


def shift_archive_args(wildcards):
    """``--archive @<spec file>`` with the dataset's published-archive entry, if any."""
    entry = (shift_cfg().get("archives") or {}).get(wildcards.dataset)
    if not entry:
        return ""
    spec = spec_file(f"archive_{wildcards.dataset}", json.dumps(entry, sort_keys=True))
    return shell_args("--archive", f"@{spec}")


def shift_corrupt_inputs(wildcards):
    files = {"manifest": f"resources/datasets/{wildcards.dataset}/manifest.json"}
    if shift_cfg().get("source", "generate") == "published":
        files["archive"] = f"resources/corrupted/{wildcards.dataset}/published.tar"
    return files


def shift_corrupt_args(wildcards, input):
    if shift_cfg().get("source", "generate") == "published":
        return (
            shell_args("--source", "published", "--archive-file", input.archive)
            + " "
            + shift_archive_args(wildcards)
        )
    return shell_args("--source", "generate", "--seed", shift_cfg().get("seed", 0))


def evaluate_shift_args(wildcards):
    """The options of ``calbench evaluate-shift`` from the shift and evaluation sections and the
    cross-fitted selection of the compare section."""
    cfg = shift_cfg()
    return shell_args(
        "--metrics", ",".join(cfg.get("metrics", ["accuracy", "ece", "ece_ub", "nll"])),
        "--compare-metrics", ",".join(cfg.get("compare_metrics", ["ece_ub", "nll"])),
        "--n-bootstrap", cfg.get("n_bootstrap", 200),
        "--select-folds", config["compare"]["select_folds"],
        "--select-exclude", ",".join(config["compare"].get("select_exclude") or []),
        "--level", config["evaluation"]["level"],
        "--seed", config["evaluation"]["seed"],
    )
