"""CalArena's benchmarks as studies: one model entry per experiment, and CalArena's published
per-calibrator results as the workflow's reference table (ours / published / difference).

CalArena (Berta, Holzmüller, Bach & Jordan 2026; github.com/probkit/CalArena, Apache-2.0) runs
post-hoc calibrators on the predictions of its benchmarks' experiments
(:mod:`calbench.logits_sources.calarena` reads them) and publishes one CSV per calibrator,
``results/{benchmark}/{Calibrator}.csv``. Packaged here (README.md beside this file: source,
commit, licence): the experiment indexes ``experiments/{benchmark}-experiments.csv`` of the
``cv-binary``, ``cv-multiclass`` and ``imagenet-multiclass`` benchmarks, and the ``cv-multiclass``
results of the calibrators calbench also implements (:data:`METHODS`).

A config's ``calarena:`` section (:func:`expand_config`, run by the Snakefile before the config is
validated) becomes one ``source: logits`` model per experiment of the benchmark::

    calarena:
      benchmark: cv-multiclass              # an index packaged here, or experiments_csv: <path>
      experiments: null                     # null = all; or a list of "dataset/model"
      logits: {huggingface: {repo: probkit/CalArena, revision: <commit>}}   # where the .h5 is

Model ``{dataset}_{model}`` and dataset ``{dataset}`` (slugs, :func:`model_slug`), ``logits``
``{format: calarena, file: {benchmark}.h5, group: {dataset}/{model}}`` plus the section's
``logits`` keys. :func:`reference_rows` keys the published results by the same names, so that
``report.reference: {csv: resources/reference/calarena_cv_multiclass.csv}`` puts each published
cell beside ours (:mod:`calbench.reference.ours_vs_published`).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from calbench.logits_sources.calarena import read_results_csv
from calbench.logits_sources.folder import slugify

#: CalArena's calibrator (its results file's name) -> calbench's calibrator of the same method
#: (probkit/CalArena run_benchmark.py MULTICLASS_CALIBRATORS). VS and MS are probmetrics'
#: VectorScalingCalibrator / MatrixScalingCalibrator, which fit a bias (logits / t + b,
#: logits @ W + b): calbench's vs_b and ms_b. Same method is not same implementation: the fits
#: (optimiser, regularisation: Dirichlet's reg_lambda = reg_mu = 1e-3 there), binning and
#: tie handling differ, which the difference column shows.
METHODS = {
    "Base-model": "uncalibrated",
    "TS": "ts",
    "ETS": "ets",
    "VS": "vs_b",
    "MS": "ms_b",
    "SVS": "svs",
    "SMS": "sms",
    "Dirichlet": "dirichlet",
    "Isotonic": "iso",
    "CIR": "cir",
    "Venn-Abers": "venn_abers",
    "BBQ": "bbq",
    "Spline": "spline",
}
#: CalArena's metric -> calbench's (:data:`calbench.metrics.METRICS`): its ``ece-15`` is the
#: top-label ECE over 15 equal-width bins, its ``brier`` the squared error summed over classes,
#: as calbench's ``ece`` and ``brier``; ``logloss`` is the mean negative log-likelihood.
METRICS = {"accuracy": "accuracy", "logloss": "nll", "brier": "brier", "ece-15": "ece"}
#: benchmarks whose experiment index / results are packaged
PACKAGED_EXPERIMENTS = ("cv-binary", "cv-multiclass", "imagenet-multiclass")
PACKAGED_RESULTS = ("cv-multiclass",)
#: reference-table names (``calbench reference-csv --name``) of the packaged results
REFERENCE_NAMES = {f"calarena_{b.replace('-', '_')}": b for b in PACKAGED_RESULTS}

_DATA = resources.files(__name__)
_SECTION_KEYS = {"benchmark", "experiments_csv", "experiments", "logits"}


def model_slug(dataset: str, model: str) -> str:
    """The config's model name of experiment ``dataset/model``: ``{dataset}_{model}`` as a slug."""
    return slugify(f"{dataset}_{model}")


def experiments(benchmark: str, experiments_csv: str | os.PathLike | None = None) -> list[dict]:
    """The experiments of ``benchmark`` (``dataset``, ``model``, ``n_classes``: 2 where the index
    has no such column; ``n_samples``: its ``cal_size + test_size``, ``None`` without them) from
    ``experiments_csv``, else the packaged index."""
    if experiments_csv is not None:
        text = Path(experiments_csv).read_text(encoding="utf-8")
        where = str(experiments_csv)
    elif benchmark in PACKAGED_EXPERIMENTS:
        text = _DATA.joinpath("experiments", f"{benchmark}-experiments.csv").read_text()
        where = f"CalArena's {benchmark}-experiments.csv"
    else:
        raise ValueError(
            f"calarena.benchmark {benchmark!r} has no packaged experiment index (packaged: "
            f"{', '.join(PACKAGED_EXPERIMENTS)}); give calarena.experiments_csv, the "
            f"{benchmark}-experiments.csv you downloaded"
        )
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows or not {"dataset", "model"} <= set(rows[0]):
        raise ValueError(f"{where} has no dataset,model rows; is it CalArena's experiments CSV?")
    return [
        {
            "dataset": r["dataset"],
            "model": r["model"],
            "n_classes": int(r.get("n_classes") or 2),
            "n_samples": _samples(r),
        }
        for r in rows
    ]


def _samples(row: Mapping) -> int | None:
    """``cal_size + test_size`` of an index row; ``None`` where the index lacks them."""
    try:
        return int(row["cal_size"]) + int(row["test_size"])
    except (KeyError, TypeError, ValueError):
        return None


def experiment_entries(section: Mapping) -> tuple[dict, dict]:
    """``(datasets, models)`` config entries of a ``calarena:`` section (module docstring).
    One-line ``ValueError`` for an unknown key, an experiment the index lacks, or two
    experiments with one model name."""
    unknown = sorted(set(section) - _SECTION_KEYS)
    if unknown:
        raise ValueError(f"calarena.{unknown[0]}: unknown key; use {sorted(_SECTION_KEYS)}")
    benchmark = section.get("benchmark")
    if not isinstance(benchmark, str) or not benchmark:
        raise ValueError("calarena.benchmark: name the benchmark, e.g. cv-multiclass")
    rows = experiments(benchmark, section.get("experiments_csv"))
    wanted = section.get("experiments")
    if wanted is not None:
        have = {f"{r['dataset']}/{r['model']}": r for r in rows}
        missing = [w for w in wanted if w not in have]
        if missing:
            raise ValueError(
                f"calarena.experiments: {missing[0]!r} is not an experiment of {benchmark} "
                f"(e.g. {next(iter(have))}); write dataset/model as in its experiments CSV"
            )
        rows = [have[w] for w in wanted]
    extra = dict(section.get("logits") or {})
    clash = sorted(set(extra) & {"format", "file", "group"})
    if clash:
        raise ValueError(f"calarena.logits.{clash[0]}: set by the experiment; leave it out")
    datasets, models = {}, {}
    for r in rows:
        name, dataset = model_slug(r["dataset"], r["model"]), slugify(r["dataset"])
        if not name or not dataset:
            raise ValueError(f"calarena: experiment {r['dataset']}/{r['model']} gives no name")
        if name in models:
            raise ValueError(
                f"calarena: experiments {models[name]['logits']['group']} and "
                f"{r['dataset']}/{r['model']} both give model name {name!r}"
            )
        datasets.setdefault(dataset, {"display": r["dataset"]})
        models[name] = {
            "dataset": dataset,
            "source": "logits",
            "num_classes": r["n_classes"],
            "display": {"name": r["model"]},
            "logits": {
                "format": "calarena",
                "file": f"{benchmark}.h5",
                "group": f"{r['dataset']}/{r['model']}",
                **extra,
            },
        }
    return datasets, models


def expand_config(config: dict) -> dict:
    """Add, in place, the models and datasets of ``config["calarena"]`` (when present) to the
    config's own; a name both give is refused in one line. Returns ``config``."""
    section = config.get("calarena")
    if section is None:
        return config
    if not isinstance(section, Mapping):
        raise ValueError("calarena: must be a mapping (benchmark, experiments, logits)")
    datasets, models = experiment_entries(section)
    own = config.get("models")
    if own is None:
        own = config["models"] = {}
    for name, entry in models.items():
        if name in own:
            raise ValueError(
                f"models.{name}: also CalArena experiment {entry['logits']['group']}; rename the "
                "entry or leave the experiment out (calarena.experiments)"
            )
        own[name] = entry
    ds = config.get("datasets")
    if ds is None:
        ds = config["datasets"] = {}
    for name, entry in datasets.items():
        ds.setdefault(name, entry)
    return config


def results_csv(benchmark: str, calibrator: str, results_dir=None) -> Path | None:
    """``results/{benchmark}/{calibrator}.csv`` in ``results_dir`` (a CalArena checkout's
    ``results/`` folder), else the packaged copy; ``None`` when there is none."""
    if results_dir is not None:
        path = Path(results_dir) / benchmark / f"{calibrator}.csv"
        return path if path.is_file() else None
    if benchmark not in PACKAGED_RESULTS:
        return None
    path = _DATA.joinpath("results", benchmark, f"{calibrator}.csv")
    return Path(str(path)) if path.is_file() else None


def reference_rows(benchmark: str, results_dir=None) -> list[dict]:
    """CalArena's published results of ``benchmark`` as the workflow's reference rows
    (``dataset, model, method, metric, value``, values as fractions), keyed like
    :func:`experiment_entries` names them: model ``{dataset}_{model}``, method the calbench
    calibrator of :data:`METHODS`, metric of :data:`METRICS` (``_time`` left out)."""
    out = []
    for theirs, ours in METHODS.items():
        path = results_csv(benchmark, theirs, results_dir)
        if path is None:
            continue
        for r in read_results_csv(path, theirs):
            for metric, value in sorted(r["metrics"].items()):
                if metric in METRICS:
                    out.append(
                        {
                            "dataset": slugify(r["dataset"]),
                            "model": model_slug(r["dataset"], r["model"]),
                            "method": ours,
                            "metric": METRICS[metric],
                            "value": repr(value),
                        }
                    )
    if not out:
        where = results_dir or "the package"
        raise ValueError(
            f"no CalArena results of {benchmark} in {where} for the calibrators {list(METHODS)}"
        )
    return out


def reference_csv_text(name: str) -> str:
    """The packaged results ``name`` (:data:`REFERENCE_NAMES`) as the reference CSV text
    (header ``dataset,model,method,metric,value``)."""
    if name not in REFERENCE_NAMES:
        raise ValueError(
            f"unknown CalArena reference {name!r}; packaged: {sorted(REFERENCE_NAMES)}"
        )
    buf = io.StringIO()
    cols = ("dataset", "model", "method", "metric", "value")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in reference_rows(REFERENCE_NAMES[name]):
        w.writerow([r[c] for c in cols])
    return buf.getvalue()
