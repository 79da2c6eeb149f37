"""The pieces of the calibration protocol (:mod:`calbench.protocol`): the checks of single
settings, a calibrator's metric rows (:func:`evaluate_rows`), the reliability diagrams
(:func:`draw`) and the cross-fitted choice of the "best" calibrator (:func:`select_best`).

Calibrators are fitted on the validation half of a model's test-set logits
(:func:`calbench.split.load_halves`) and evaluated on both halves (Vasilev 2021, §4-5);
comparisons (:func:`calbench.stats.comparisons.compare_rows`) run on the test half, with the "best"
calibrator chosen by cross-fitting inside the validation half (:func:`select_best`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calbench import isolation
from calbench._checks import check_choice, check_probs_labels
from calbench.calibrate_spec import DEFAULTS, SCHEMES
from calbench.calibrators import get_calibrator, load_calibrator, save_calibrator
from calbench.metrics import METRICS, Metric, metric_values
from calbench.results import COMPARE_COLUMNS, METRIC_COLUMNS, OOF_HALF, write_long_csv
from calbench.split import HALVES, load_halves
from calbench.stats.comparisons import check_verdict_metrics, compare_rows
from calbench.stats.selection import check_folds


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

        def build():
            return plots.reliability_grid(probs, labels, n_bins=n_bins, style=style, title=title)
    else:
        ((name, p),) = probs.items()

        def build():
            return plots.reliability_diagram(
                p, labels, n_bins=n_bins, style=style, title=title or name
            )

    plots.save_new_figure(build, out, dpi=dpi)


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


# --------------------------------------------------------------------------------------------
# the sections' checks, shared by the calibrate spec (calbench.protocol) and the verbs by hand
# --------------------------------------------------------------------------------------------
def spec_key(section: str) -> Callable[[str], str]:
    """How the spec's errors name a key of ``section`` (``evaluation.halves``)."""
    return lambda key: f"{section}.{key}"


def flag(key: str) -> str:
    """How the by-hand verbs' errors name a setting: its option (``--ci-halves``)."""
    return "--" + key.replace("_", "-")


_INTERVAL = ("n_bootstrap", "level", "seed")


@dataclass(frozen=True)
class Evaluation:
    """The checked ``evaluation`` section: the halves, metrics and interval settings."""

    half_names: list
    metrics: dict
    ci_halves: list
    ci_metrics: list
    n_bootstrap: int
    level: float
    seed: int


def check_evaluation(ev: Mapping, name=None, *, need_test=True) -> Evaluation:
    """The ``evaluation`` settings checked (one error naming the setting as ``name(key)`` says)
    and resolved: ``halves`` (``None``: both; ``need_test``: must include test, whose
    predictions the diagrams and comparisons use), ``metrics`` (``None``: every registered
    one), ``ci_halves`` and ``ci_metrics`` (subsets; ``None``: all). ``name``: default
    :func:`spec_key` (``evaluation.halves``)."""
    name = name or spec_key("evaluation")
    check_bootstrap(ev["n_bootstrap"], ev["level"])
    half_names = list(ev["halves"] or HALVES)
    bad = [h for h in half_names if h not in HALVES]
    if need_test and (bad or "test" not in half_names):
        raise ValueError(f"{name('halves')} must name test (and optionally val), got {half_names}")
    if bad:
        raise ValueError(f"{name('halves')} must name test and/or val, got {bad}")
    chosen = select_metrics(None if ev["metrics"] is None else list(ev["metrics"]))
    ci_halves = check_subset(ev["ci_halves"], half_names, name("ci_halves"), name("halves"))
    ci_metrics = check_subset(ev["ci_metrics"], list(chosen), name("ci_metrics"), name("metrics"))
    return Evaluation(half_names, chosen, ci_halves, ci_metrics, *(ev[k] for k in _INTERVAL))


def check_compare(cmp: Mapping, level: float, calibrators: list, name=None):
    """The ``compare`` settings checked against the compared ``calibrators`` (one error naming
    the setting as ``name(key)`` says); returns the compared metrics (verdict-eligible ones
    only) and the calibrators left out of the selection. ``name``: default :func:`spec_key`."""
    name = name or spec_key("compare")
    check_bootstrap(cmp["n_bootstrap"], level)
    if cmp["n_bootstrap"] < 1:
        raise ValueError(f"{name('n_bootstrap')} must be >= 1 for the comparisons, got 0")
    compared = select_metrics(None if cmp["metrics"] is None else list(cmp["metrics"]))
    check_verdict_metrics(list(compared), name("metrics"))
    for base in cmp["baselines"]:
        if base not in calibrators:
            raise ValueError(
                f"{name('baselines')} names {base!r}, which is not among the calibrators "
                f"{calibrators}; add it or drop it"
            )
    check_folds(cmp["select_folds"])
    exclude = check_subset(
        list(cmp["select_exclude"] or []), calibrators, name("select_exclude"), "the calibrators"
    )
    return compared, exclude


# --------------------------------------------------------------------------------------------
# the single steps by hand, file in, file out: the settings of one section each
# --------------------------------------------------------------------------------------------
_EV, _CMP = DEFAULTS["evaluation"], DEFAULTS["compare"]
#: the diagrams' drawing defaults (not ``per_calibrator``: a by-hand verb draws what it is asked)
_PLOTS = {k: v for k, v in DEFAULTS["plots"].items() if k in PLOT_OPTIONS}


def fit_calibrator(
    logits_path, split_path, method: str, params: dict, out, *, allow_probabilities: bool = False
) -> None:
    """Fit calibrator ``method`` (hyperparameters ``params``) on the validation half; save JSON
    recording the logits it was fitted on (order hash and file digest)."""
    cal = get_calibrator(method, **params)  # unknown params fail before the logits are read
    halves = load_halves(logits_path, split_path)
    fit_and_save(cal, halves, out, name=method, allow_probabilities=allow_probabilities)


def fit_and_save(cal, halves: dict, out, *, name: str | None = None, **fit_kwargs) -> None:
    """One calibrator fitted on the validation half (isolated, :func:`calbench.isolation.fit`),
    recording the logits it was fitted on, saved as JSON ``out``: ``fit-calibrator``'s and
    :meth:`CalibrateSpec.run`'s fit."""
    isolation.fit(cal, *halves["val"], name=name, **fit_kwargs)
    cal.set_fitted_on(halves["meta"]["order_hash"], halves["meta"]["logits_sha256"])
    save_calibrator(cal, out)


def predict_halves(cal, halves: dict, names, earlier=(), label: str | None = None) -> dict:
    """``cal``'s checked, read-only probabilities on each half of ``names`` (once each;
    ``earlier``: the job's other outputs, which none may reuse)."""
    probs: dict = {}
    for half in dict.fromkeys(names):
        others = [*probs.values(), *earlier]
        probs[half] = isolation.predict(cal, halves[half][0], earlier=others, name=label)
    return probs


def write_evaluation(
    halves, probs, label, ev: Evaluation, csv, png, plot_options, written, jackknives=None
) -> None:
    """One calibrator's metric rows (:func:`calbench.steps.evaluate_rows`) -> ``csv`` and,
    unless ``png`` is ``None``, its reliability diagram on the test half -> ``png`` (first),
    each path appended to ``written`` once it is: ``evaluate``'s and
    :meth:`CalibrateSpec.run`'s files."""
    rows = evaluate_rows(
        halves, probs, label, ev.metrics, half_names=ev.half_names, n_bootstrap=ev.n_bootstrap,
        level=ev.level, seed=ev.seed, ci_halves=ev.ci_halves, ci_metrics=ev.ci_metrics,
        jackknives=jackknives,
    )  # fmt: skip
    if png is not None:
        draw({label: probs["test"]}, halves["test"][1], png, grid=False, **plot_options)
        written.append(Path(png))
    write_long_csv(csv, rows, METRIC_COLUMNS)
    written.append(Path(csv))


def evaluate(
    logits_path,
    split_path,
    calibrator_path,
    out,
    *,
    metrics=_EV["metrics"],
    halves=_EV["halves"],
    n_bootstrap: int = _EV["n_bootstrap"],
    level: float = _EV["level"],
    seed: int = _EV["seed"],
    ci_halves=_EV["ci_halves"],
    ci_metrics=_EV["ci_metrics"],
    dataset: str | None = None,
    model: str | None = None,
    name: str | None = None,
    allow_other_logits: bool = False,
    plot=None,
    plot_options: dict | None = None,
) -> None:
    """Every metric of one fitted calibrator on both halves -> long-format CSV ``out``
    (:func:`calbench.steps.evaluate_rows`; ``metrics`` ``None``: every registered one); with
    ``plot``, also its reliability diagram on the test half
    (:func:`calbench.plots.reliability_diagram` with ``plot_options``: ``n_bins``, ``style``,
    ``title``, ``dpi``), the same figure ``calbench plot-reliability`` draws. The settings are
    the ``evaluation`` section of :class:`CalibrateSpec`, checked as :meth:`CalibrateSpec.check`
    checks them (:func:`check_evaluation`); every argument is checked before anything is
    written."""
    settings = {"metrics": metrics, "halves": halves, "n_bootstrap": n_bootstrap, "level": level,
                "seed": seed, "ci_halves": ci_halves, "ci_metrics": ci_metrics}  # fmt: skip
    ev = check_evaluation(settings, flag, need_test=False)
    if plot is not None and same_file(plot, out):
        raise ValueError(
            f"--plot and --out both name {out}; the diagram would overwrite the CSV: give "
            "each its own path"
        )
    plot_options = {**_PLOTS, **(plot_options or {})}
    if plot is not None:
        check_plot_options(plot_options)
    data = load_halves(logits_path, split_path)
    apply_names(data, dataset, model)
    isolation.freeze(*data["val"], *data["test"])  # no metric may change them
    cal = load_checked_calibrator(calibrator_path, data, allow_other_logits)
    label = method_name(calibrator_path, name)
    # each half calibrated once: the metrics and, with ``plot``, the test half's diagram use them
    probs = predict_halves(
        cal, data, [*ev.half_names, *(["test"] if plot is not None else [])], label=label
    )
    written: list[Path] = []
    try:
        write_evaluation(data, probs, label, ev, out, plot, plot_options, written)
    except BaseException:
        if written:  # no partial output: both files or neither
            Path(plot).unlink(missing_ok=True)
        raise


def compare(
    logits_path,
    split_path,
    calibrator_paths: list,
    out,
    *,
    metrics=_CMP["metrics"],
    baselines=_CMP["baselines"],
    n_bootstrap: int = _CMP["n_bootstrap"],
    level: float = _EV["level"],
    seed: int = _EV["seed"],
    select_folds: int = _CMP["select_folds"],
    select_exclude=_CMP["select_exclude"],
    dataset: str | None = None,
    model: str | None = None,
    allow_other_logits: bool = False,
) -> None:
    """Paired comparisons of one model's calibrators (:func:`compare_rows`) -> CSV ``out``;
    method names are the calibrator file stems. The settings are the ``compare`` section of
    :class:`CalibrateSpec` (with the evaluation's ``level`` and ``seed``), checked as
    :meth:`CalibrateSpec.check` checks them (:func:`check_compare`: verdict-eligible
    ``metrics``, ``baselines`` among the calibrators). The "best" calibrator is chosen by
    cross-fitting (:func:`calbench.steps.select_best`, ``select_folds`` folds): each calibrator
    is refitted from its method and hyperparameters on the validation folds."""
    names = [method_name(path) for path in calibrator_paths]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"two calibrator files are named {twice[0]!r}; give each method one file")
    settings = {"metrics": metrics, "baselines": baselines, "n_bootstrap": n_bootstrap,
                "select_folds": select_folds, "select_exclude": select_exclude}  # fmt: skip
    chosen, exclude = check_compare(settings, level, names, flag)
    data = load_halves(logits_path, split_path)
    apply_names(data, dataset, model)
    isolation.freeze(*data["val"], *data["test"])  # no calibrator or metric may change them
    z, _ = data["test"]
    probs, makers = {}, {}
    for path, name in zip(calibrator_paths, names, strict=True):
        cal = load_checked_calibrator(path, data, allow_other_logits)
        probs[name] = isolation.predict(cal, z, earlier=list(probs.values()), name=name)
        makers[name] = calibrator_maker(type(cal).name, cal.get_params())
    rows = paired_rows(data, probs, makers, chosen, settings, exclude, level, seed)
    write_long_csv(out, rows, COMPARE_COLUMNS)


def paired_rows(
    halves,
    test_probs,
    makers,
    compared,
    cmp,
    exclude,
    level,
    seed,
    *,
    jackknives=None,
    known=None,
    found=None,
    selected=None,
) -> list[dict]:
    """The "best" calibrator of each compared metric chosen by cross-fitting inside the
    validation half (:func:`calbench.steps.select_best`, ``cmp["select_folds"]`` folds, every
    maker but ``exclude``; ``known`` / ``found``: the reuse cache's), then ``selected()``, then
    the paired comparisons on the test half (:func:`compare_rows`, ``cmp["baselines"]``,
    ``cmp["n_bootstrap"]``; ``jackknives``: the metric rows'): ``compare``'s and
    :meth:`CalibrateSpec.run`'s comparisons."""
    best, selected_on = select_best(
        makers,
        halves["val"],
        compared,
        folds=cmp["select_folds"],
        seed=seed,
        exclude=exclude,
        log=log_stderr,
        known=known,
        found=found,
    )
    if selected is not None:
        selected()
    return compare_rows(
        halves,
        test_probs,
        compared,
        list(cmp["baselines"]),
        best=best,
        selected_on=selected_on,
        n_bootstrap=cmp["n_bootstrap"],
        level=level,
        seed=seed,
        jackknives=jackknives,
    )


def plot_reliability(
    logits_path,
    split_path,
    calibrator_paths: list,
    out,
    *,
    grid: bool = False,
    half: str = "test",
    allow_other_logits: bool = False,
    **plot_options,
) -> None:
    """Reliability diagram of one calibrator (or, with ``grid``, one panel per calibrator) on
    one half of a model's logits -> image ``out`` (.png, .pdf, .svg); ``plot_options``:
    ``n_bins``, ``style`` (default: the spec's ``plots``), ``title``, ``dpi``."""
    if half not in HALVES:
        raise ValueError(f"--half must be test or val, got {half!r}")
    if not grid and len(calibrator_paths) != 1:
        raise ValueError(
            "plot-reliability draws one calibrator per figure; pass --grid for several"
        )
    plot_options = {**_PLOTS, **plot_options}
    check_plot_options(plot_options)
    data = load_halves(logits_path, split_path)
    z, y = data[half]
    probs = {}
    for path in calibrator_paths:
        cal = load_checked_calibrator(path, data, allow_other_logits)
        name = method_name(path)
        probs[name] = isolation.predict(cal, z, earlier=list(probs.values()), name=name)
    draw(probs, y, out, grid=grid, **plot_options)


# --------------------------------------------------------------------------------------------
# the cross-fitted scheme (evaluation.scheme: crossfit; docs/statistics.md "Cross-fitted
# evaluation"): every labelled sample predicted out of fold, folds x repeats
# --------------------------------------------------------------------------------------------
#: the ``half`` of the cross-fitted rows: the pooled out-of-fold predictions of all samples
OOF = OOF_HALF


@dataclass(frozen=True)
class Scheme:
    """The checked evaluation scheme: ``name`` (``holdout`` or ``crossfit``), ``folds`` and
    ``repeats`` (used by ``crossfit`` only)."""

    name: str
    folds: int
    repeats: int


def check_scheme(ev: Mapping, name=None) -> Scheme:
    """The ``evaluation`` section's ``scheme``, ``folds`` and ``repeats`` checked (one error
    naming the setting as ``name(key)`` says; default :func:`spec_key`)."""
    from calbench.crossfit import MAX_REPEATS  # lazy: code inputs
    from calbench.stats.selection import MAX_FOLDS  # lazy: code inputs

    name = name or spec_key("evaluation")
    scheme, folds, repeats = (ev.get(k, _EV[k]) for k in ("scheme", "folds", "repeats"))
    if scheme not in SCHEMES:
        raise ValueError(f"{name('scheme')} must be one of {list(SCHEMES)}, got {scheme!r}")
    for key, value, low, high in (("folds", folds, 2, MAX_FOLDS), ("repeats", repeats, 1, MAX_REPEATS)):  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(
                f"{name(key)} must be an integer in [{low}, {high}] (e.g. {_EV[key]}), got {value!r}"
            )
    return Scheme(scheme, folds, repeats)


class _Isolated:
    """A calibrator whose fit and predictions run isolated (:func:`calbench.isolation.fit`,
    :func:`calbench.isolation.predict`: copies in, checked read-only probabilities out, a
    plug-in's failure one line naming ``name``)."""

    def __init__(self, cal, name: str):
        self.cal, self.name = cal, name

    def fit(self, logits, labels):
        isolation.fit(self.cal, logits, labels, name=self.name)
        return self

    def predict_proba(self, logits):
        return isolation.predict(self.cal, logits, name=self.name)


def isolated_maker(make: Callable[[], object], name: str) -> Callable[[], object]:
    """``make`` (a function returning a fresh calibrator) whose calibrators fit and predict
    isolated, as the holdout scheme's do: the cross-fit's fits."""
    return lambda: _Isolated(make(), name)


def pooled_samples(halves: dict, folds: int, name=None) -> tuple[np.ndarray, np.ndarray]:
    """Every labelled sample of ``halves``, the validation half then the test half (read-only),
    checked to hold at least ``folds`` samples of every class present (each stratified fold
    then holds every class)."""
    name = name or spec_key("evaluation")
    z = np.concatenate([halves["val"][0], halves["test"][0]])
    y = np.concatenate([halves["val"][1], halves["test"][1]])
    isolation.freeze(z, y)
    classes, counts = np.unique(y, return_counts=True)
    if counts.min() < folds:
        c = int(classes[np.argmin(counts)])
        raise ValueError(
            f"{name('folds')} = {folds} exceeds the smallest class's count ({counts.min()} "
            f"labelled samples of class {c}); lower {name('folds')} to at most {counts.min()} "
            f"or use {name('scheme')}: holdout"
        )
    return z, y


def crossfit_evaluate_rows(meta: dict, labels, oof, method: str, ev: Evaluation) -> list[dict]:
    """One calibrator's cross-fitted metric rows (``half`` :data:`OOF`): each metric's value is
    the mean over the ``R`` partitions of the metric on that partition's pooled out-of-fold
    predictions ``oof[r]`` of all ``N`` samples; its interval is the bootstrap interval
    (:func:`evaluate_rows`: ``n_bootstrap`` resamples of the ``N`` samples) of the first
    partition's predictions, computed when ``ci_halves`` names the test half (the holdout
    scheme's reported half). The interval holds the fits fixed (Bates, Hastie & Tibshirani 2023:
    it does not include the fits' variation; the partitions file shows the between-partition
    part)."""
    ci = "test" in ev.ci_halves
    data = {OOF: (None, labels), "meta": meta}
    rows = evaluate_rows(
        data, {OOF: oof[0]}, method, ev.metrics, half_names=[OOF],
        n_bootstrap=ev.n_bootstrap if ci else 0, level=ev.level, seed=ev.seed,
        ci_halves=[OOF], ci_metrics=ev.ci_metrics,
    )  # fmt: skip
    if len(oof) > 1:
        from calbench.stats.robustness import SIGNED_ESTIMATES, signed_estimate  # lazy: code inputs

        later = [_values(ev.metrics, p, labels) for p in oof[1:]]
        for row in rows:
            metric = row["metric"]
            if metric not in SIGNED_ESTIMATES:
                row["value"] = float(np.mean([row["value"], *(v[metric] for v in later)]))
            else:  # an unbiased error: the mean of its signed estimates, then clipped at 0, so
                # that it is what the ranks' signed value (the robustness rows) clips to
                signed = [signed_estimate(metric, p, labels) for p in oof]
                row["value"] = max(float(np.mean(signed)), 0.0)
    return rows


def _per_sample(fn, probs, labels):
    """The per-sample values whose mean is metric ``fn`` (a registry mean: NLL, Brier score,
    accuracy), else ``None``."""
    if not (getattr(fn, "is_mean", False) and getattr(fn, "stats", None) is not None):
        return None
    return np.asarray(fn.stats(probs, labels, probs.dtype)[0], dtype=np.float64)


def crossfit_compare_rows(
    meta: dict,
    labels,
    oof: Mapping[str, np.ndarray],
    assignment,
    compared: dict,
    baselines,
    level: float,
    nested: Mapping | None = None,
    selected_on: str = "",
    *,
    n_permutations: int = DEFAULTS["compare"]["n_bootstrap"],
    seed: int = 0,
) -> tuple[list[dict], list[dict]]:
    """The cross-fitted paired comparisons (rows of ``COMPARE_COLUMNS``, ``half``
    :data:`OOF`) and their spread over partitions (rows of ``PARTITION_COLUMNS``).

    ``oof``: calibrator -> out-of-fold probabilities ``(R, N, K)`` on the outer folds
    ``assignment`` ``(R, N)``; ``nested``: metric -> :class:`calbench.crossfit.NestedBest` (the
    "best" chosen inside each training part). The families are the holdout scheme's
    (:func:`calbench.stats.comparisons.comparison_pairs`, one Holm family per metric); the
    ``best`` family's row names the calibrator picked on most folds and its values are the
    nested selection's predictions (each fold predicted by its own pick, chosen without it).
    ``value``, ``baseline_value``: means over partitions of the metric on each partition's
    pooled predictions, ``difference`` their difference. The test is Bouckaert & Frank 2004's
    corrected repeated cross-validation t-test (:func:`calbench.stats.resampled.corrected_repeated_cv_t`:
    the ``R F`` fold-level differences of the metric, Nadeau & Bengio 2003's correction for the
    overlap of training parts); metrics that are means of per-sample values (NLL, Brier score,
    accuracy) get its t interval (``interval = "corrected_t"``), others none. Per partition,
    the holdout scheme's test of the metric (:meth:`calbench.stats.PairedSides.test`: paired t,
    McNemar, the jackknife z of the unbiased errors, or a sign-flip test with at least
    ``n_permutations`` flips, ``seed``) on that partition's pooled out-of-fold predictions of all
    ``N`` samples, Holm-adjusted over the family, says whether the difference is significant
    there (``significant_share``: the share of partitions in which a holdout-style verdict on
    all samples holds; the test holds the fits fixed); the partition
    rows add each pair's between- and within-partition variance
    (:func:`calbench.stats.resampled.variance_split`, per-sample metrics; other metrics: the
    between part only) and the calibrators' shares of first places
    (:func:`calbench.stats.resampled.winner_share`)."""
    from scipy.special import stdtrit  # lazy: heavy

    from calbench.stats import (  # lazy: code inputs
        PairedSides,
        holm,
        interval_method,
        permutations_for,
    )
    from calbench.stats.comparisons import (  # lazy: code inputs
        comparison_pairs,
        direction,
        null_hypothesis,
    )
    from calbench.stats.resampled import (  # lazy: code inputs
        corrected_repeated_cv_t,
        variance_split,
        winner_share,
    )
    from calbench.stats.robustness import SIGNED_ESTIMATES, signed_estimate  # lazy: code inputs

    a = np.asarray(assignment)
    n_rep, n_folds = a.shape[0], int(a.max()) + 1
    masks = [[a[r] == f for f in range(n_folds)] for r in range(n_rep)]
    methods = list(oof)
    nested = dict(nested or {})
    sides = dict(oof)
    for m, nb in nested.items():
        sides[f"best:{m}"] = nb.probs
    pooled, by_fold = {}, {}  # side -> (R, metrics) and (R, F, metrics) metric values
    names = list(compared)
    for side, p in sides.items():
        pooled[side] = np.array([[_values(compared, p[r], labels)[n] for n in names] for r in range(n_rep)])  # fmt: skip
        by_fold[side] = np.array(
            [[[_values(compared, p[r][k], labels[k])[n] for n in names] for k in masks[r]]
             for r in range(n_rep)]
        )  # fmt: skip
    # the first places rank the unbiased errors on their signed estimate, as the report's ranks
    # and robustness do (clipping ties every estimate <= 0 at 0): one estimate everywhere
    ranked = {side: pooled[side].copy() for side in methods}
    for j, n in enumerate(names):
        if n in SIGNED_ESTIMATES:
            for side in methods:
                ranked[side][:, j] = [signed_estimate(n, p, labels) for p in oof[side]]
    alpha = 1.0 - level
    rows, part_rows = [], []
    for j, (name, fn) in enumerate(compared.items()):
        higher = bool(getattr(fn, "higher_is_better", False))
        nb = nested.get(name)
        pick, unanimous = None, True
        if nb is not None:
            flat = [p for row in nb.picks for p in row]
            pick = max(dict.fromkeys(flat), key=flat.count)  # ties: the first picked
            unanimous = flat.count(pick) == len(flat)
        firsts = winner_share(
            np.column_stack([ranked[m][:, j] for m in methods]), methods, higher_is_better=higher
        )
        winner = max(firsts, key=firsts.get)
        pairs = comparison_pairs(methods, list(baselines), pick)

        def side_of(family, method, name=name, unanimous=unanimous):
            # a unanimous pick's nested predictions are its own out-of-fold ones (same fits)
            return f"best:{name}" if family == "best" and not unanimous else method

        per_rep = [
            PairedSides(fn, {s: p[r] for s, p in sides.items()}, labels) for r in range(n_rep)
        ]
        n_perm = max(
            n_permutations,
            permutations_for(len({frozenset((side_of(f, x), y)) for f, x, y in pairs}), alpha),
        )
        done: dict = {}
        for family, m_a, m_b in pairs:
            s_a = side_of(family, m_a)
            key = frozenset((s_a, m_b))
            if key in done:
                continue
            d = by_fold[s_a][:, :, j] - by_fold[m_b][:, :, j]
            parts = [
                float(per_rep[r].test(s_a, m_b, n_permutations=n_perm, seed=seed).p_value)
                for r in range(n_rep)
            ]
            done[key] = (corrected_repeated_cv_t(d), parts, (s_a, m_b), _fold_var(d))
        keys = list(done)
        size = len(keys)
        adjusted = dict(zip(keys, holm([done[k][0].p_value for k in keys]), strict=True))
        per_part = [
            dict(zip(keys, holm([done[k][1][r] for k in keys]), strict=True)) for r in range(n_rep)
        ]
        percentile = interval_method(fn) == "percentile"
        per_sample = getattr(fn, "is_mean", False) and getattr(fn, "stats", None) is not None
        for family, m_a, m_b in pairs:
            s_a = side_of(family, m_a)
            key = frozenset((s_a, m_b))
            t, _, tested, fold_var = done[key]
            sign = 1.0 if tested == (s_a, m_b) else -1.0  # a reversed pair: the same test
            value = float(pooled[s_a][:, j].mean())
            base = float(pooled[m_b][:, j].mean())
            diff = value - base
            lo = hi = float("nan")
            if percentile:
                var = (1.0 / t.n_runs + t.correction) * fold_var
                half = float(stdtrit(t.df, 1.0 - alpha / 2.0)) * float(np.sqrt(var))
                centre = sign * t.difference
                lo, hi = centre - half, centre + half
            rows.append(
                {
                    "dataset": meta["dataset"], "model": meta["model"], "half": OOF,
                    "metric": name, "method": m_a, "baseline": m_b, "value": value,
                    "baseline_value": base, "difference": diff, "ci_low": lo, "ci_high": hi,
                    "p_value": float(t.p_value), "n_resamples": 0,
                    "interval": "corrected_t" if percentile else "none",
                    "selected_on": selected_on if family == "best" else "",
                    "family": family, "family_size": size, "test": t.test, "n_permutations": 0,
                    "p_holm": float(adjusted[key]), "min_p_holm": 0.0, "alpha": alpha,
                    "direction": direction(diff, higher), "p_floor": 0.0,
                    "null_hypothesis": null_hypothesis(t.test),
                }
            )  # fmt: skip
            if per_sample and n_rep > 1:
                split = variance_split(
                    np.array(
                        [
                            _per_sample(fn, sides[s_a][r], labels)
                            - _per_sample(fn, sides[m_b][r], labels)
                            for r in range(n_rep)
                        ]
                    )  # fmt: skip
                )
                between, within = split.between, split.within
            else:
                diffs = pooled[s_a][:, j] - pooled[m_b][:, j]
                between = float(diffs.var(ddof=1)) if n_rep > 1 else float("nan")
                within = float("nan")
            total = between + within
            part_rows.append(
                {
                    "dataset": meta["dataset"], "model": meta["model"], "metric": name,
                    "family": family, "method": m_a, "baseline": m_b, "difference": diff,
                    "n_partitions": n_rep, "folds": n_folds,
                    "significant_share": float(np.mean([per_part[r][key] < alpha for r in range(n_rep)])),
                    "between": between, "within": within,
                    "between_share": between / total if total > 0 else float("nan"),
                    "first_share": firsts.get(m_a, 0.0), "winner": winner,
                    "winner_share": firsts[winner],
                }
            )  # fmt: skip
    return rows, part_rows


def _fold_var(d) -> float:
    return float(np.var(np.ravel(d), ddof=1))
