"""The pieces of the calibration protocol (:mod:`calbench.protocol`): the checks of single
settings, a calibrator's metric rows (:func:`evaluate_rows`), the reliability diagrams
(:func:`draw`) and the cross-fitted choice of the "best" calibrator (:func:`select_best`).

Calibrators are fitted on the validation half of a model's test-set logits
(:func:`calbench.split.load_halves`) and evaluated on both halves (Vasilev 2021, §4-5);
comparisons (:func:`calbench.stats.comparisons.compare_rows`) run on the test half, with the "best"
calibrator chosen by cross-fitting inside the validation half (:func:`select_best`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from calbench import isolation
from calbench._checks import check_choice, check_probs_labels
from calbench.calibrators import get_calibrator, load_calibrator
from calbench.metrics import METRICS, Metric, metric_values
from calbench.split import HALVES


def method_name(calibrator_path, name: str | None = None) -> str:
    """The method label of a calibrator file: ``name`` if given, else the file stem."""
    return name or Path(calibrator_path).stem


def select_metrics(names: list[str] | None) -> dict:
    if names is None:
        return dict(METRICS)
    unknown = [m for m in names if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; choose from {sorted(METRICS)}")
    return {m: METRICS[m] for m in names}


def check_subset(given: list[str] | None, allowed: list[str], flag: str, of: str) -> list[str]:
    """``given`` (``None``: all of ``allowed``) checked to be a subset of ``allowed``."""
    if given is None:
        return list(allowed)
    bad = [g for g in given if g not in allowed]
    if bad:
        raise ValueError(f"{flag} names {bad}, which are not in {of} {list(allowed)}; drop them")
    return given


#: most bootstrap resamples (or sign flips) one call may ask for
MAX_RESAMPLES = 100_000


def check_bootstrap(n: int, level: float) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_RESAMPLES:
        raise ValueError(
            f"--n-bootstrap must be an integer in [0, {MAX_RESAMPLES}] (0 disables intervals), got {n!r}"
        )
    if not 0.0 < level < 1.0:
        raise ValueError(f"--level must lie in (0, 1), e.g. 0.95, got {level}")


def apply_names(halves: dict, dataset: str | None, model: str | None) -> None:
    if dataset:
        halves["meta"]["dataset"] = dataset
    if model:
        halves["meta"]["model"] = model
    for key in ("dataset", "model"):
        if not halves["meta"][key]:
            raise ValueError(f"the logits file records no {key} name; pass --{key} NAME")


def load_checked_calibrator(path, halves: dict, allow_other_logits: bool = False):
    """:func:`calbench.calibrators.load_calibrator`, refusing a calibrator that records being
    fitted on other logits than ``halves`` (unless ``allow_other_logits``)."""
    cal = load_calibrator(path)
    if not allow_other_logits:
        meta = halves["meta"]
        cal.check_fitted_on(meta["order_hash"], meta["logits_sha256"], where=str(path))
    return cal


def evaluate_rows(
    halves: dict,
    probs_by_half: dict[str, np.ndarray],
    method: str,
    metrics: dict,
    *,
    half_names=HALVES,
    n_bootstrap: int,
    level: float,
    seed: int,
    ci_halves=None,
    ci_metrics=None,
    jackknives: dict | None = None,
) -> list[dict]:
    """Long-format rows ``dataset,model,method,half,metric,value,ci_low,ci_high`` for one calibrator.

    Every metric of ``metrics`` is computed on every half of ``half_names``, from the
    calibrated probabilities of that half (``probs_by_half[half]``). The bootstrap
    interval (:func:`calbench.stats.bootstrap_ci` with the registry's construction,
    ``Metric.interval``; ``n_bootstrap`` resamples of the half's samples,
    confidence ``level``, ``seed``) is computed for the halves in ``ci_halves`` and the metrics
    in ``ci_metrics`` (``None``: all of them) except those whose registry entry has no interval
    (``Metric.interval is None``, :data:`calbench.stats.NO_INTERVAL`: the calibration errors);
    other rows carry NaN bounds, as do all rows when ``n_bootstrap`` is 0. ``jackknives``: a
    dict that receives, per half, the jackknife of each metric with a jackknife interval
    (``{half: {metric: UStat}}``, :func:`calbench.stats.bootstrap_cis`), for the comparisons.
    """
    from calbench.stats import bootstrap_cis, interval_method  # lazy: code inputs

    ci_halves = set(half_names if ci_halves is None else ci_halves)
    ci_metrics = set(metrics if ci_metrics is None else ci_metrics)
    rows = []
    for half in half_names:
        _, y = halves[half]
        probs = probs_by_half[half]
        try:
            values = _values(metrics, probs, y)
        except ValueError as exc:
            raise ValueError(f"{exc} (on the {half} half)") from exc.__cause__
        with_ci = {
            name: fn
            for name, fn in metrics.items()
            if n_bootstrap > 0
            and half in ci_halves
            and name in ci_metrics
            and interval_method(fn) is not None
        }
        cis = {}
        if with_ci:
            kept = None if jackknives is None else jackknives.setdefault(half, {})
            cis = bootstrap_cis(
                with_ci, probs, y, n_resamples=n_bootstrap, level=level, seed=seed, jackknives=kept
            )
        for name in metrics:
            value = values[name]
            lo = hi = float("nan")
            if name in cis:
                lo, hi = float(cis[name].low), float(cis[name].high)
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


def _values(metrics: dict, probs, labels) -> dict[str, float]:
    """Every metric's value on one set, each checked to be a finite float
    (:func:`calbench.isolation.checked_value`: a one-line error naming the metric otherwise).
    calbench's registry entries share one validation of the arrays and run the computations
    they share once (:func:`calbench.metrics.metric_values`); a plug-in's own
    :class:`~calbench.metrics.Metric` or any other callable is called as it is, on read-only
    views, an exception inside it named (:func:`calbench.isolation.run_plugin`)."""
    entries = {
        name: fn
        for name, fn in metrics.items()
        if isinstance(fn, Metric) and not isolation.is_plugin(fn.core)
    }
    out = {}
    if entries:
        p, y = check_probs_labels(probs, labels)
        out = metric_values(entries, p, y, getattr(probs, "dtype", None))
    for name, fn in metrics.items():
        if name not in out:
            code = fn.core if isinstance(fn, Metric) else fn
            out[name] = isolation.run_plugin(
                f"metric {name!r}",
                fn,
                isolation.read_only(probs),
                isolation.read_only(labels),
                plugin=isolation.is_plugin(code),
            )
    return {name: isolation.checked_value(name, out[name]) for name in metrics}


def same_file(a, b) -> bool:
    """Whether paths ``a`` and ``b`` name one file (links and ``..`` resolved)."""
    pa, pb = Path(a), Path(b)
    try:
        if pa.exists() and pb.exists():
            return pa.samefile(pb)
    except OSError:
        pass
    return pa.resolve() == pb.resolve()


#: reliability-diagram options of :func:`evaluate` and :func:`plot_reliability`
PLOT_OPTIONS = ("n_bins", "style", "title", "dpi")


def check_plot_options(options: dict) -> None:
    from calbench.plots import STYLES  # lazy: code inputs

    unknown = sorted(set(options) - set(PLOT_OPTIONS))
    if unknown:
        raise ValueError(f"unknown plot options {unknown}; choose from {list(PLOT_OPTIONS)}")
    if "style" in options:
        check_choice(options["style"], "style", STYLES)


def draw(probs: dict, labels, out, *, grid: bool, n_bins: int, style: str, title=None, dpi=100):
    from calbench import plots  # lazy: code inputs

    if grid:
        fig = plots.reliability_grid(probs, labels, n_bins=n_bins, style=style, title=title)
    else:
        ((name, p),) = probs.items()
        fig = plots.reliability_diagram(p, labels, n_bins=n_bins, style=style, title=title or name)
    plots.save_figure(fig, out, dpi=dpi)


def select_best(
    makers: dict,
    val: tuple,
    metrics: dict,
    *,
    folds: int,
    seed: int,
    exclude=(),
    log=None,
    known=None,
    found=None,
) -> tuple[dict[str, str], str]:
    """The "best" calibrator per metric by K-fold cross-fitting inside the validation half
    (:func:`calbench.stats.selection.crossfit_scores`; ``val`` = the validation logits and labels,
    never the test half) and the ``selected_on`` label of the comparison rows. Candidates left
    out (``exclude``, or a fit that fails on a fold) are reported to ``log`` with the reason.
    ``known``: what earlier runs found per candidate (``crossfit_scores``' argument, from the
    reuse cache); ``found``: a dict filled with what this run found per calibrator
    (:func:`calbench.stats.selection.candidate_result`), for the cache to keep."""
    from calbench.stats.selection import candidate_result, crossfit_scores  # lazy: code inputs

    fit = crossfit_scores(makers, *val, metrics, k=folds, seed=seed, exclude=exclude, known=known)
    if found is not None:
        found.update({m: candidate_result(fit, m) for m in makers})
    for method, why in fit.excluded.items():
        if log is not None:
            log(f"best on validation: {method} is not a candidate: {why}")
    if not fit.candidates:
        return {}, ""
    best = {
        name: fit.best(name, bool(getattr(fn, "higher_is_better", False)))
        for name, fn in metrics.items()
    }
    return best, f"val:{folds}-fold cross-fit"


def log_stderr(message: str) -> None:
    import sys

    print(message, file=sys.stderr)


def calibrator_maker(method: str, params: dict):
    """A function returning a fresh, unfitted calibrator ``method(**params)``."""
    return lambda: get_calibrator(method, **params)
