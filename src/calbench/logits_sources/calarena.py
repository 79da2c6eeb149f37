"""CalArena's published predictions (format ``calarena``) and its per-calibrator results CSVs.

CalArena (Berta, Holzmüller, Bach & Jordan 2026, "CalArena: A Large-Scale Post-Hoc Calibration
Benchmark"; github.com/probkit/CalArena) publishes seven benchmarks (``tabrepo-binary``,
``tabarena-binary``, ``cv-binary``, ``tabrepo-multiclass``, ``tabarena-multiclass``,
``cv-multiclass``, ``imagenet-multiclass``), each one HDF5 file ``{benchmark}.h5`` with an index
``{benchmark}-experiments.csv``, on the Hugging Face dataset ``probkit/CalArena``.

The HDF5 layout, as written by probkit/CalArena ``calibration_benchmarks/generate_cv_benchmarks.py``
(and ``generate_tabrepo_benchmarks.py``, ``generate_tabarena_benchmarks.py``) and read by
``run_benchmark.py`` (``h5[f"{dataset}/{model}"]``), described in its ``README.md``: one group
per experiment, ``{dataset}/{model}``, holding four datasets,

* ``probas_cal``, ``probas_test``: float32 probabilities; ``(n, K)`` for multiclass benchmarks,
  ``(n,)`` (the positive class's probability) for binary ones;
* ``labels_cal``, ``labels_test``: int32 class indices ``(n,)``;

and file attributes ``problem_type`` (``binary`` / ``multiclass``) and ``source``. The
calibration part (CalArena's ``cal``) is the study's validation part: the file comes pre-split
(``split: file``), rows ``0 .. n_cal-1`` then the test rows.

Probabilities become logits as log-probabilities, with the map probmetrics uses for a
probability input (probkit/probmetrics ``probmetrics/distributions.py``,
``CategoricalProbs.get_logits``): a binary ``p`` becomes the two columns ``(1 - p, p)``, and
``log p`` is clipped below at ``log(float32 tiny)`` (about -87.34), so a probability of exactly 0
stays finite. ``softmax(log p)`` gives back ``p`` re-normalised (CalArena's float32 rows sum to 1
within ~1e-7), a zero as 1.2e-38: calbench's probability-space calibrators (histogram binning,
isotonic, BBQ, ...) see CalArena's probabilities up to that rounding, and its logit-space ones
(temperature, vector, matrix scaling, Dirichlet) see the same logits probmetrics' scaling
calibrators compute. Where a result still differs from CalArena's own, it is the calibrator's
implementation (calbench's fits versus probmetrics'), the metric's convention (e.g. CalArena's
``ece-15`` is probmetrics' top-label ECE with 15 equal-width bins; its ``brier`` sums over
classes) or, for a probability that was exactly 0, the clip above (a log-loss term of 87.34
instead of infinity).

The results CSVs, ``results/{benchmark}/{Calibrator}.csv`` (written by ``run_benchmark.py``, read
by ``utils.py`` ``load_benchmark_results``): columns ``dataset, model, cal_size, test_size``,
``n_classes`` (multiclass benchmarks only), then ``{Calibrator}_{metric}`` for ``brier``,
``logloss``, ``ece-15``, ``accuracy`` (and ``kuiper`` for binary benchmarks) and
``{Calibrator}_time`` (seconds): :func:`read_results_csv`.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

#: The four datasets of an experiment's group (probkit/CalArena run_benchmark.py).
KEYS = ("probas_cal", "labels_cal", "probas_test", "labels_test")
#: log(float32 tiny): the floor of a log-probability (probmetrics CategoricalProbs.get_logits).
LOG_FLOOR = float(np.log(np.finfo(np.float32).tiny))
#: How far a row of probabilities may sum from 1 (float32 rounding of K terms) before it is refused.
SUM_TOLERANCE = 1e-3
_GROUP = re.compile(r"[^/\s][^/]*/[^/\s][^/]*")


def log_probabilities(p, path, what: str) -> np.ndarray:
    """``log p`` (float64, clipped below at :data:`LOG_FLOOR`) of CalArena probabilities: ``(n,)``
    binary probabilities of class 1 become the columns ``(1 - p, p)``; ``(n, K)`` rows must be
    probabilities (in [0, 1], summing to 1 within :data:`SUM_TOLERANCE`)."""
    p = np.asarray(p)
    if p.dtype == object or not np.issubdtype(p.dtype, np.floating):
        raise ValueError(f"{path}: {what} has dtype {p.dtype}, expected float probabilities")
    p = p.astype(np.float64)
    if p.ndim == 2 and p.shape[1] == 1:
        p = p[:, 0]
    if p.ndim == 1:
        p = np.stack([1.0 - p, p], axis=1)
    if p.ndim != 2 or p.shape[0] < 1 or p.shape[1] < 2:
        raise ValueError(
            f"{path}: {what} has shape {p.shape}, expected (n,) binary or (n, K) probabilities"
        )
    if not np.isfinite(p).all() or (p < 0).any() or (p > 1).any():
        bad = int(np.flatnonzero((~(np.isfinite(p) & (p >= 0) & (p <= 1))).any(1))[0])
        raise ValueError(
            f"{path}: {what} row {bad} holds {p[bad][:4].tolist()}..., not probabilities in [0, 1]"
        )
    off = np.abs(p.sum(1) - 1.0)
    if (off > SUM_TOLERANCE).any():
        bad = int(np.argmax(off))
        raise ValueError(
            f"{path}: {what} row {bad} sums to {p[bad].sum():.6g}, not 1; these are not "
            "probabilities of one distribution (check the file and logits.group)"
        )
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(p), LOG_FLOOR)


def read_calarena(path, options: Mapping) -> tuple[np.ndarray, np.ndarray, tuple]:
    """One experiment of a CalArena ``{benchmark}.h5``: ``(logits, labels, (val_idx, test_idx))``
    with the calibration rows first. ``options["group"]`` names it, ``"{dataset}/{model}"``
    (a row of ``{benchmark}-experiments.csv``)."""
    group = options.get("group")
    if not isinstance(group, str) or not _GROUP.fullmatch(group):
        raise ValueError(
            f"{path}: format calarena needs logits.group, the experiment's '{{dataset}}/{{model}}' "
            f"(e.g. c10/densenet40), got {group!r}"
        )
    try:
        import h5py
    except ImportError:
        raise ValueError(
            f"{path}: reading CalArena's HDF5 files needs h5py, which is not installed; "
            "install it with pip install -e '.[calarena]'"
        ) from None

    try:
        fh = h5py.File(path, "r")
    except OSError as exc:
        first = (str(exc).splitlines() or [""])[0][:120]
        raise ValueError(
            f"{path} is not an HDF5 file ({first}); check logits.format or download it again"
        ) from None
    with fh:
        if group not in fh or not isinstance(fh[group], h5py.Group):
            datasets = sorted(fh.keys())[:5]
            raise ValueError(
                f"{path} has no experiment {group!r} (datasets: {', '.join(datasets)}...); "
                "take logits.group from the benchmark's experiments CSV (dataset/model)"
            )
        g = fh[group]
        missing = [k for k in KEYS if k not in g]
        if missing:
            raise ValueError(
                f"{path}: group {group} lacks {missing}; a CalArena group holds {list(KEYS)}"
            )
        arrays = {k: g[k][()] for k in KEYS}
    parts = []
    for part in ("cal", "test"):
        z = log_probabilities(arrays[f"probas_{part}"], path, f"{group}/probas_{part}")
        y = np.asarray(arrays[f"labels_{part}"])
        if y.dtype == object or not np.issubdtype(y.dtype, np.integer):
            raise ValueError(
                f"{path}: {group}/labels_{part} has dtype {y.dtype}, expected integer labels"
            )
        y = y.reshape(-1) if y.ndim == 2 and y.shape[1] == 1 else y
        if y.shape != (z.shape[0],):
            raise ValueError(
                f"{path}: {group}/labels_{part} has shape {y.shape} for {z.shape[0]} rows of "
                f"probas_{part}; they must pair up"
            )
        parts.append((z, y.astype(np.int64)))
    (zc, yc), (zt, yt) = parts
    if zc.shape[1] != zt.shape[1]:
        raise ValueError(
            f"{path}: {group} has {zc.shape[1]} classes in probas_cal, {zt.shape[1]} in probas_test"
        )
    n_cal, n = zc.shape[0], zc.shape[0] + zt.shape[0]
    split = (np.arange(n_cal, dtype=np.int64), np.arange(n_cal, n, dtype=np.int64))
    return np.concatenate([zc, zt]), np.concatenate([yc, yt]), split


# --------------------------------------------------------------------------- results CSV

#: The identifying columns of a results CSV (``n_classes`` only in multiclass benchmarks).
ID_COLUMNS = ("dataset", "model", "cal_size", "test_size")


def read_results_csv(path, calibrator: str | None = None) -> list[dict]:
    """CalArena's ``results/{benchmark}/{Calibrator}.csv`` as one dict per experiment:
    ``dataset``, ``model`` (str), ``cal_size``, ``test_size``, ``n_classes`` (int; 2 where the
    binary benchmarks have no such column), ``calibrator`` (the column prefix; default the file's
    stem) and ``metrics``: ``{name: float}`` for every ``{Calibrator}_{name}`` column (``brier``,
    ``logloss``, ``ece-15``, ``accuracy``, ``time``, binary ``kuiper``). A missing column, a
    column of another calibrator, a non-number or a repeated experiment is a one-line error."""
    path = Path(path)
    name = calibrator or path.stem
    prefix = f"{name}_"
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if not header:
            raise ValueError(f"{path} is empty; expected CalArena's header {', '.join(ID_COLUMNS)}")
        missing = [c for c in ID_COLUMNS if c not in header]
        if missing:
            raise ValueError(
                f"{path} lacks the columns {missing}; a CalArena results CSV starts with "
                f"{', '.join(ID_COLUMNS)}"
            )
        ids = set(ID_COLUMNS) | {"n_classes"}
        metric_cols = [c for c in header if c not in ids]
        foreign = [c for c in metric_cols if not c.startswith(prefix) or c == prefix]
        if foreign:
            raise ValueError(
                f"{path}: columns {foreign[:3]} are not {prefix}<metric>; is the file "
                f"{name}'s results (pass calibrator= for another name)?"
            )
        if not metric_cols:
            raise ValueError(f"{path} has no {prefix}<metric> columns")
        rows, seen = [], set()
        for line_no, values in enumerate(reader, start=2):
            if not values:
                continue
            if len(values) != len(header):
                raise ValueError(
                    f"{path}: line {line_no} has {len(values)} fields, the header {len(header)}"
                )
            rec = dict(zip(header, values, strict=True))
            key = (rec["dataset"], rec["model"])
            if key in seen:
                raise ValueError(f"{path}: line {line_no} repeats experiment {key[0]}/{key[1]}")
            seen.add(key)
            out = {"dataset": rec["dataset"], "model": rec["model"], "calibrator": name}
            for c in ("cal_size", "test_size", "n_classes"):
                if c not in rec:
                    out[c] = 2  # binary benchmarks
                    continue
                try:
                    out[c] = int(rec[c])
                except ValueError:
                    raise ValueError(
                        f"{path}: line {line_no}, {c} = {rec[c]!r} is not an integer"
                    ) from None
            metrics = {}
            for c in metric_cols:
                try:
                    v = float(rec[c])
                except ValueError:
                    raise ValueError(
                        f"{path}: line {line_no}, {c} = {rec[c]!r} is not a number"
                    ) from None
                if math.isnan(v):
                    raise ValueError(f"{path}: line {line_no}, {c} is NaN")
                metrics[c[len(prefix) :]] = v
            out["metrics"] = metrics
            rows.append(out)
    return rows
