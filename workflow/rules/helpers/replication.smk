# Helpers of the replication stage (workflow/rules/replication.smk): functions and constants only,
# kept apart from the rules as Snakemake's linter asks; shared helpers live in common.smk.
PACKAGED_REFERENCES = "coursework_2021|calarena_cv_multiclass"
REPLICATION_OUTPUTS = [
    "results/replication/replication.html",
    "results/replication/tables.md",
    "results/replication/cells.csv",
    "results/replication/accuracy_check.csv",
]


def replication_spec():
    """JSON slice of the config for `calbench replication-tables` (calbench.report.spec)."""
    return json.dumps(report_specs.replication_spec(config))


def replication_targets():
    """The replication outputs when the config names a reference (else nothing), plus the Guo /
    Kull study's when the config has report.guo_kull."""
    files = REPLICATION_OUTPUTS if config["report"].get("reference") else []
    return files + guo_kull_targets()


# --- the Guo et al. 2017 / Kull et al. 2019 study (report.guo_kull) --------------------------
GUO_KULL_OUTPUTS = [
    "results/guo_kull/guo_kull.html",
    "results/guo_kull/tables.md",
    "results/guo_kull/cells.csv",
    "results/guo_kull/summary.csv",
]
SWEEP_FIGURES = ("reliability.png", "ece_vs_temperature.png")


def guo_kull_cfg():
    return config["report"].get("guo_kull") or {}


def guo_kull_targets():
    return GUO_KULL_OUTPUTS if config["report"].get("guo_kull") else []


def guo_kull_sweeps(names):
    """results/guo_kull/sweep/{dataset}/{model}/<name> of every model, for each of ``names``."""
    return [
        f"results/guo_kull/sweep/{v['dataset']}/{m}/{name}"
        for m, v in config["models"].items()
        for name in names
    ]


def guo_kull_summary_calibrators():
    g = guo_kull_cfg()
    return g.get("summary_calibrators") or [c for c in ("uncalibrated", "ts") if c in config["calibrators"]]


def guo_kull_summary_inputs(wildcards):
    """The summary model's logits, split and calibrator JSONs (empty without summary_model)."""
    m = guo_kull_cfg().get("summary_model")
    if not m:
        return {}
    d = model_cfg(m)["dataset"]
    return {
        "summary_logits": f"results/logits/{d}/{m}.npz",
        "summary_split": split_file(SimpleNamespace(dataset=d, model=m)),
        "summary_calibrators": [
            f"results/calibrators/{d}/{m}/{c}.json" for c in guo_kull_summary_calibrators()
        ],
    }


def guo_kull_summary_args(wildcards, input):
    if not hasattr(input, "summary_logits"):
        return ""
    return shell_args(
        "--summary-logits", input.summary_logits, "--summary-split", input.summary_split,
        "--summary-calibrators", *input.summary_calibrators,
    )


def guo_kull_spec():
    """JSON slice of the config for `calbench guo-kull-tables` (calbench.report.spec)."""
    return json.dumps(report_specs.guo_kull_spec(config))


def sweep_args():
    """--temperatures / --curve of temperature-sweep (report.guo_kull)."""
    g = guo_kull_cfg()
    args = []
    if g.get("sweep_temperatures"):
        args += ["--temperatures", ",".join(str(t) for t in g["sweep_temperatures"])]
    if g.get("curve"):
        c = g["curve"]
        args += ["--curve", f"{c['start']},{c['stop']},{c['num']}"]
    return shell_args(*args)


def sweep_calibrator(wildcards):
    """The fitted temperature-scaling JSON the ECE-vs-T curve marks (when ts is configured)."""
    if "ts" not in config["calibrators"] or calibrator_method("ts") != "ts":
        return []
    return [f"results/calibrators/{wildcards.dataset}/{wildcards.model}/ts.json"]
