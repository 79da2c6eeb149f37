"""The post-hoc calibration protocol on files: one spec, one check, one run.

The protocol is the study's (Vasilev 2021, §4-5): calibrators are fitted on the validation half of
a model's test-set logits (:func:`calbench.split.load_halves`) and applied to both halves; every
metric of the spec is reported on the test half (and, to show a calibrator's over-fit, on the
validation half), with the bootstrap confidence interval its registry entry names
(``Metric.interval``, :func:`calbench.stats.bootstrap_ci`). That is the ``holdout`` scheme, the default;
``evaluation.scheme: crossfit`` pools both halves and predicts every sample out of fold
(:meth:`CalibrateSpec._run_crossfit`; docs/statistics.md, "Cross-fitted evaluation").
:func:`calbench.stats.comparisons.compare_rows` tests, on the *test* half, every calibrator against
each baseline and the "best" calibrator against every other one, each family with Holm's
correction; "best" is chosen by K-fold cross-fitting inside the *validation* half
(:func:`calbench.stats.selection.crossfit_scores`: each candidate refitted on K - 1 folds and scored
on the held-out one), so neither the samples a calibrator was fitted on nor the test half pick
the winner.

:class:`CalibrateSpec` is the protocol's settings: the calibrators and the ``evaluation``,
``compare`` and ``plots`` sections, every default of which is in
:data:`calbench.calibrate_spec.DEFAULTS` (the workflow's
config schema states the same ``default:`` values and the CLI verbs read theirs from there;
``tests/test_protocol.py`` checks that they agree). :meth:`CalibrateSpec.from_config` builds it
from a validated config (the workflow's spec file, :meth:`CalibrateSpec.to_json`),
:meth:`CalibrateSpec.from_dict` reads that file back, :meth:`CalibrateSpec.check` checks every
setting before any work and :meth:`CalibrateSpec.run` is the workflow's step (``calbench
calibrate``). The by-hand verbs (``fit-calibrator``, ``evaluate``, ``compare``:
:func:`calbench.steps.fit_calibrator`, :func:`calbench.steps.evaluate`,
:func:`calbench.steps.compare`) check their settings with the same section checks
(:func:`calbench.steps.check_evaluation`, :func:`calbench.steps.check_compare`), run the same
steps (:func:`calbench.steps.fit_and_save`, :func:`calbench.steps.write_evaluation`, ...) and
write what ``run`` writes from the same inputs and settings. They live in :mod:`calbench.steps`,
not here, so that the code inputs of a verb run by hand stay its own (this module's spec class
is one unit of :mod:`calbench._sources`, and its ``run`` draws). Heavy libraries (torch, matplotlib) are imported inside the
functions that use them.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calbench import isolation
from calbench.calibrate_spec import CALIBRATE_SPEC, DEFAULTS, PLOT_OPTIONAL_KEYS, SCHEME_KEYS
from calbench.calibrators import get_calibrator
from calbench.io import array_digest
from calbench.results import (
    COMPARE_COLUMNS,
    METRIC_COLUMNS,
    PARTITION_COLUMNS,
    ROBUSTNESS_COLUMNS,
    write_long_csv,
)
from calbench.reuse import NAMES as REUSE_NAMES
from calbench.reuse import OOF as REUSE_OOF
from calbench.reuse import Reuse
from calbench.split import load_halves
from calbench.stats.selection import check_folds
from calbench.steps import (
    Evaluation,
    Scheme,
    apply_names,
    calibrator_maker,
    check_compare,
    check_evaluation,
    check_plot_options,
    check_scheme,
    crossfit_compare_rows,
    crossfit_evaluate_rows,
    draw,
    fit_and_save,
    isolated_maker,
    load_checked_calibrator,
    paired_rows,
    pooled_samples,
    predict_halves,
    write_evaluation,
)

_CALIBRATOR_KEYS = {"method", "params", "display"}


@dataclass(frozen=True)
class Plan:
    """What :meth:`CalibrateSpec.check` resolved: the evaluation, the compared metrics, the
    calibrators left out of the selection and each calibrator, constructed."""

    evaluation: Evaluation
    scheme: Scheme
    compared: dict
    exclude: list
    fitters: dict


@dataclass(frozen=True)
class CalibrateSpec:
    """The calibrate step's settings: ``calibrators`` (``{key: {"method", "params",
    "display"}}``, in order) and the ``evaluation``, ``compare`` and ``plots`` sections with the
    keys of :data:`calbench.calibrate_spec.CALIBRATE_SPEC`."""

    calibrators: dict
    evaluation: dict
    compare: dict
    plots: dict

    @classmethod
    def from_config(cls, config: Mapping) -> CalibrateSpec:
        """The spec of a validated config (the schema's defaults filled in, as Snakemake's
        ``validate`` leaves it): every calibrator (registry ``method``, default its key;
        ``params``; ``display`` name, default its key), in config order, and the ``evaluation``,
        ``compare`` and ``plots`` keys of :data:`CALIBRATE_SPEC` (an evaluation key the config
        leaves out is ``None``: every half / metric)."""
        ev = config["evaluation"]
        return cls(
            calibrators={
                c: {"method": (e or {}).get("method", c), "params": (e or {}).get("params", {}),
                    "display": str((e or {}).get("display", c))}
                for c, e in config["calibrators"].items()
            },
            evaluation={
                k: ev.get(k, DEFAULTS["evaluation"][k] if k in SCHEME_KEYS else None)
                for k in CALIBRATE_SPEC["evaluation"]
            },
            compare={k: config["compare"][k] for k in CALIBRATE_SPEC["compare"]},
            plots={
                k: config["plots"].get(k, DEFAULTS["plots"][k])
                if k in PLOT_OPTIONAL_KEYS
                else config["plots"][k]
                for k in CALIBRATE_SPEC["plots"]
            },
        )  # fmt: skip

    @classmethod
    def from_dict(cls, spec) -> CalibrateSpec:
        """The spec of a spec file's JSON object, its keys checked (one error naming every
        missing or unknown one)."""
        _check_keys(spec)
        ev = {**{k: DEFAULTS["evaluation"][k] for k in SCHEME_KEYS}, **spec["evaluation"]}
        ev = {k: ev[k] for k in CALIBRATE_SPEC["evaluation"]}
        plots = {**{k: DEFAULTS["plots"][k] for k in PLOT_OPTIONAL_KEYS}, **spec["plots"]}
        plots = {k: plots[k] for k in CALIBRATE_SPEC["plots"]}
        return cls(
            **{s: spec[s] for s in CALIBRATE_SPEC if s not in ("evaluation", "plots")},
            evaluation=ev,
            plots=plots,
        )

    def to_dict(self) -> dict:
        """The spec file's object; the scheme's keys (:data:`SCHEME_KEYS`) only for a
        cross-fitted spec, so that a holdout spec's file is what it was before they existed."""
        out = {section: getattr(self, section) for section in CALIBRATE_SPEC}
        if self.evaluation.get("scheme", "holdout") == "holdout":
            out["evaluation"] = {k: v for k, v in self.evaluation.items() if k not in SCHEME_KEYS}
        out["plots"] = {
            k: v
            for k, v in self.plots.items()
            if not (k in PLOT_OPTIONAL_KEYS and v == DEFAULTS["plots"][k])
        }
        return out

    def to_json(self) -> str:
        """The text of the spec file (key order kept: the file's digest, and so whether the
        calibrate jobs rerun, depends on it)."""
        return json.dumps(self.to_dict(), sort_keys=False)

    def check(self) -> Plan:
        """Every setting checked before any work (one error naming the first problem): the
        keys, the evaluation (:func:`check_evaluation`), the comparisons (:func:`check_compare`),
        the plot options and each calibrator constructed (an unknown method or parameter names
        the calibrator)."""
        _check_keys(self.to_dict())
        ev = check_evaluation(self.evaluation)
        scheme = check_scheme(self.evaluation)
        keys = list(self.calibrators)
        compared, exclude = check_compare(self.compare, ev.level, keys)
        plots = dict(self.plots)
        per_calibrator = plots.pop("per_calibrator", True)
        if not isinstance(per_calibrator, bool):
            raise ValueError(
                f"plots.per_calibrator must be true or false, got {per_calibrator!r}; false draws "
                "each model's grid alone"
            )
        check_plot_options(plots)
        fitters = {}
        for key, entry in self.calibrators.items():
            try:
                fitters[key] = get_calibrator(entry["method"], **(entry.get("params") or {}))
            except ValueError as exc:
                raise ValueError(
                    f"calibrator {key!r} (method {entry['method']!r}): {exc}"
                ) from None
        return Plan(ev, scheme, compared, exclude, fitters)

    def run(
        self,
        logits_path,
        split_path,
        *,
        calibrators_dir,
        metrics_dir,
        plots_dir,
        compare_out,
        robustness_out=None,
        dataset: str | None = None,
        model: str | None = None,
        reuse_dir=None,
        partitions_out=None,
    ) -> list[Path]:
        """Every calibrator of the spec on one model, in one process: the workflow's step.

        This is the ``holdout`` scheme; with ``evaluation.scheme: crossfit`` every labelled
        sample is predicted out of fold instead (:meth:`_run_crossfit`, whose partitions file
        goes to ``partitions_out``; ``reuse_dir`` then also keeps each calibrator's out-of-fold
        predictions and its inner fits' scores).

        For each entry ``key`` of ``calibrators`` (in order): fit ``method`` with ``params`` on
        the validation half (:func:`fit_calibrator`'s protocol) -> ``calibrators_dir/key.json``;
        its metrics on both halves (:func:`calbench.steps.evaluate_rows`, ``evaluation``) ->
        ``metrics_dir/key.csv``; its reliability diagram on the test half ->
        ``plots_dir/key.png``. Then the paired comparisons (:func:`compare_rows`, ``compare``;
        the "best" calibrator of each compared metric chosen by
        :func:`calbench.steps.select_best`: ``select_folds``-fold cross-fitting inside the
        validation half, over every calibrator but ``select_exclude``, which costs
        ``select_folds`` more fits of each candidate) -> ``compare_out`` and the grid of every
        calibrator's diagram -> ``plots_dir/grid.png``; with ``robustness_out`` the
        calibrators' ranks under other ECE variants and their bootstrap first-place
        probabilities (:func:`calbench.stats.robustness.robustness_rows`,
        ``evaluation.n_bootstrap`` resamples, ``evaluation.seed``) -> that CSV. Each file
        equals what the single-step verbs (``fit-calibrator``, ``evaluate``, ``compare``,
        ``plot-reliability --grid``) write from the same inputs and settings; the predictions
        come from the calibrator as saved, so the JSON is what every downstream step reads.

        One process per model instead of one per (model, calibrator) and step: the interpreter
        and library imports (~1.5 s) are paid once per model. An error names the calibrator; on
        any error every file written so far is removed (no partial output). Returns the written
        paths.

        Plug-in code is isolated (:mod:`calbench.isolation`): the logits and labels are
        read-only, each calibrator fits and predicts on copies of them, its predictions are
        checked (a NumPy float ``(N, K)`` array of probabilities, no reused buffer) and made
        read-only, plug-in metrics get read-only views and must return finite floats; a
        plug-in's failure is one line naming the calibrator or metric.

        ``reuse_dir``: a folder of copies of each calibrator's three files under a digest of
        everything they depend on (:func:`calbench.reuse.reuse_digest`: the calibrator's entry,
        the evaluation and plot settings, the logits, the split, the dataset and model names,
        the library's source and the versions of the numeric libraries). A calibrator whose
        digest has a copy is not refitted: its files are copied back (the bytes a refit would
        write, since every step is deterministic) and its predictions are recomputed from its
        JSON for the comparisons, the grid and the ranks; what the cross-fitted selection found
        for it is kept there too (:meth:`calbench.reuse.Reuse.known_selection`), so it is not
        refitted on the folds either. Adding a calibrator to the study then fits only the new
        one. A calibrator's files are kept only after the logits and labels are verified
        unchanged (their digest as loaded), so no kept result was computed on inputs that
        plug-in code altered.
        """
        plan = self.check()
        ev, cmp, plot = plan.evaluation, self.compare, dict(self.plots)
        per_calibrator = plot.pop("per_calibrator", True)  # else the grid alone
        calibrators = self.calibrators
        data = load_halves(logits_path, split_path)
        if plan.scheme.name == "crossfit":
            return self._run_crossfit(
                plan, data, dirs=(calibrators_dir, metrics_dir, plots_dir),
                compare_out=compare_out, robustness_out=robustness_out,
                partitions_out=partitions_out, dataset=dataset, model=model,
                reuse_dir=reuse_dir, split_path=split_path,
            )  # fmt: skip
        check_folds(cmp["select_folds"], len(data["val"][1]))  # before any fit, not at selection
        apply_names(data, dataset, model)
        meta = data["meta"]
        # every calibrator and metric sees these arrays: none may change them (calbench.isolation)
        isolation.freeze(*data["val"], *data["test"])
        check_unchanged = _inputs_check(*data["val"], *data["test"])

        dirs = {"cal": Path(calibrators_dir), "met": Path(metrics_dir), "plot": Path(plots_dir)}
        written: list[Path] = []
        try:
            test_probs, val_probs = {}, {}
            test_jackknives: dict = {}  # the metrics rows' jackknives, for the comparisons
            reuse = None
            if reuse_dir is not None:
                reuse = Reuse(reuse_dir, self.to_dict(), data, split_path)
            for key, cal in plan.fitters.items():
                path, csv = dirs["cal"] / f"{key}.json", dirs["met"] / f"{key}.csv"
                png = dirs["plot"] / f"{key}.png" if per_calibrator else None
                paths = (path, csv, png) if per_calibrator else (path, csv)
                if reuse is not None and reuse.restore(key, paths):
                    try:
                        saved = load_checked_calibrator(path, data)
                        earlier = [*test_probs.values(), *val_probs.values()]
                        kept = predict_halves(saved, data, ["test", "val"], earlier)
                    except (ValueError, OSError):  # a kept file that does not load: refit
                        reuse.forget(key, paths)
                    else:
                        test_probs[key], val_probs[key] = kept["test"], kept["val"]
                        written += paths
                        continue
                try:
                    fit_and_save(cal, data, path)
                    written.append(path)
                    saved = load_checked_calibrator(path, data)
                    earlier = [*test_probs.values(), *val_probs.values()]
                    probs = predict_halves(saved, data, [*ev.half_names, "val"], earlier)
                    title = str(calibrators[key].get("display") or key)
                    write_evaluation(
                        data, probs, key, ev, csv, png, {**plot, "title": title}, written,
                        jackknives=(kept := {}),
                    )  # fmt: skip
                    test_jackknives[key] = kept.get("test", {})
                except ValueError as exc:
                    raise ValueError(
                        f"calibrator {key!r} (method {calibrators[key]['method']!r}): {exc}"
                    ) from exc.__cause__
                if reuse is not None:
                    # only results computed on intact inputs are kept
                    check_unchanged(f"while calibrator {key!r} ran")
                    reuse.store(key, paths)
                test_probs[key], val_probs[key] = probs["test"], probs["val"]
            makers = {
                key: calibrator_maker(e["method"], e.get("params") or {})
                for key, e in calibrators.items()
            }
            selection = {
                "folds": cmp["select_folds"],
                "seed": ev.seed,
                "metrics": list(plan.compared),
            }
            found: dict = {}

            def selected() -> None:
                if reuse is not None:
                    check_unchanged("during the cross-fitted selection")  # kept only if intact
                    reuse.keep_selection(selection, found)

            rows = paired_rows(
                data, test_probs, makers, plan.compared, cmp, plan.exclude, ev.level, ev.seed,
                jackknives=test_jackknives, found=found, selected=selected,
                known=None if reuse is None else reuse.known_selection(selection),
            )  # fmt: skip
            check_unchanged("during the selection or the comparisons")  # before any shared output
            write_long_csv(compare_out, rows, COMPARE_COLUMNS)
            written.append(Path(compare_out))
            grid = dirs["plot"] / "grid.png"
            draw(test_probs, data["test"][1], grid, grid=True, **plot)
            written.append(grid)
            if robustness_out is not None:
                from calbench.stats.robustness import robustness_rows  # lazy: code inputs

                rows = robustness_rows(
                    test_probs,
                    data["test"][1],
                    dataset=meta["dataset"],
                    model=meta["model"],
                    n_resamples=ev.n_bootstrap,
                    seed=ev.seed,
                )
                write_long_csv(robustness_out, rows, ROBUSTNESS_COLUMNS)
                written.append(Path(robustness_out))
            if reuse is not None:
                reuse.prune()
        except BaseException:
            for path in written:
                path.unlink(missing_ok=True)
            raise
        return written

    def _run_crossfit(
        self, plan, data, *, dirs, compare_out, robustness_out, partitions_out, dataset, model,
        reuse_dir=None, split_path=None,
    ) -> list[Path]:  # fmt: skip
        """:meth:`run` with ``evaluation.scheme: crossfit``: every labelled sample (the
        validation half, then the test half) predicted out of fold.

        The ``N`` samples get ``repeats`` stratified partitions into ``folds`` folds
        (:func:`calbench.crossfit.fold_assignments`, seed ``evaluation.seed``); each calibrator
        is fitted on every fold but one and predicts the held-out one
        (:func:`calbench.crossfit.crossfit_predict`). Its metric rows (``half`` ``oof``,
        :func:`calbench.steps.crossfit_evaluate_rows`) and its diagram (the first partition's
        out-of-fold predictions) are computed from those; the calibrator saved as JSON (what the
        temperatures, the by-hand verbs and later steps read) is the one fitted on all ``N``.
        The "best" of each compared metric is chosen inside each training part
        (:func:`calbench.crossfit.nested_bests`, its inner folds the two neighbouring outer
        folds on the ring of folds, each inner fit shared by two outer folds; with ``folds: 2``
        ``compare.select_folds`` inner folds), and the
        comparisons use the corrected repeated cross-validation t-test
        (:func:`calbench.steps.crossfit_compare_rows`); with ``partitions_out`` their spread over
        the partitions -> that CSV (``PARTITION_COLUMNS``). The grid and the robustness ranks
        use the first partition's out-of-fold predictions of all ``N`` samples. ``reuse_dir``:
        as in :meth:`run`, each calibrator's files kept with its out-of-fold predictions
        (:data:`calbench.reuse.OOF`) and what its inner fits found (:func:`calbench.crossfit.ring_scores`
        per partition), so adding a calibrator fits only the new one; every output is the
        bytes a fresh run writes."""
        from calbench.crossfit import (  # lazy: code inputs
            crossfit_predict,
            fold_assignments,
            nested_bests,
        )

        ev, scheme, cmp, plot = plan.evaluation, plan.scheme, self.compare, dict(self.plots)
        per_calibrator = plot.pop("per_calibrator", True)  # else the grid alone
        apply_names(data, dataset, model)
        meta = data["meta"]
        isolation.freeze(*data["val"], *data["test"])
        z, y = pooled_samples(data, scheme.folds)
        # the inner folds are the two neighbouring outer folds (each inner fit shared by two);
        # with 2 folds there is one other, so then an inner select_folds-fold cross-fit of the
        # training part, (folds - 1) / folds of the samples
        inner = None if scheme.folds >= 3 else cmp["select_folds"]
        if inner is not None:
            check_folds(inner, len(y) - -(-len(y) // scheme.folds))
        check_unchanged = _inputs_check(z, y)
        assignment = fold_assignments(y, scheme.folds, scheme.repeats, ev.seed)
        cal_dir, met_dir, plot_dir = (Path(d) for d in dirs)
        makers = {
            key: isolated_maker(calibrator_maker(e["method"], e.get("params") or {}), key)
            for key, e in self.calibrators.items()
        }
        written: list[Path] = []
        scratch = tempfile.TemporaryDirectory(prefix="calbench-oof-")
        reuse = None
        if reuse_dir is not None:
            reuse = Reuse(reuse_dir, self.to_dict(), data, split_path)

        try:
            oof: dict = {}
            for key, cal in plan.fitters.items():
                entry = self.calibrators[key]
                path, csv, png = (
                    cal_dir / f"{key}.json",
                    met_dir / f"{key}.csv",
                    plot_dir / f"{key}.png",
                )
                outs = (path, csv, png) if per_calibrator else (path, csv)
                kept = Path(scratch.name) / f"{key}.npy"
                names = (*REUSE_NAMES[: len(outs)], REUSE_OOF)
                if reuse is not None and reuse.restore(key, (*outs, kept), names):
                    try:
                        load_checked_calibrator(path, data)
                        got = np.load(kept, allow_pickle=False)
                        if got.shape != (len(assignment), *z.shape) or got.dtype != np.float64:
                            raise ValueError(f"kept out-of-fold predictions of shape {got.shape}")
                    except (ValueError, OSError):  # a kept file that does not load: refit
                        reuse.forget(key, outs)
                    else:
                        oof[key] = got
                        isolation.freeze(oof[key])
                        written += outs
                        continue
                try:
                    fit_and_save(cal, {"val": (z, y), "meta": meta}, path)
                    written.append(path)
                    load_checked_calibrator(
                        path, data
                    )  # the saved file loads as later steps load it
                    oof[key] = crossfit_predict(makers[key], z, y, assignment=assignment)
                    isolation.freeze(oof[key])
                    rows = crossfit_evaluate_rows(meta, y, oof[key], key, ev)
                    title = str(entry.get("display") or key)
                    if per_calibrator:
                        draw({key: oof[key][0]}, y, png, grid=False, **{**plot, "title": title})
                        written.append(png)
                    write_long_csv(csv, rows, METRIC_COLUMNS)
                    written.append(csv)
                except ValueError as exc:
                    raise ValueError(
                        f"calibrator {key!r} (method {entry['method']!r}): {exc}"
                    ) from exc.__cause__
                if reuse is not None:
                    check_unchanged(f"while calibrator {key!r} ran")  # only intact results kept
                    np.save(kept, oof[key], allow_pickle=False)
                    reuse.store(key, (*outs, kept), names)
            higher = {n: bool(getattr(fn, "higher_is_better", False)) for n, fn in plan.compared.items()}  # fmt: skip
            selection = {
                "scheme": "crossfit", "folds": scheme.folds, "repeats": scheme.repeats,
                "seed": ev.seed, "metrics": list(plan.compared), "inner": inner or "ring",
            }  # fmt: skip
            known = None if reuse is None or inner is not None else reuse.known_selection(selection)
            found: dict = {}
            nested = nested_bests(
                makers, z, y, plan.compared, higher=higher, seed=ev.seed, assignment=assignment,
                inner_folds=inner, oof=oof, exclude=plan.exclude, known_inner=known,
                found_inner=found,
            )  # fmt: skip
            if reuse is not None and inner is None:
                check_unchanged("during the cross-fitted selection")  # kept only if intact
                reuse.keep_selection(selection, found)
            selected_on = f"nested {scheme.folds}-fold x{scheme.repeats} cross-fit " + (
                f"(inner {inner}-fold)" if inner else "(inner: the 2 neighbouring folds)"
            )
            rows, parts = crossfit_compare_rows(
                meta, y, oof, assignment, plan.compared, cmp["baselines"], ev.level, nested,
                selected_on, n_permutations=cmp["n_bootstrap"], seed=ev.seed,
            )  # fmt: skip
            check_unchanged("during the cross-fit")
            write_long_csv(compare_out, rows, COMPARE_COLUMNS)
            written.append(Path(compare_out))
            if partitions_out is not None:
                write_long_csv(partitions_out, parts, PARTITION_COLUMNS)
                written.append(Path(partitions_out))
            first = {key: p[0] for key, p in oof.items()}
            grid = plot_dir / "grid.png"
            draw(first, y, grid, grid=True, **plot)
            written.append(grid)
            if robustness_out is not None:
                from calbench.stats.robustness import robustness_rows  # lazy: code inputs

                later = [{key: p[r] for key, p in oof.items()} for r in range(1, len(assignment))]
                rows = robustness_rows(
                    first, y, dataset=meta["dataset"], model=meta["model"],
                    n_resamples=ev.n_bootstrap, seed=ev.seed, partitions=later,
                )  # fmt: skip
                write_long_csv(robustness_out, rows, ROBUSTNESS_COLUMNS)
                written.append(Path(robustness_out))
            if reuse is not None:
                reuse.prune()
        except BaseException:
            for path in written:
                path.unlink(missing_ok=True)
            raise
        finally:
            scratch.cleanup()
        return written


def _inputs_check(*arrays):
    """``check(during)``: raises a one-line error if ``arrays`` (a model's logits and labels)
    no longer hold what they held when this was called; plug-in code must not have written into
    them before any result computed from them is kept or written."""
    inputs = array_digest(*arrays)

    def check(during: str) -> None:
        if array_digest(*arrays) != inputs:
            raise ValueError(
                f"the logits or labels changed {during} (plug-in code wrote into read-only "
                "arrays); fix the plug-in, whose changes void every later result"
            )

    return check


def _check_keys(spec) -> None:
    """The spec's sections and keys checked for missing and unknown ones (one error naming
    them) and each calibrator entry's shape."""
    if not isinstance(spec, dict):
        raise ValueError(f"the calibrate spec must be a JSON object, got {type(spec).__name__}")
    problems = []
    for section, keys in CALIBRATE_SPEC.items():
        if section not in spec:
            problems.append(f"missing section {section!r}")
        elif keys is not None:
            have = set(spec[section])
            optional = {"evaluation": SCHEME_KEYS, "plots": PLOT_OPTIONAL_KEYS}.get(section, ())
            problems += [
                f"{section}: missing key {k!r}" for k in keys if k not in have and k not in optional
            ]
            problems += [f"{section}: unknown key {k!r}" for k in sorted(have - set(keys))]
    problems += [f"unknown section {k!r}" for k in sorted(set(spec) - set(CALIBRATE_SPEC))]
    cals = spec.get("calibrators")
    if not problems:
        if not isinstance(cals, dict) or not cals:
            problems.append("calibrators must map at least one key to its entry")
        else:
            for key, entry in cals.items():
                bad = sorted(set(entry) - _CALIBRATOR_KEYS) if isinstance(entry, dict) else None
                if bad is None or bad or "method" not in entry:
                    problems.append(
                        f"calibrators.{key} must be an object with 'method' and optional "
                        f"'params', 'display' (got {entry!r})"
                    )
    if problems:
        raise ValueError(
            "invalid calibrate spec: " + "; ".join(problems) + " (write it with "
            "calbench.protocol.CalibrateSpec.from_config(config).to_json(), as the workflow "
            "does, or by hand with these keys)"
        )
