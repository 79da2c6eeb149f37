# What the rules share: wildcard constraints, code and config inputs, config slices and the
# path functions more than one stage uses. No rules, nothing run at parse time beyond writing
# the small input files below. Study-specific helpers live next to their stage's rules.
import importlib.util
import json
import os
import shlex
import shutil
from pathlib import Path
from types import SimpleNamespace

SLUG = "[a-z0-9][a-z0-9_]*"


def shell_args(*args):
    """The one way a value reaches a rule's ``shell:`` command other than as a Snakemake file or
    a slug wildcard: every argument shell-quoted (:func:`shlex.quote`) and joined by spaces;
    ``None`` left out. A config value (a data root, a mirror, a metric list, a number) is data:
    ``$(...)``, backticks, ``;``, quotes and newlines in it reach the verb as one argument and
    never run (tests/workflow/test_shell_safety.py). Larger slices of the config travel as spec
    files (:func:`spec_file`, ``--spec @file``). Rules interpolate only ``{input.*}``,
    ``{output.*}``, ``{log}``, ``{threads}``, ``{wildcards.*}`` (slugs) and ``{params.*}`` built
    with this function."""
    return " ".join(shlex.quote(str(a)) for a in args if a is not None)


def portable_path(path):
    """``path`` relative to the working directory when it lies inside it, else absolute: the
    workflow's own files (the template, a packaged table) as inputs that do not change when the
    study folder moves (an absolute path would rerun the rules that read them, and put this
    machine's layout into the report). Outside the folder (``--directory``, an installed
    package) the absolute path stays put when the folder moves."""
    path = Path(path).absolute()
    cwd = Path.cwd()
    return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)


wildcard_constraints:
    dataset=SLUG,
    model=SLUG,
    calibrator=r"(?!grid\b)[a-z0-9][a-z0-9_]*",
    corruption=SLUG,


# --- code inputs: the calbench library files each rule runs ---------------------------------
# A rule's code manifest is results/code/<verb>.sha256, the digests of its code inputs (the
# library files its verb executes), derived from the code (calbench._sources, read with ast; cached in .snakemake/), so
# an edit reruns exactly the jobs that run the edited file (tests/workflow/test_lib_sources.py).
from calbench._sources import all_verb_sources, code_manifest_text
from calbench.io import bytes_digest
from calbench.plugin_inputs import plugin_code_inputs

LIB_ROOT = Path(importlib.util.find_spec("calbench").submodule_search_locations[0])
VERB_SOURCES = all_verb_sources(cache=".snakemake/calbench/lib_sources.json")


def write_if_changed(path, text):
    """Write ``text`` to ``path`` atomically unless it already holds it (an unchanged file keeps
    its mtime, so the steps reading it do not rerun); return the path as a string."""
    path = Path(path)
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return str(path)


def lib_sources(verb):
    """The code manifest of ``calbench <verb>`` (the verb as typed, e.g. ``calibrate``)."""
    if verb not in VERB_SOURCES:
        raise ValueError(f"lib_sources({verb!r}): calbench has no verb {verb!r}; verbs: {sorted(VERB_SOURCES)}")
    # plug-ins the config uses (another package's files, and the modules of its folder they
    # import; loaded by the config check at start-up) are code inputs of the verbs running them
    paths = VERB_SOURCES[verb] + plugin_code_inputs(config, verb)
    return write_if_changed(f"results/code/{verb}.sha256", code_manifest_text(paths))


# --- config inputs: slices of the config as files --------------------------------------------
def spec_file(name, text):
    """``results/specs/<name>-<sha256 prefix>.json`` holding ``text``: a step reads its slice of
    the config from a file (``--spec <path>`` / ``@<path>``), never from a command-line blob. A
    changed slice is a new input file, so exactly the steps reading it rerun."""
    digest = bytes_digest(text)[:16]
    return write_if_changed(f"results/specs/{name}-{digest}.json", text)


#: Model entry fields that only label or check results (tables, reference join, accuracy check):
#: left out of the spec the download / train / logits rules read, so editing them reruns only
#: the steps that read them.
LABEL_FIELDS = frozenset({"display", "group", "expected_acc", "study_key"})


def dataset_cfg(dataset):
    return config["datasets"][dataset]


def model_cfg(model):
    return config["models"][model]


def model_spec(wildcards):
    """The model's own config entry, minus its labels, as a spec file (editing one model reruns
    only that model's steps)."""
    entry = {k: v for k, v in model_cfg(wildcards.model).items() if k not in LABEL_FIELDS}
    return spec_file(f"model_{wildcards.model}", json.dumps(entry, sort_keys=True))


def dataset_spec(wildcards):
    """The dataset's own config entry, minus its display name, as a spec file."""
    entry = {k: v for k, v in dataset_cfg(wildcards.dataset).items() if k != "display"}
    return spec_file(f"dataset_{wildcards.dataset}", json.dumps(entry, sort_keys=True))


#: Dataset entry fields the download does not read: the samples the study evaluates (``limit``)
#: and the label. Left out of download_dataset's spec, so that editing them does not rewrite the
#: manifest, which would retrain every model of the dataset.
NOT_DOWNLOADED = frozenset({"display", "limit"})


def download_spec(wildcards):
    """The dataset's entry as download_dataset reads it (:data:`NOT_DOWNLOADED` left out)."""
    entry = {k: v for k, v in dataset_cfg(wildcards.dataset).items() if k not in NOT_DOWNLOADED}
    return spec_file(f"download_{wildcards.dataset}", json.dumps(entry, sort_keys=True))


# --- models and their files ------------------------------------------------------------------
#: One GPU for the training, logits and shift-logits jobs when this machine has one; profiles
#: (profiles/slurm) set it per rule for a cluster.
GPUS = 1 if shutil.which("nvidia-smi") else 0


def models_of(dataset):
    return [m for m, v in config["models"].items() if v["dataset"] == dataset]


def model_paths(pattern):
    """``pattern`` formatted for every configured model (keys: dataset, model)."""
    return [pattern.format(dataset=v["dataset"], model=m) for m, v in config["models"].items()]


def data_root(dataset):
    return dataset_cfg(dataset).get("root") or f"resources/datasets/{dataset}"


def data_root_arg(wildcards):
    """The dataset's folder (``datasets.<slug>.root``), quoted for the shell."""
    return shell_args(data_root(wildcards.dataset))


def limit_arg(wildcards):
    limit = dataset_cfg(wildcards.dataset).get("limit")
    return shell_args("--limit", limit) if limit else ""


def mirror_args(mirrors):
    """``--mirror DIR`` for each of ``mirrors``, quoted for the shell."""
    return " ".join(shell_args("--mirror", m) for m in mirrors)


def global_mirror_args(wildcards=None):
    """``--mirror DIR`` for every top-level ``mirrors:`` directory (local copies of downloads)."""
    return mirror_args(config.get("mirrors") or [])


def weights_input(wildcards):
    """What cache_logits and shift_logits load: our trained model, or a downloaded checkpoint."""
    if model_cfg(wildcards.model)["source"] == "train":
        return f"results/models/{wildcards.dataset}/{wildcards.model}/model.pt"
    return f"resources/checkpoints/{wildcards.dataset}/{wildcards.model}/checkpoint.pt"


def presplit(model):
    """True for a ``source: logits`` model whose file carries its own validation/test split
    (``logits.split: file``; Kängsepp's pickles): its steps read
    ``results/split/{dataset}/{model}.npz`` instead of the dataset's study split."""
    from calbench.logits_sources import is_presplit

    v = model_cfg(model)
    return v["source"] == "logits" and is_presplit(v)


def split_file(wildcards):
    """The split a model's calibration, shift and sweep steps use (see :func:`presplit`)."""
    if presplit(wildcards.model):
        return f"results/split/{wildcards.dataset}/{wildcards.model}.npz"
    return f"results/split/{wildcards.dataset}/split.npz"


def calibrator_method(calibrator):
    """The registry name (``calbench.calibrators.REGISTRY``) of config calibrator ``calibrator``."""
    return (config["calibrators"][calibrator] or {}).get("method", calibrator)


def calibrator_files(wildcards):
    """Every fitted calibrator JSON of one model, in config order."""
    return [
        f"results/calibrators/{wildcards.dataset}/{wildcards.model}/{c}.json"
        for c in config["calibrators"]
    ]
