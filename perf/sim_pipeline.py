"""Simulations through the calibrate step: coverage, type-I error and power of what the
compare and metric CSVs report, on synthetic logits whose population calibration is known.

Each study writes a model's logits and split to a temporary folder and runs
:meth:`calbench.protocol.CalibrateSpec.run` on them, the step the workflow runs, in the
``holdout`` scheme (fit on the validation half, report the test half) or the ``crossfit`` scheme
(``folds`` 5, ``repeats`` 3: every sample predicted out of fold), with three calibrators
(``uncalibrated``, ``ts``, ``hist``), the metrics ``nll``, ``brier`` and ``ece_ub`` and the
paired tests of the compare CSV on the same three. The reliability diagrams are not drawn
(:func:`calbench.steps.draw` is replaced by a function writing an empty file: matplotlib would
cost more than the fits, and the pictures hold no number this script reads).

The model is :class:`calbench.synthetic.SyntheticModel` (Roelofs et al. 2022, §4), its logits
``log p``. Temperature scaling of these logits at temperature ``T`` is the synthetic module's
:func:`~calbench.synthetic.variant` at ``T``, whose population NLL, Brier score and root squared
binned error (``ece_ub``'s estimand) :func:`~calbench.synthetic.population_scores` and
:func:`~calbench.synthetic.population_errors` integrate. So the population error of every
fitted ``ts`` is known exactly, and:

* **holdout estimand** of a row: the population error of the calibrator as fitted in that study
  (on the validation half);
* **crossfit estimand** (Bates, Hastie & Tibshirani 2023): the population error of a calibrator
  fitted on ``(F - 1) / F`` of the ``N`` samples, averaged over fits: :func:`crossfit_estimand`
  fits ``ts`` on ``fits`` fresh samples of that size and averages the population errors at the
  fitted temperatures.

Cells (``--cells``):

* ``calibrated``: ``gamma = 1`` (nothing to fix), ``N = 2,000``. The estimand of ``ts`` minus
  ``uncalibrated`` is then >= 0 (a fitted temperature can only lose; by O(1/N)): a test that
  finds ``ts`` *better* errs (type-I error of the "improvement" verdict, target <= alpha / 2 for
  a two-sided level-alpha test); a test that finds it worse is right but has almost no power.
* ``power``: ``gamma`` chosen so that the population ``ece_ub`` of the model and of ``ts`` at its
  population-optimal temperature differ by 0.03 (:func:`gamma_for_gap`), ``N = 10,000``: the
  share of studies whose ``ts`` vs ``uncalibrated`` ``ece_ub`` test is significant (Holm p <
  0.05 and the difference negative) in holdout (5,000 test samples) and crossfit (all 10,000).
* ``equal``: two calibrators of different capacity and equal estimand, ``N = 2,000``: ``ts``
  (one parameter) and ``iso`` (isotonic regression, non-parametric) on
  :class:`~calbench.synthetic.WiggleModel`, whose accuracy curve temperature scaling cannot
  straighten. ``wiggle`` is set by bisection (:func:`wiggle_for_equal`) so that their Brier
  scores, fitted on the scheme's training size (``N / 2`` for holdout, ``4 N / 5`` for
  crossfit), have equal population values averaged over fits (:func:`wiggle_gap`: paired on
  one large sample, common random numbers): iso's bias is smaller, its variance larger, and
  ``wiggle`` trades one for the other. Only the Brier rows are under the null (NLL and
  ``ece_ub`` differ there). Any significant row between the two is a type-I error; for the
  holdout scheme the estimand equality is on average over fits, while its test holds the
  fit fixed (its conditional null is not exactly true in any one study).
* ``overconfident``: ``gamma = 1.6`` (docs/statistics.md's over-confident scenario), ``N =
  2,000``: the coverage of ``ts``'s intervals where the fit moves the estimand.
* Every cell also gives the coverage of the reported intervals of ``uncalibrated`` and ``ts``
  (NLL, Brier score, ``ece_ub``) for its scheme's estimand.
* Intervals over models (:mod:`calbench.stats.over_models`): the studies of a cell are a pool
  of models; studies of ``M`` models drawn from it with replacement (so the pool is their
  population and its share of wins and mean difference the true values) give the coverage of
  the win-rate (BCa) and improvement (bootstrap-t) intervals of the cell's pair; in ``equal``
  (Brier) the pair has no difference over models.

Monte Carlo error: a share ``p`` of ``S`` studies has standard error ``sqrt(p (1 - p) / S)``,
printed next to it.

Run: ``python perf/sim_pipeline.py --cells calibrated power equal overconfident --studies 200
--out sim.jsonl`` (one JSON line per study, appended, so a stopped run resumes
where it was; ``--summarise`` prints the tables from the file alone).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import tempfile
import time
import warnings
from functools import cache
from pathlib import Path

import numpy as np

from calbench.calibrators import get_calibrator
from calbench.synthetic import (
    SyntheticModel,
    WiggleModel,
    population_errors,
    population_scores,
)

FOLDS, REPEATS = 5, 3
METRICS = ["nll", "brier", "ece_ub"]
CALIBRATORS = ["uncalibrated", "ts", "hist"]
POINTS = 40_000  # integration grid of the population values (their error is far below 1e-4)


def spec_dict(
    scheme: str, calibrators=CALIBRATORS, n_bootstrap: int = 200, compare_bootstrap: int = 200
) -> dict:
    """The calibrate spec of one study (``scheme``: ``holdout`` or ``crossfit``)."""
    from calbench.calibrate_spec import DEFAULTS

    spec = {
        "calibrators": {k: {"method": k, "params": {}, "display": k} for k in calibrators},
        **copy.deepcopy(DEFAULTS),
    }
    spec = json.loads(json.dumps(spec))  # tuples as lists, as the spec file gives them
    spec["evaluation"].update(metrics=METRICS, halves=["test"], n_bootstrap=n_bootstrap)
    if scheme == "crossfit":
        spec["evaluation"].update(scheme="crossfit", folds=FOLDS, repeats=REPEATS)
    spec["compare"].update(metrics=METRICS, n_bootstrap=compare_bootstrap, select_folds=3)
    return spec


def write_inputs(folder: Path, model: SyntheticModel, n: int, seed: int) -> tuple[Path, Path]:
    """A study's logits ``log p`` of ``n`` samples of ``model`` and the study's split."""
    from calbench.split import save_split, study_split

    probs, labels = model.sample(n, np.random.default_rng([seed, 7]))
    files = (folder / "logits.npz", folder / "split.npz")
    np.savez(files[0], logits=np.log(probs), labels=labels, order_hash="h", model="m",
             dataset="d")  # fmt: skip
    save_split(files[1], *study_split(n))
    return files


def population(model: SyntheticModel, temperature: float) -> dict:
    """Population ``nll``, ``brier`` and ``ece_ub`` of ``model`` temperature-scaled."""
    s = population_scores(model, temperature=temperature, points=POINTS)
    e = population_errors(model, temperature=temperature, points=POINTS)
    return {"nll": s["nll"], "brier": s["brier"], "ece_ub": e["ece_ub"]}


def fitted_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    cal = get_calibrator("ts").fit(logits, labels)
    return 1.0 / float(cal.params_["a"][0])


def crossfit_estimand(model: SyntheticModel, n_fit: int, fits: int, seed: int = 12345) -> dict:
    """Mean over ``fits`` fits of ``ts`` on fresh samples of ``n_fit`` of the population errors
    at the fitted temperatures (and their Monte Carlo standard errors, ``<metric>_se``)."""
    vals = []
    for i in range(fits):
        p, y = model.sample(n_fit, np.random.default_rng([seed, i]))
        vals.append(population(model, fitted_temperature(np.log(p), y)))
    out = {}
    for m in METRICS:
        v = np.array([d[m] for d in vals])
        out[m], out[f"{m}_se"] = float(v.mean()), float(v.std(ddof=1) / math.sqrt(fits))
    return out


def optimal_temperature(model: SyntheticModel) -> float:
    """The temperature of least population NLL (what ``ts`` converges to)."""
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(
        lambda t: population_scores(model, temperature=t, points=POINTS)["nll"],
        bounds=(0.2, 5.0), method="bounded", options={"xatol": 1e-5},
    )  # fmt: skip
    return float(res.x)


def ece_gap(gamma: float, n_classes: int = 10) -> float:
    model = SyntheticModel(n_classes=n_classes, gamma=gamma)
    t = optimal_temperature(model)
    return population(model, 1.0)["ece_ub"] - population(model, t)["ece_ub"]


@cache
def gamma_for_gap(gap: float = 0.03, n_classes: int = 10) -> float:
    """``gamma`` at which the model's population ``ece_ub`` exceeds that of its population-optimal
    temperature scaling by ``gap`` (bisection on [1, 2])."""
    lo, hi = 1.0, 2.0
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ece_gap(mid, n_classes) < gap else (lo, mid)
    return 0.5 * (lo + hi)


def wiggle_gap(wiggle: float, n_fit: int, fits: int = 20, n_eval: int = 200_000) -> tuple:
    """Estimand of ``iso`` minus ``ts`` Brier score of :class:`~calbench.synthetic.WiggleModel`
    at ``wiggle``, both fitted on ``n_fit`` fresh samples (``fits`` times), evaluated paired on one
    sample of ``n_eval`` (the paired difference's sampling error is far below the unpaired
    one's): ``(mean, Monte Carlo standard error)``. Seeds are fixed, so the gap is a smooth
    function of ``wiggle`` (common random numbers) for the bisection of :func:`wiggle_for_equal`."""
    model = WiggleModel(wiggle=wiggle)
    pb, yb = model.sample(n_eval, np.random.default_rng([777, 1]))
    zb, onehot = np.log(pb), np.eye(model.n_classes)[yb]
    gaps = []
    for i in range(fits):
        p, y = model.sample(n_fit, np.random.default_rng([4242, i]))
        z = np.log(p)
        briers = [np.sum((get_calibrator(m).fit(z, y).predict_proba(zb) - onehot) ** 2, axis=1)
                  for m in ("iso", "ts")]  # fmt: skip
        gaps.append(float(np.mean(briers[0] - briers[1])))
    return float(np.mean(gaps)), float(np.std(gaps, ddof=1) / math.sqrt(fits))


@cache
def wiggle_for_equal(n_fit: int, lo: float = 0.3, hi: float = 0.6, steps: int = 8) -> float:
    """``wiggle`` at which ``iso`` and ``ts`` fitted on ``n_fit`` samples have equal population
    Brier score, averaged over fits (bisection on [lo, hi]; iso is worse at 0.3, better at 0.6
    for the sizes used here)."""
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if wiggle_gap(mid, n_fit)[0] > 0 else (lo, mid)
    return 0.5 * (lo + hi)


#: name: (gamma, or None for gamma_for_gap(0.03); N; calibrators; the compared pair)
CELLS = {
    "calibrated": (1.0, 2000, ("uncalibrated", "ts", "hist"), ("ts", "uncalibrated")),
    "power": (None, 10_000, ("uncalibrated", "ts", "hist"), ("ts", "uncalibrated")),
    "equal": ("wiggle", 2000, ("uncalibrated", "ts", "iso"), ("iso", "ts")),
    "overconfident": (1.6, 2000, ("uncalibrated", "ts", "hist"), ("ts", "uncalibrated")),
    "tiny": (1.6, 200, ("uncalibrated", "ts", "hist"), ("ts", "uncalibrated")),
}


def n_fit(scheme: str, n: int) -> int:
    """Samples a calibrator is fitted on: the validation half, or ``(F - 1) / F`` of all."""
    return n // 2 if scheme == "holdout" else n * (FOLDS - 1) // FOLDS


def cell_model(cell: str, scheme: str) -> tuple[SyntheticModel, int]:
    gamma, n, _, _ = CELLS[cell]
    if gamma == "wiggle":  # the null of equal Brier estimands of iso and ts at this fit size
        return WiggleModel(wiggle=wiggle_for_equal(n_fit(scheme, n))), n
    return SyntheticModel(gamma=gamma_for_gap() if gamma is None else gamma), n


def record_model(rec: dict) -> SyntheticModel:
    """The model a stored study was drawn from."""
    if "gamma" not in rec:
        return cell_model(rec["cell"], rec["scheme"])[0]
    if rec.get("wiggle") is not None:
        return WiggleModel(wiggle=rec["wiggle"])
    return SyntheticModel(gamma=rec["gamma"])


def _no_draw(*args, **kwargs) -> None:
    """Stands in for :func:`calbench.steps.draw`: an empty file where the picture would go."""
    out = args[2] if len(args) > 2 else kwargs["out"]
    Path(out).write_bytes(b"")


def run_study(cell: str, scheme: str, seed: int, n_bootstrap: int = 200) -> dict:
    """One study through :meth:`CalibrateSpec.run`: the rows of its metric and compare CSVs that
    this script reads, with the fitted ``ts`` temperature on the validation half (holdout)."""
    from calbench import protocol
    from calbench.protocol import CalibrateSpec
    from calbench.results import COMPARE_COLUMNS, METRIC_COLUMNS, read_long_csv

    model, n = cell_model(cell, scheme)
    calibrators = CELLS[cell][2]
    real = protocol.draw
    protocol.draw = _no_draw
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            files = write_inputs(folder, model, n, seed)
            out = folder / "out"
            spec = CalibrateSpec.from_dict(spec_dict(scheme, calibrators, n_bootstrap))
            spec.run(*files, calibrators_dir=out, metrics_dir=out, plots_dir=out,
                     compare_out=out / "compare.csv")  # fmt: skip
            metrics = read_long_csv([out / f"{k}.csv" for k in calibrators], METRIC_COLUMNS)
            compare = read_long_csv([out / "compare.csv"], COMPARE_COLUMNS, numeric=())
            from calbench.calibrators import load_calibrator

            ts = load_calibrator(out / "ts.json")
            temperature = 1.0 / float(ts.params_["a"][0])
    finally:
        protocol.draw = real
    keep = ("metric", "method", "baseline", "difference", "p_value", "p_holm", "family", "test",
            "ci_low", "ci_high")  # fmt: skip
    return {
        "cell": cell, "scheme": scheme, "seed": seed, "n": n,
        "gamma": model.gamma, "wiggle": getattr(model, "wiggle", None),
        "temperature": temperature,  # holdout: the fit on the validation half
        "metrics": [{k: r[k] for k in ("method", "metric", "value", "ci_low", "ci_high")}
                    for r in metrics],
        "compare": [{k: r[k] for k in keep} for r in compare],
    }  # fmt: skip


def _share(hits) -> tuple[float, float, int]:
    h = np.asarray(hits, dtype=float)
    s = len(h)
    p = float(h.mean()) if s else math.nan
    return p, math.sqrt(p * (1 - p) / s) if s else math.nan, s


def _fmt(share) -> str:
    p, se, _ = share
    return f"{p:.3f} ± {se:.3f}"


def coverage_table(records: list[dict], estimands: dict) -> list[tuple]:
    """Rows ``(cell, scheme, method, metric, coverage, studies, mean width)``: the share of
    studies whose reported interval holds the scheme's estimand. ``estimands[(cell, scheme)]``
    gives, for crossfit, ``{method: {metric: value}}``; for holdout ``ts``'s estimand is the
    population value at the study's fitted temperature."""
    rows = []
    for (cell, scheme), est in sorted(estimands.items()):
        recs = [r for r in records if (r["cell"], r["scheme"]) == (cell, scheme)]
        model = record_model(recs[0])
        for method in ("uncalibrated", "ts"):
            for metric in METRICS:
                hits, widths = [], []
                for r in recs:
                    row = next(x for x in r["metrics"]
                               if (x["method"], x["metric"]) == (method, metric))  # fmt: skip
                    lo, hi = float(row["ci_low"]), float(row["ci_high"])
                    if not (math.isfinite(lo) and math.isfinite(hi)):
                        continue
                    if scheme == "holdout" and method == "ts":
                        truth = population(model, r["temperature"])[metric]
                    else:
                        truth = est[method][metric]
                    hits.append(lo <= truth <= hi)
                    widths.append(hi - lo)
                if hits:
                    rows.append((cell, scheme, method, metric, _share(hits),
                                 float(np.mean(widths))))  # fmt: skip
    return rows


def rejection_table(records: list[dict], alpha: float = 0.05) -> list[tuple]:
    """Rows ``(cell, scheme, method, baseline, metric, test, better, worse, any, raw)``: for the
    cell's compared pair (:data:`CELLS`; its row of family ``vs:<baseline>``), the share of
    studies with Holm p < alpha and ``method`` better (difference < 0), and worse; ``any``: the
    share with any row of the compare CSV between the two (any family, either order: the
    ``best`` family's too) significant; ``raw``: the ``vs:<baseline>`` row's unadjusted p <
    alpha, either sign."""
    rows = []
    keys = sorted({(r["cell"], r["scheme"]) for r in records})
    for cell, scheme in keys:
        method, baseline = CELLS[cell][3]
        recs = [r for r in records if (r["cell"], r["scheme"]) == (cell, scheme)]
        for metric in METRICS:
            better, worse, anyrow, raw, test = [], [], [], [], ""
            for r in recs:
                anyrow.append(any(
                    float(x["p_holm"]) < alpha for x in r["compare"] if x["metric"] == metric
                    and {x["method"], x["baseline"]} == {method, baseline}))  # fmt: skip
                row = next(x for x in r["compare"] if x["metric"] == metric
                           and x["method"] == method and x["baseline"] == baseline
                           and x["family"] == f"vs:{baseline}")  # fmt: skip
                sig = float(row["p_holm"]) < alpha
                raw.append(float(row["p_value"]) < alpha)
                d = float(row["difference"])
                better.append(sig and d < 0)
                worse.append(sig and d > 0)
                test = row["test"]
            rows.append((cell, scheme, method, baseline, metric, test, _share(better),
                         _share(worse), _share(anyrow), _share(raw)))  # fmt: skip
    return rows


def pair_scores(records: list[dict], metric: str) -> np.ndarray:
    """``(S, 2)``: each study's reported ``metric`` of its cell's compared pair (method,
    baseline), the rows of one study over models."""
    out = []
    for r in records:
        pair = CELLS[r["cell"]][3]
        vals = {x["method"]: float(x["value"]) for x in r["metrics"] if x["metric"] == metric}
        out.append([vals[pair[0]], vals[pair[1]]])
    return np.array(out)


def over_models_coverage(pool: np.ndarray, models: int, groups: int, seed: int = 0) -> tuple:
    """Coverage of the intervals over models (:func:`calbench.stats.over_models.win_rates`,
    BCa; :func:`~calbench.stats.over_models.improvement`, bootstrap-t) of studies of ``models``
    models drawn with replacement from ``pool`` ``(S, 2)`` (column 0 the method, 1 the
    baseline; lower is better), whose population is then the pool itself: the true win rate is
    the pool's share of wins (a tie counts 1/2), the true improvement its mean difference.
    Returns ``(true win rate, win-rate coverage, true improvement, improvement coverage)``,
    the coverages as ``(share, MC se, groups)``."""
    from calbench.stats.over_models import improvement, win_rates

    names = ["method", "baseline"]
    d = pool[:, 1] - pool[:, 0]
    true_win = float(np.mean((d > 0) + 0.5 * (d == 0)))
    true_imp = float(np.mean(d))
    rng = np.random.default_rng([seed, models])
    win_hits, imp_hits = [], []
    for g in range(groups):
        s = pool[rng.integers(0, len(pool), models)]
        w = win_rates(s, names, n_boot=1000, seed=g, min_models=1)  # the interval at any M
        win_hits.append(w.low[0, 1] <= true_win <= w.high[0, 1])
        imp = improvement(s, names, baseline="baseline", n_boot=1000, seed=g)
        _, lo, hi = imp.of("method")
        imp_hits.append(lo <= true_imp <= hi)
    return true_win, _share(win_hits), true_imp, _share(imp_hits)


def estimands_for(records: list[dict], fits: int) -> dict:
    out = {}
    for cell, scheme in sorted({(r["cell"], r["scheme"]) for r in records}):
        first = next(r for r in records if (r["cell"], r["scheme"]) == (cell, scheme))
        model, n = record_model(first), CELLS[cell][1]
        uncal = population(model, 1.0)
        ts = crossfit_estimand(model, n_fit(scheme, n), fits) if scheme == "crossfit" else {}
        out[(cell, scheme)] = {"model": model, "n": n, "uncalibrated": uncal, "ts": ts}
    return out


def summarise(records: list[dict], fits: int = 200, groups: int = 400) -> None:
    est = estimands_for(records, fits)
    for (cell, scheme), e in est.items():
        model, n = e["model"], e["n"]
        extra = (
            ""
            if not e["ts"]
            else (
                "; crossfit ts estimand "
                + ", ".join(
                    f"{m} {e['ts'][m]:.5f} (MC se {e['ts'][m + '_se']:.5f})" for m in METRICS
                )
            )
        )
        shape = (
            f"wiggle {model.wiggle:.4f}"
            if isinstance(model, WiggleModel)
            else (f"gamma {model.gamma:.4f}")
        )
        print(
            f"{cell}/{scheme}: {shape}, N {n}; population uncalibrated "
            + ", ".join(f"{m} {v:.5f}" for m, v in e["uncalibrated"].items())
            + extra
        )
    print("\ncoverage of the reported 95% intervals")
    print("| cell | scheme | method | metric | coverage ± MC se | studies | mean width |")
    print("|---|---|---|---|---:|---:|---:|")
    for cell, scheme, method, metric, share, width in coverage_table(records, est):
        print(
            f"| {cell} | {scheme} | {method} | {metric} | {_fmt(share)} | {share[2]} | "
            f"{width:.4f} |"
        )
    print("\nthe cell's pair: share of studies with Holm p < 0.05")
    print(
        "| cell | scheme | method vs baseline | metric | test | method better ± MC se | "
        "method worse ± MC se | any row of the pair ± MC se | unadjusted p < 0.05 ± MC se | "
        "studies |"
    )
    print("|---|---|---|---|---|---:|---:|---:|---:|---:|")
    for row in rejection_table(records):
        cell, scheme, method, base, metric, test, better, worse, anyrow, raw = row
        print(
            f"| {cell} | {scheme} | {method} vs {base} | {metric} | {test} | {_fmt(better)} | "
            f"{_fmt(worse)} | {_fmt(anyrow)} | {_fmt(raw)} | {better[2]} |"
        )
    print(f"\nintervals over models, studies of M models drawn from the pool, {groups} a row")
    print(
        "| cell | scheme | metric | pool | M | true win rate | BCa win-rate coverage | "
        "true improvement | bootstrap-t improvement coverage |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for cell, scheme in est:
        recs = [r for r in records if (r["cell"], r["scheme"]) == (cell, scheme)]
        if cell not in ("equal", "calibrated") or len(recs) < 20:
            continue
        for metric in ("brier", "nll"):
            pool = pair_scores(recs, metric)
            for m in (10, 20, 50):
                tw, wc, ti, ic = over_models_coverage(pool, m, groups)
                print(
                    f"| {cell} | {scheme} | {metric} | {len(pool)} | {m} | {tw:.3f} | "
                    f"{_fmt(wc)} | {ti:.5f} | {_fmt(ic)} |"
                )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", nargs="+", default=["calibrated", "power"], choices=list(CELLS))
    ap.add_argument("--schemes", nargs="+", default=["holdout", "crossfit"])
    ap.add_argument("--studies", type=int, default=100)
    ap.add_argument("--first-seed", type=int, default=0, help="the first study's seed")
    ap.add_argument("--n-bootstrap", type=int, default=200)
    ap.add_argument("--fits", type=int, default=200, help="fits of the crossfit estimand")
    ap.add_argument("--out", type=Path, default=Path("sim_pipeline.jsonl"))
    ap.add_argument("--stop-at", default=None, help="UTC HH:MM after which no study starts")
    ap.add_argument("--summarise", action="store_true")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    records = []
    if args.out.exists():
        records = list(
            {
                (r["cell"], r["scheme"], r["seed"]): r
                for r in reversed(
                    [json.loads(line) for line in args.out.read_text().splitlines() if line]
                )
            }.values()
        )[::-1]  # one record per study (the first written), should two runs have written it
    if not args.summarise:
        done = {(r["cell"], r["scheme"], r["seed"]) for r in records}
        for seed in range(args.first_seed, args.studies):  # interleaved: every cell grows together
            for cell in args.cells:
                for scheme in args.schemes:
                    if (cell, scheme, seed) in done:
                        continue
                    if args.stop_at and time.strftime("%H:%M", time.gmtime()) >= args.stop_at:
                        break
                    t0 = time.perf_counter()
                    rec = run_study(cell, scheme, seed, args.n_bootstrap)
                    rec["s"] = time.perf_counter() - t0
                    records.append(rec)
                    with args.out.open("a") as fh:
                        fh.write(json.dumps(rec) + "\n")
                    print(f"{cell} {scheme} seed {seed}: {rec['s']:.1f} s", flush=True)
    summarise(records, args.fits)


if __name__ == "__main__":
    main()
