"""Verbs ``fit-calibrator``, ``evaluate`` and ``compare``: the post-hoc calibration protocol.

The protocol is the study's (Vasilev 2021, §4-5; replication-sources §2.2-2.4): calibrators are
fitted on the validation half of a model's test-set logits and applied to both halves; every
metric of :data:`calbench.metrics.METRICS` is reported on the test half (and, for checking
over-fitting of the calibrator, on the validation half), each with a percentile bootstrap
confidence interval (:func:`calbench.stats.bootstrap_ci`: basic bootstrap for calibration
errors, percentile otherwise; none for MCE, see :data:`calbench.stats.NO_INTERVAL`).
``compare`` picks the best calibrator of a model on the *validation* half and pairs it with
baselines by a paired bootstrap over the same resampled *test* samples
(:func:`calbench.stats.paired_bootstrap`).

Heavy libraries are imported inside the command functions only (start-up cost of the workflow).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

HALVES = ("test", "val")
COMPARE_COLUMNS = (
    "dataset",
    "model",
    "half",
    "metric",
    "method",
    "baseline",
    "value",
    "baseline_value",
    "difference",
    "ci_low",
    "ci_high",
    "p_value",
    "n_resamples",
    "interval",
    "selected_on",
)


# --------------------------------------------------------------------------------------------
# shared helpers (also used by cli/report.py)
# --------------------------------------------------------------------------------------------
def load_split(path, n: int, order_hash: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Read a split ``.npz`` and check it partitions ``range(n)``; returns ``(val_idx, test_idx)``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"split file {path} does not exist; run calbench split first")
    from calbench.io import read_npz

    data = read_npz(path, "split file", "rebuild it with calbench split")
    if "val_idx" not in data or "test_idx" not in data:
        raise ValueError(f"{path} lacks val_idx/test_idx; regenerate it with calbench split")
    val, test = data["val_idx"].astype(np.int64), data["test_idx"].astype(np.int64)
    split_hash = str(data["order_hash"]) if "order_hash" in data else ""
    if len(val) + len(test) != n or (n and max(val.max(initial=-1), test.max(initial=-1)) >= n):
        raise ValueError(
            f"split {path} covers {len(val)} + {len(test)} indices but the logits have {n} rows; "
            "rebuild the split from logits of the same dataset"
        )
    if order_hash and split_hash and order_hash != split_hash:
        raise ValueError(
            f"split {path} was made for samples in another order (order_hash differs); "
            "rebuild logits and split from the same dataset files"
        )
    return val, test


def load_halves(logits_path, split_path) -> dict:
    """Logits file plus split: ``{"meta": {...}, "val": (logits, labels), "test": (...)}``.

    The logits file is read and validated by :func:`calbench.logits.load_logits`. ``meta`` also
    holds the file's identity (``order_hash``, ``logits_sha256``) that calibrators record.
    """
    from calbench.io import file_digest
    from calbench.logits import load_logits

    data = load_logits(logits_path)
    val, test = load_split(split_path, len(data["labels"]), data["order_hash"])
    z, y = data["logits"], data["labels"]
    return {
        "meta": {
            "model": data["model"],
            "dataset": data["dataset"],
            "order_hash": data["order_hash"],
            "logits_sha256": file_digest(logits_path),
        },
        "val": (z[val], y[val]),
        "test": (z[test], y[test]),
    }


def parse_json_arg(text: str, what: str) -> dict:
    """Parse a JSON object given on the command line (or ``@file.json``)."""
    if text.startswith("@"):
        text = Path(text[1:]).read_text()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{what} is not valid JSON ({exc.msg}); pass an object like '{{}}'"
        ) from exc
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def parse_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [t for t in (s.strip() for s in text.split(",")) if t]


def method_name(calibrator_path, name: str | None = None) -> str:
    """The method label of a calibrator file: ``name`` if given, else the file stem."""
    return name or Path(calibrator_path).stem


def select_metrics(names: list[str] | None) -> dict:
    from calbench.metrics import METRICS

    if names is None:
        return dict(METRICS)
    unknown = [m for m in names if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; choose from {sorted(METRICS)}")
    return {m: METRICS[m] for m in names}


# --------------------------------------------------------------------------------------------
# fit-calibrator
# --------------------------------------------------------------------------------------------
def fit_calibrator(
    logits_path, split_path, method: str, params: dict, out, *, allow_probabilities: bool = False
) -> None:
    """Fit calibrator ``method`` (hyperparameters ``params``) on the validation half; save JSON
    recording the logits it was fitted on (order hash and file digest)."""
    from calbench.calibrators import get_calibrator, save_calibrator

    cal = get_calibrator(method, **params)  # unknown params fail before the logits are read
    halves = load_halves(logits_path, split_path)
    cal.fit(*halves["val"], allow_probabilities=allow_probabilities)
    cal.set_fitted_on(halves["meta"]["order_hash"], halves["meta"]["logits_sha256"])
    save_calibrator(cal, out)


def load_checked_calibrator(path, halves: dict, allow_other_logits: bool = False):
    """:func:`calbench.calibrators.load_calibrator`, refusing a calibrator that records being
    fitted on other logits than ``halves`` (unless ``allow_other_logits``)."""
    from calbench.calibrators import load_calibrator

    cal = load_calibrator(path)
    if not allow_other_logits:
        meta = halves["meta"]
        cal.check_fitted_on(meta["order_hash"], meta["logits_sha256"], where=str(path))
    return cal


def _cmd_fit(args: argparse.Namespace) -> int:
    params = parse_json_arg(args.params, "--params")
    if args.threads:
        _set_threads(args.threads)
    fit_calibrator(
        args.logits,
        args.split,
        args.method,
        params,
        args.out,
        allow_probabilities=args.allow_probabilities,
    )
    return 0


def _set_threads(n: int) -> None:
    """Limit BLAS/torch threads to ``n`` (before torch is imported by a scaling calibrator)."""
    import os

    if n < 1:
        raise ValueError(f"--threads must be >= 1, got {n}")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)


# --------------------------------------------------------------------------------------------
# evaluate
# --------------------------------------------------------------------------------------------
def evaluate_rows(
    halves: dict,
    calibrator,
    method: str,
    metrics: dict,
    *,
    half_names=HALVES,
    n_bootstrap: int = 200,
    level: float = 0.95,
    seed: int = 0,
    ci_halves=None,
    ci_metrics=None,
) -> list[dict]:
    """Long-format rows ``dataset,model,method,half,metric,value,ci_low,ci_high`` for one calibrator.

    Every metric of ``metrics`` is computed on every half of ``half_names``. The bootstrap
    interval (:func:`calbench.stats.bootstrap_ci` with its default construction: basic for
    calibration errors, percentile otherwise; ``n_bootstrap`` resamples of the half's samples,
    confidence ``level``, ``seed``) is computed for the halves in ``ci_halves`` and the metrics
    in ``ci_metrics`` (``None``: all of them) except :data:`calbench.stats.NO_INTERVAL` (MCE);
    other rows carry NaN bounds, as do all rows when ``n_bootstrap`` is 0.
    """
    from calbench.stats import NO_INTERVAL, bootstrap_ci

    ci_halves = set(half_names if ci_halves is None else ci_halves)
    ci_metrics = set(metrics if ci_metrics is None else ci_metrics)
    rows = []
    for half in half_names:
        z, y = halves[half]
        probs = calibrator.predict_proba(z)
        for name, fn in metrics.items():
            value = float(fn(probs, y))
            lo = hi = float("nan")
            if n_bootstrap > 0 and half in ci_halves and name in ci_metrics - NO_INTERVAL:
                res = bootstrap_ci(fn, probs, y, n_resamples=n_bootstrap, level=level, seed=seed)
                lo, hi = float(res.low), float(res.high)
            rows.append(
                {
                    "dataset": halves["meta"]["dataset"],
                    "model": halves["meta"]["model"],
                    "method": method,
                    "half": half,
                    "metric": name,
                    "value": value,
                    "ci_low": lo,
                    "ci_high": hi,
                }
            )
    return rows


def _subset(given: list[str] | None, allowed: list[str], flag: str, of: str) -> list[str]:
    """``given`` (``None``: all of ``allowed``) checked to be a subset of ``allowed``."""
    if given is None:
        return list(allowed)
    bad = [g for g in given if g not in allowed]
    if bad:
        raise ValueError(f"{flag} names {bad}, which are not in {of} {list(allowed)}; drop them")
    return given


def _check_bootstrap(n: int, level: float) -> None:
    if n < 0:
        raise ValueError(f"--n-bootstrap must be >= 0 (0 disables intervals), got {n}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"--level must lie in (0, 1), e.g. 0.95, got {level}")


def _apply_names(halves: dict, dataset: str | None, model: str | None) -> None:
    if dataset:
        halves["meta"]["dataset"] = dataset
    if model:
        halves["meta"]["model"] = model
    for key in ("dataset", "model"):
        if not halves["meta"][key]:
            raise ValueError(f"the logits file records no {key} name; pass --{key} NAME")


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from calbench.report.tables import METRIC_COLUMNS, write_long_csv

    _check_bootstrap(args.n_bootstrap, args.level)
    half_names = parse_list(args.halves) or list(HALVES)
    bad = [h for h in half_names if h not in HALVES]
    if bad:
        raise ValueError(f"--halves must name test and/or val, got {bad}")
    metrics = select_metrics(parse_list(args.metrics))
    ci_halves = _subset(parse_list(args.ci_halves), half_names, "--ci-halves", "--halves")
    ci_metrics = _subset(parse_list(args.ci_metrics), list(metrics), "--ci-metrics", "--metrics")
    halves = load_halves(args.logits, args.split)
    _apply_names(halves, args.dataset, args.model)
    cal = load_checked_calibrator(args.calibrator, halves, args.allow_other_logits)
    rows = evaluate_rows(
        halves,
        cal,
        method_name(args.calibrator, args.name),
        metrics,
        half_names=half_names,
        n_bootstrap=args.n_bootstrap,
        level=args.level,
        seed=args.seed,
        ci_halves=ci_halves,
        ci_metrics=ci_metrics,
    )
    write_long_csv(args.out, rows, METRIC_COLUMNS)
    return 0


# --------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------
def compare_rows(
    halves: dict,
    probs_by_method: dict[str, np.ndarray],
    metrics: dict,
    baselines: list[str],
    *,
    val_probs_by_method: dict[str, np.ndarray] | None = None,
    n_bootstrap: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> list[dict]:
    """Paired bootstrap of the best method (per metric) against each baseline on the test half.

    The best method is selected on the **validation** half (``val_probs_by_method``; the
    calibrators were fitted there too), so the test half that measures the difference plays no
    part in picking the winner: the largest accuracy or the smallest value of any other metric,
    ties to the first in ``probs_by_method`` order. Without validation probabilities the test
    half selects (``selected_on = "test"``, an optimistic comparison). A baseline that is the
    selected method itself is skipped (no self-comparisons). ``difference = metric(best) -
    metric(baseline)`` on the test half; its interval and two-sided p-value come from
    :func:`calbench.stats.paired_bootstrap` (the same resampled test indices for both methods;
    basic interval for calibration errors, percentile otherwise). p-values are per comparison;
    the report adjusts them for multiplicity (Holm 1979).
    """
    from calbench.report.tables import HIGHER_IS_BETTER
    from calbench.stats import interval_method, paired_bootstrap

    _, y = halves["test"]
    missing = [b for b in baselines if b not in probs_by_method]
    if missing:
        raise ValueError(
            f"baselines {missing} are not among the calibrators {list(probs_by_method)}; "
            "pass their JSON files or drop them from --baselines"
        )
    if val_probs_by_method is not None and set(val_probs_by_method) != set(probs_by_method):
        raise ValueError("validation and test probabilities must cover the same calibrators")
    rows = []
    for name, fn in metrics.items():
        values = {m: float(fn(p, y)) for m, p in probs_by_method.items()}
        if val_probs_by_method is not None:
            _, y_val = halves["val"]
            chosen = {m: float(fn(val_probs_by_method[m], y_val)) for m in probs_by_method}
            selected_on = "val"
        else:
            chosen, selected_on = values, "test"
        pick = max if name in HIGHER_IS_BETTER else min
        worst = -math.inf if name in HIGHER_IS_BETTER else math.inf
        best = pick(chosen, key=lambda m: chosen[m] if math.isfinite(chosen[m]) else worst)
        for base in baselines:
            if base == best:
                continue
            res = paired_bootstrap(
                fn,
                probs_by_method[best],
                probs_by_method[base],
                y,
                n_resamples=n_bootstrap,
                level=level,
                seed=seed,
            )
            rows.append(
                {
                    "dataset": halves["meta"]["dataset"],
                    "model": halves["meta"]["model"],
                    "half": "test",
                    "metric": name,
                    "method": best,
                    "baseline": base,
                    "value": values[best],
                    "baseline_value": values[base],
                    "difference": float(res.difference),
                    "ci_low": float(res.low),
                    "ci_high": float(res.high),
                    "p_value": float(res.p_value),
                    "n_resamples": n_bootstrap,
                    "interval": interval_method(fn),
                    "selected_on": selected_on,
                }
            )
    return rows


def _cmd_compare(args: argparse.Namespace) -> int:
    from calbench.report.tables import write_long_csv

    _check_bootstrap(args.n_bootstrap, args.level)
    if args.n_bootstrap < 1:
        raise ValueError("--n-bootstrap must be >= 1 for compare")
    metrics = select_metrics(parse_list(args.metrics))
    halves = load_halves(args.logits, args.split)
    _apply_names(halves, args.dataset, args.model)
    z, _ = halves["test"]
    z_val, _ = halves["val"]
    probs, val_probs = {}, {}
    for path in args.calibrators:
        name = method_name(path)
        if name in probs:
            raise ValueError(f"two calibrator files are named {name!r}; give each method one file")
        cal = load_checked_calibrator(path, halves, args.allow_other_logits)
        probs[name] = cal.predict_proba(z)
        val_probs[name] = cal.predict_proba(z_val)
    rows = compare_rows(
        halves,
        probs,
        metrics,
        parse_list(args.baselines) or [],
        val_probs_by_method=val_probs,
        n_bootstrap=args.n_bootstrap,
        level=args.level,
        seed=args.seed,
    )
    write_long_csv(args.out, rows, COMPARE_COLUMNS)
    return 0


# --------------------------------------------------------------------------------------------
# argparse
# --------------------------------------------------------------------------------------------
def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--logits", required=True, help="logits .npz written by cache-logits")
    p.add_argument("--split", required=True, help="split .npz written by split")


def allow_other_logits(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-other-logits",
        action="store_true",
        help="apply calibrators fitted on other logits (default: refuse, naming the file)",
    )


def _naming(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", help="dataset name for the CSV (default: from the logits file)")
    p.add_argument("--model", help="model name for the CSV (default: from the logits file)")


def _bootstrap(p: argparse.ArgumentParser, n: int) -> None:
    p.add_argument("--n-bootstrap", type=int, default=n, help=f"bootstrap resamples (default {n})")
    p.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")


def register(sub) -> None:
    p = sub.add_parser(
        "fit-calibrator",
        help="fit a calibrator on the validation half of a model's logits",
        description="Fit calibrator METHOD on the validation half and write its JSON.",
    )
    _common(p)
    p.add_argument("--method", required=True, help="registry name (calbench.calibrators.REGISTRY)")
    p.add_argument("--params", default="{}", help="hyperparameters as a JSON object (or @file)")
    p.add_argument("--threads", type=int, default=0, help="CPU threads for torch-based fits")
    p.add_argument(
        "--allow-probabilities",
        action="store_true",
        help="fit even if every row is a probability vector (default: refuse; pass logits)",
    )
    p.add_argument("--out", required=True, help="calibrator .json to write")
    p.set_defaults(func=_cmd_fit)

    p = sub.add_parser(
        "evaluate",
        help="every metric of one calibrator on both halves, long CSV with bootstrap CIs",
        description="Apply a fitted calibrator to both halves and write long-format metrics.",
    )
    _common(p)
    _naming(p)
    p.add_argument("--calibrator", required=True, help="calibrator .json from fit-calibrator")
    p.add_argument("--name", help="method label in the CSV (default: the calibrator file stem)")
    p.add_argument("--metrics", help="comma-separated metric names (default: all of METRICS)")
    p.add_argument("--halves", help="comma-separated halves (default: test,val)")
    _bootstrap(p, 200)
    p.add_argument(
        "--ci-halves", help="halves that get bootstrap intervals (default: all of --halves)"
    )
    p.add_argument(
        "--ci-metrics", help="metrics that get bootstrap intervals (default: all of --metrics)"
    )
    allow_other_logits(p)
    p.add_argument("--out", required=True, help="metrics .csv to write")
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser(
        "compare",
        help="paired bootstrap: best calibrator of a model vs baselines",
        description="Paired-bootstrap differences on the test half between the best method "
        "(per metric, selected on the validation half) and each other baseline; method names "
        "are the calibrator file stems.",
    )
    _common(p)
    _naming(p)
    p.add_argument("--calibrators", nargs="+", required=True, help="calibrator .json files")
    p.add_argument("--baselines", default="uncalibrated,ts", help="comma-separated baselines")
    p.add_argument("--metrics", help="comma-separated metric names (default: all of METRICS)")
    _bootstrap(p, 1000)
    allow_other_logits(p)
    p.add_argument("--out", required=True, help="comparison .csv to write")
    p.set_defaults(func=_cmd_compare)
