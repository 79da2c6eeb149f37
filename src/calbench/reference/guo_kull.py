"""The Guo et al. 2017 / Kull et al. 2019 study on Kängsepp's published logits: tables and sweep.

Kängsepp's pickles (markus93/NN_calibration ``logits/``: DenseNet-40, ResNet-110, ResNet-110 SD,
Wide-ResNet-32, LeNet-5 on CIFAR-10/100, ResNet-152 SD on SVHN, DenseNet-161 and ResNet-152 on
ImageNet, ResNet-50 on Birds) hold each model's validation and test logits. Kull et al. 2019
computed their deep-network tables from exactly these files, Kängsepp's own notebook and CalArena
re-ran them; Guo et al. 2017 used their own Torch models of the same architectures. This module
compares the workflow's numbers on these logits with every published value packaged in
``guo_kull_logits.csv`` (:func:`calbench.reference.load_reference`):

* :func:`comparison_rows` -- one row per published cell: ours (test part), published, difference,
  tolerance, status. Cells of Guo et al. (``guo17_*``) and of the DenseNet-40 summary slides
  (``guo17_slides``) are a *reference band* (other networks, never flagged); cells of
  ``kull19_nb``, ``kull19_nb_table4``, ``kangsepp_nb`` and ``calarena`` come from the same logits
  and are flagged beyond ``tolerance = base[quantity] + half a unit of the printed last digit``.
* :func:`study_tables` -- those rows in the publications' layouts: Guo et al. Table 1 (ECE %),
  S2 (error %), S3 (NLL); Kull et al. Table 3 (log-loss), Table 4 (classwise ECE summed over
  classes) and the full-precision rows; Kängsepp's notebook; CalArena.
* :func:`summary_rows` -- accuracy, average confidence, ECE and MCE (percent, 15 bins) on the
  validation and test parts before and after calibration, the DenseNet-40 / CIFAR-100 table of
  the Guo et al. summary slides.
* :func:`temperature_sweep` -- reliability diagrams of ``softmax(z / T)`` for fixed temperatures
  (``T in {0.5, 1, 1.5, 2}``) and the ECE-vs-temperature curve (Guo et al. 2017, section 4.2),
  with :mod:`calbench.plots`.
* :func:`to_markdown` / :func:`to_html` -- the report (HTML escaped and self-contained: figures
  embedded as data URIs).

Metric conventions of Kull et al. (their ``evaluation.py``): Brier divided by K -- ours is
``brier / K`` exactly; log-loss = scikit-learn's 2019 ``log_loss`` (clip 1e-15, renormalise),
our ``nll``; classwise ECE summed over classes with their per-class binning -- ``cwece_kull``
(:mod:`calbench.metrics.kull`, as ``ece_kull`` / ``mce_kull`` / ``brier_kull`` for their other
conventions). Quantities map to metrics through :data:`DEFAULT_METRIC_MAP`, which a config
overrides (``report.guo_kull.metric_map``).
"""

from __future__ import annotations

import csv
import html
import io
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

PACKAGED = "guo_kull_logits"

#: Source key -> citation (the ``source`` column of the packaged table).
SOURCES = {
    "guo17_T1": "Guo, Pleiss, Sun, Weinberger 2017, On Calibration of Modern Neural Networks "
    "(ICML; arXiv 1706.04599), Table 1: ECE % (M = 15)",
    "guo17_S2": "Guo et al. 2017, supplementary Table S2: error %",
    "guo17_S3": "Guo et al. 2017, supplementary Table S3: NLL (mean nats)",
    "kull19_nb": "Kull, Perello-Nieto, Kängsepp, Silva Filho, Song, Flach 2019, Beyond temperature "
    "scaling (NeurIPS; arXiv 1910.12656): output of the notebook that generated Tables 3-4 "
    "(dirichletcal/experiments_dnn), log-loss and full-precision test metrics",
    "kull19_nb_table4": "Kull et al. 2019, Table 4 as printed by that notebook (classwise ECE, "
    "summed over classes, 3 decimals)",
    "kangsepp_nb": "Kängsepp, markus93/NN_calibration, notebook 'Calibration - (Temp, Iso, Beta, "
    "Hist)': test-set ECE (15 bins) and log-loss",
    "calarena": "CalArena (probkit 2026), results of the Base-model and TS runs on the same "
    "pickles (float32 probabilities; Brier summed over classes)",
    "guo17_slides": "Slides 'Calibration des réseaux de neurones modernes' (A. Ben Bouazza, "
    "S. Bossou) presenting Guo et al. 2017: summary table of their own DenseNet-40 (300 epochs) "
    "on CIFAR-100",
}
#: Sources computed on other networks than Kängsepp's logits: shown, never flagged.
REFERENCE_BAND = ("guo17_T1", "guo17_S2", "guo17_S3", "guo17_slides")

#: Each source's method names -> the calibrator keys of ``config/guo_kull_logits.yaml``.
METHOD_KEYS = {
    "guo17": {
        "uncal": "uncalibrated",
        "hist_binning": "hist",
        "isotonic": "iso",
        "bbq": "bbq",
        "temp_scaling": "ts",
        "vector_scaling": "vs",
        "matrix_scaling": "ms",
    },
    "kull19": {
        "Uncal": "uncalibrated",
        "TempS": "ts",
        "Dir-L2": "dir_l2",
        "Dir-ODIR": "dir_odir",
        "VecS": "vs",
        "MS-ODIR": "ms_odir",
    },
    "kangsepp": {
        "uncal": "uncalibrated",
        "hist_binning_M15": "hist",
        "isotonic_ovr": "iso",
        "temp_scaling": "ts",
    },
    "calarena": {"uncal": "uncalibrated", "TS": "ts"},
    "slides": {
        "uncal": "uncalibrated",
        "temp_scaling": "ts",
        "platt_scaling": "ms",
        "isotonic": "iso",
    },
}
_METHOD_FAMILY = {
    "guo17_T1": "guo17",
    "guo17_S2": "guo17",
    "guo17_S3": "guo17",
    "kull19_nb": "kull19",
    "kull19_nb_table4": "kull19",
    "kangsepp_nb": "kangsepp",
    "calarena": "calarena",
    "guo17_slides": "slides",
}

#: Published metric name -> (quantity, scale of the printed value relative to a fraction).
METRIC_KEYS = {
    "ece_pct_M15": ("ece", 100.0),
    "error_pct": ("error", 100.0),
    "nll_mean": ("nll", 1.0),
    "logloss": ("nll", 1.0),
    "ece": ("ece", 1.0),
    "classwise_ece_sum": ("cwece_sum", 1.0),
    "mce": ("mce", 1.0),
    "brier_div_k": ("brier_div_k", 1.0),
    "ece_frac_M15": ("ece", 1.0),
    "acc": ("accuracy", 1.0),
    "ece15": ("ece", 1.0),
    "brier": ("brier", 1.0),
    "acc_pct": ("accuracy", 100.0),
    "avg_conf_pct": ("confidence", 100.0),
    "ece_pct": ("ece", 100.0),
    "mce_pct": ("mce", 100.0),
}
#: Quantity -> the workflow metric it is read from (``error`` = 1 - that metric; ``brier_div_k``
#: = that metric / K unless the metric map names a metric that is already divided by K).
DEFAULT_METRIC_MAP = {
    "accuracy": "accuracy",
    "error": "accuracy",
    "ece": "ece",
    "mce": "mce",
    "nll": "nll",
    "brier": "brier",
    "brier_div_k": "brier",
    "cwece_sum": "cwece_kull",
}
#: Base tolerances (fractions) added to half a unit of the published value's last printed digit.
DEFAULT_TOLERANCES = {
    "accuracy": 0.0,
    "error": 0.0,
    "ece": 1e-4,
    "mce": 1e-3,
    "nll": 1e-4,
    "brier": 1e-5,
    "brier_div_k": 1e-6,
    "cwece_sum": 1e-3,
}
#: Tables whose values are printed at 6 decimals with trailing zeros dropped (e.g. "30" = 30.0).
_SIX_DECIMALS = ("full_precision", "table3")
#: Guo et al. print ECE and error with 2 decimals, NLL with 4 (the packaged strings drop zeros).
_GUO_DECIMALS = {"guo17_T1": 2, "guo17_S2": 2, "guo17_S3": 4, "guo17_slides": 2}

OK, FLAGGED, EXPECTED, MISSING, REFERENCE, NO_LOGITS = (
    "ok",
    "differs",
    "expected to differ",
    "missing",
    "reference band",
    "no published logits",
)
COMPARISON_COLUMNS = (
    "source",
    "table",
    "dataset",
    "published_model",
    "model",
    "published_method",
    "method",
    "published_metric",
    "quantity",
    "ours",
    "published",
    "printed",
    "difference",
    "tolerance",
    "status",
)


# --------------------------------------------------------------------------------------------
# the published values
# --------------------------------------------------------------------------------------------
def _decimals(printed: str) -> int:
    m = re.fullmatch(r"-?\d+(?:\.(\d+))?", printed.strip())
    return len(m.group(1) or "") if m else 0


def published_rows() -> list[dict]:
    """The packaged published cells keyed like the workflow: ``source, table, dataset,
    published_model, model`` (config key, "" where no published logits), ``published_method,
    method`` (calibrator key), ``published_metric, quantity``, ``published`` (fraction; NaN for
    "NA"), ``printed``, ``scale`` and ``decimals`` (of the printed value)."""
    from calbench.reference import load_reference

    out = []
    for r in load_reference(PACKAGED):
        quantity, scale = METRIC_KEYS[r["metric"]]
        family = _METHOD_FAMILY[r["source"]]
        if r["table"] in _SIX_DECIMALS:
            decimals = 6
        elif r["source"] in _GUO_DECIMALS:  # printed with 2 (percent) or 4 (NLL) decimals
            decimals = _GUO_DECIMALS[r["source"]]
        else:
            decimals = _decimals(r["printed"])
        out.append(
            {
                "source": r["source"],
                "table": r["table"],
                "dataset": r["dataset"],
                "published_model": r["model"],
                "model": r["calbench_model"],
                "published_method": r["method"],
                "method": METHOD_KEYS[family][r["method"]],
                "published_metric": r["metric"],
                "quantity": quantity,
                "published": r["value"] / scale,
                "printed": r["printed"],
                "scale": scale,
                "decimals": decimals,
            }
        )
    return out


# --------------------------------------------------------------------------------------------
# ours
# --------------------------------------------------------------------------------------------
def ours_lookup(
    metrics_rows: Sequence[Mapping],
    n_classes: Mapping[str, int],
    metric_map: Mapping[str, str] | None = None,
    half: str = "test",
):
    """A function ``(model, method, quantity) -> float | None`` over the aggregated metrics
    (``model, method, half, metric, value``; fractions). ``n_classes[model]`` = K for Brier / K."""
    mm = {**DEFAULT_METRIC_MAP, **(metric_map or {})}
    table = {
        (r["model"], r["method"], r["metric"]): float(r["value"])
        for r in metrics_rows
        if r.get("half", half) == half
    }

    def get(model: str, method: str, quantity: str) -> float | None:
        metric = mm.get(quantity, quantity)
        v = table.get((model, method, metric))
        if v is None or not math.isfinite(v):
            return None
        if quantity == "error":
            return 1.0 - v
        if quantity == "brier_div_k" and metric == DEFAULT_METRIC_MAP["brier_div_k"]:
            k = n_classes.get(model)
            return None if not k else v / k
        return v

    return get


def cell_status(
    source: str,
    model: str,
    ours: float | None,
    published: float,
    tolerance: float,
    method: str,
    expected_to_differ: Sequence[str] = (),
) -> str:
    if not model:
        return NO_LOGITS
    if ours is None or not math.isfinite(published):
        return MISSING
    if source in REFERENCE_BAND:
        return REFERENCE
    if abs(ours - published) <= tolerance:
        return OK
    return EXPECTED if method in expected_to_differ else FLAGGED


def comparison_rows(
    metrics_rows: Sequence[Mapping],
    n_classes: Mapping[str, int],
    spec: Mapping | None = None,
) -> list[dict]:
    """Every published cell beside ours (columns :data:`COMPARISON_COLUMNS`, fractions).

    ``spec`` (all optional): ``models`` (config keys; cells of other models count as having no
    logits), ``calibrators`` (config keys; cells of others are left out), ``metric_map``,
    ``tolerances`` (quantity -> fraction, added to half a printed unit) and
    ``expected_to_differ`` (calibrator keys whose flagged cells are marked expected),
    ``sources`` (source keys to compare; absent or None = all of :data:`SOURCES`).
    """
    spec = spec or {}
    sources = spec.get("sources")
    if sources is not None:
        unknown = sorted(set(sources) - set(SOURCES))
        if unknown:
            raise ValueError(f"unknown sources {unknown}; known: {list(SOURCES)}")
    get = ours_lookup(metrics_rows, n_classes, spec.get("metric_map"))
    tol_base = {**DEFAULT_TOLERANCES, **(spec.get("tolerances") or {})}
    models = spec.get("models")
    calibrators = spec.get("calibrators")
    differ = tuple(spec.get("expected_to_differ") or ())
    out = []
    for p in published_rows():
        if sources is not None and p["source"] not in sources:
            continue
        if calibrators is not None and p["method"] not in calibrators:
            continue
        model = p["model"] if (models is None or p["model"] in models) else ""
        ours = get(model, p["method"], p["quantity"]) if model else None
        tol = tol_base.get(p["quantity"], 0.0) + 0.5 * 10.0 ** (-p["decimals"]) / p["scale"]
        published = p["published"]
        out.append(
            {
                **{k: p[k] for k in COMPARISON_COLUMNS if k in p},
                "model": model,
                "ours": ours,
                "difference": None
                if ours is None or not math.isfinite(published)
                else ours - published,
                "tolerance": tol,
                "status": cell_status(
                    p["source"], model, ours, published, tol, p["method"], differ
                ),
            }
        )
    return out


# --------------------------------------------------------------------------------------------
# tables in the publications' layouts
# --------------------------------------------------------------------------------------------
def _fmt(value: float | None, scale: float, decimals: int, signed: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    v = value * scale
    return f"{v:+.{decimals}f}" if signed else f"{v:.{decimals}f}"


def _cell(r: Mapping) -> dict:
    scale, dec = r["scale"], r["decimals"]
    return {
        "ours": _fmt(r["ours"], scale, dec),
        "published": r["printed"],
        "difference": _fmt(r["difference"], scale, dec, signed=True),
        "status": r["status"],
    }


def _grid(rows, title, note, row_fields, row_header, col_field, col_labels=None) -> dict:
    """Rows grouped by ``row_fields``, one column per distinct ``col_field`` (first-seen order)."""
    cols = list(dict.fromkeys(r[col_field] for r in rows))
    by_row: dict[tuple, dict] = {}
    for r in rows:
        key = tuple(r[f] for f in row_fields)
        by_row.setdefault(key, {})[r[col_field]] = r
    body = []
    for key, cells in by_row.items():
        body.append(
            {
                "labels": list(key),
                "cells": [
                    _cell(cells[c])
                    if c in cells
                    else {"ours": "", "published": "", "difference": "", "status": ""}
                    for c in cols
                ],
            }
        )
    labels = [str((col_labels or {}).get(c, c)) for c in cols]
    return {
        "title": title,
        "note": note,
        "header": list(row_header),
        "columns": labels,
        "rows": body,
    }


def _with_scale(rows: Sequence[Mapping]) -> list[dict]:
    info = {
        (
            p["source"],
            p["table"],
            p["published_model"],
            p["published_method"],
            p["published_metric"],
        ): p
        for p in published_rows()
    }
    out = []
    for r in rows:
        p = info[
            (
                r["source"],
                r["table"],
                r["published_model"],
                r["published_method"],
                r["published_metric"],
            )
        ]
        out.append({**r, "scale": p["scale"], "decimals": p["decimals"]})
    return out


GUO_NOTE = (
    "Reference band, not a check: Guo et al. computed these values on their own Torch networks; "
    "the logits used here are Kängsepp's Keras re-trainings of the same architectures, with other "
    "error rates (e.g. CIFAR-10 ResNet-110: 6.21 % in Guo et al., 6.44 % here). Compare orders "
    "of magnitude and the ranking of methods, not digits."
)


def study_tables(rows: Sequence[Mapping], spec: Mapping | None = None) -> list[dict]:
    """:func:`comparison_rows` grouped into the publications' tables. Each table: ``title,
    note, header, columns, rows`` (``labels`` + ``cells`` of printed ``ours, published,
    difference, status``)."""
    spec = spec or {}
    names = {c: (v or {}).get("display", c) for c, v in (spec.get("calibrators") or {}).items()}
    rows = _with_scale(rows)

    def sel(**where):
        return [r for r in rows if all(r[k] == v for k, v in where.items())]

    out = []
    guo = [
        ("guo17_T1", "Guo et al. 2017, Table 1: ECE, % (15 bins)"),
        ("guo17_S2", "Guo et al. 2017, Table S2: error, %"),
        ("guo17_S3", "Guo et al. 2017, Table S3: NLL"),
    ]
    for source, title in guo:
        sub = sel(source=source)
        if sub:
            out.append(
                _grid(
                    sub,
                    title + ": ours / Guo et al.",
                    GUO_NOTE,
                    ("dataset", "published_model"),
                    ("Dataset", "Model"),
                    "method",
                    names,
                )
            )
    kull_note = (
        "Same logits as Kull et al.; their conventions: log-loss = scikit-learn's log_loss of 2019 "
        "(clip 1e-15, renormalise); classwise ECE summed over classes with their per-class bins; "
        "Brier divided by K; Dirichlet / MS-ODIR: 5-fold CV on the validation part, test "
        "predictions averaged over the 5 fold models. Rows without published logits (convnet, "
        "Kull et al.'s own re-trainings) have no value of ours."
    )
    sub = sel(source="kull19_nb", table="table3")
    if sub:
        out.append(
            _grid(
                sub,
                "Kull et al. 2019, Table 3: log-loss (6 decimals): ours / published / difference",
                kull_note,
                ("published_model",),
                ("Model",),
                "published_method",
            )
        )
    sub = sel(source="kull19_nb_table4")
    if sub:
        out.append(
            _grid(
                sub,
                "Kull et al. 2019, Table 4: classwise ECE (sum over classes): ours / published / difference",
                kull_note,
                ("published_model",),
                ("Model",),
                "published_method",
            )
        )
    sub = sel(source="kull19_nb", table="full_precision")
    if sub:
        out.append(
            _grid(
                sub,
                "Kull et al. 2019, full-precision test metrics: ours / published / difference",
                kull_note + " ECE and MCE as fractions (15 bins), error in %.",
                ("published_model", "published_method"),
                ("Model", "Method"),
                "published_metric",
            )
        )
    sub = sel(source="kangsepp_nb")
    if sub:
        out.append(
            _grid(
                sub,
                "Kängsepp's notebook: test ECE (15 bins) and log-loss: ours / published / difference",
                "Same logits; histogram binning with 15 equal bins, isotonic regression "
                "one-vs-rest with renormalised rows.",
                ("published_model", "published_metric"),
                ("Model", "Metric"),
                "published_method",
            )
        )
    sub = sel(source="calarena")
    if sub:
        for r in sub:
            r["column"] = f"{r['published_method']} {r['published_metric']}"
        out.append(
            _grid(
                sub,
                "CalArena: ours / published / difference",
                "Same pickles, converted to float32 probabilities first (log-loss may "
                "differ slightly); Brier summed over classes.",
                ("dataset", "published_model"),
                ("Dataset", "Model"),
                "column",
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# the summary table: accuracy, average confidence, ECE, MCE before and after calibration
# --------------------------------------------------------------------------------------------
SUMMARY_COLUMNS = ("model", "half", "method", "accuracy", "confidence", "ece", "mce")


def summary_rows(
    halves: Mapping[str, tuple[np.ndarray, np.ndarray]],
    calibrators: Mapping[str, object],
    *,
    model: str,
    n_bins: int = 15,
) -> list[dict]:
    """Accuracy, average top-label confidence, ECE and MCE (fractions, ``n_bins`` equal-width
    bins; Guo et al. 2017 eqs. 3 and 5) of each fitted calibrator on each part
    (``halves[name] = (logits, labels)``, e.g. ``val`` and ``test``)."""
    from calbench.metrics import accuracy, ece, mce

    out = []
    for half, (z, y) in halves.items():
        for name, cal in calibrators.items():
            p = cal.predict_proba(z)
            out.append(
                {
                    "model": model,
                    "half": half,
                    "method": name,
                    "accuracy": accuracy(p, y),
                    "confidence": float(np.mean(np.max(p, axis=1), dtype=np.float64)),
                    "ece": ece(p, y, n_bins),
                    "mce": mce(p, y, n_bins),
                }
            )
    return out


def summary_table(rows: Sequence[Mapping], spec: Mapping | None = None) -> dict:
    """:func:`summary_rows` beside the slides' published values (reference band): one row per
    (part, method), columns accuracy, average confidence, ECE, MCE in percent."""
    spec = spec or {}
    names = {c: (v or {}).get("display", c) for c, v in (spec.get("calibrators") or {}).items()}
    model = rows[0]["model"] if rows else ""
    sources = spec.get("sources")
    pub = {
        (p["table"].removeprefix("recap_"), p["method"], p["quantity"]): p
        for p in published_rows()
        if p["source"] == "guo17_slides"
        and p["model"] == model
        and (sources is None or "guo17_slides" in sources)
    }
    body = []
    for r in rows:
        cells = []
        for q in ("accuracy", "confidence", "ece", "mce"):
            p = pub.get((r["half"], r["method"], q))
            cells.append(
                {
                    "ours": _fmt(r[q], 100.0, 2),
                    "published": p["printed"] if p else "–",
                    "difference": _fmt(r[q] - p["published"], 100.0, 2, signed=True) if p else "–",
                    "status": REFERENCE if p else MISSING,
                }
            )
        part = {"val": "Validation", "test": "Test"}.get(r["half"], r["half"])
        body.append({"labels": [part, str(names.get(r["method"], r["method"]))], "cells": cells})
    note = (
        "Reference band: the slides' values are their own DenseNet-40 trained 300 epochs on "
        "CIFAR-100 with their own validation split; ours are on Kängsepp's logits (validation = "
        "5,000 training images, test = the 10,000 test images)."
        if pub
        else "No published values for this model."
    )
    return {
        "title": f"{model}: accuracy, average confidence, ECE and MCE (%, 15 bins), validation "
        "and test parts: ours / slides",
        "note": note,
        "header": ["Part", "Method"],
        "columns": ["Accuracy", "Avg confidence", "ECE", "MCE"],
        "rows": body,
    }


# --------------------------------------------------------------------------------------------
# temperature sweep (Guo et al. 2017, section 4.2)
# --------------------------------------------------------------------------------------------
SWEEP_COLUMNS = ("model", "kind", "temperature", "ece")


def temperature_sweep(
    logits: np.ndarray,
    labels: np.ndarray,
    *,
    model: str,
    temperatures: Sequence[float] = (0.5, 1.0, 1.5, 2.0),
    curve: Sequence[float] | None = None,
    fitted_temperature: float | None = None,
    n_bins: int = 15,
    style: str = "guo",
):
    """Reliability diagrams of ``softmax(logits / T)`` for each of ``temperatures`` (one panel
    each, :func:`calbench.plots.reliability_grid`) and the ECE-vs-temperature curve over
    ``curve`` (default ``linspace(0.25, 4, 76)``, :func:`calbench.plots.ece_vs_temperature`), with
    the temperature fitted by temperature scaling marked when given.

    Returns ``(grid_figure, curve_figure, rows)``; ``rows`` (:data:`SWEEP_COLUMNS`) hold the ECE
    (fraction, ``n_bins`` bins) at every diagram temperature (``kind="diagram"``), every curve
    point (``"curve"``) and the fitted one (``"fitted"``).
    """
    from calbench._checks import check_logits_labels
    from calbench.functional import softmax
    from calbench.metrics import ece
    from calbench.plots import ece_vs_temperature, reliability_grid

    z, y = check_logits_labels(logits, labels)
    temps = [float(t) for t in temperatures]
    if not temps or any(not (math.isfinite(t) and t > 0) for t in temps):
        raise ValueError(f"temperatures must be finite numbers > 0, got {list(temperatures)!r}")
    grid_t = np.linspace(0.25, 4.0, 76) if curve is None else np.asarray(curve, dtype=np.float64)
    z64 = z.astype(np.float64)
    probs = {f"T = {t:g}": softmax(z64 / t) for t in temps}
    grid = reliability_grid(
        probs,
        y,
        n_bins=n_bins,
        style=style,
        ncols=len(probs),
        title=f"{model}: reliability of softmax(z / T), test part",
    )
    fig = ece_vs_temperature(z, y, grid_t, n_bins=n_bins, title=f"{model}: ECE vs temperature")
    rows = [
        {"model": model, "kind": "diagram", "temperature": t, "ece": ece(p, y, n_bins)}
        for t, p in zip(temps, probs.values(), strict=True)
    ]
    data = fig.calbench_data
    rows += [
        {"model": model, "kind": "curve", "temperature": float(t), "ece": float(e)}
        for t, e in zip(data["temperatures"], data["ece"], strict=True)
    ]
    if fitted_temperature is not None:
        t = float(fitted_temperature)
        e = ece(softmax(z64 / t), y, n_bins)
        ax = fig.axes[0]
        ax.axvline(t, color="#2ca02c", ls="--", lw=1.0, label=f"fitted T = {t:.3f}")
        ax.legend(fontsize=9, framealpha=0.9)
        rows.append({"model": model, "kind": "fitted", "temperature": t, "ece": e})
    return grid, fig, rows


# --------------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------------
def csv_text(rows: Sequence[Mapping], columns: Sequence[str]) -> str:
    """CSV of ``rows`` (floats at full precision, None / NaN empty)."""
    from calbench.report.tables import long_csv_text

    return long_csv_text(rows, columns)


def _counts(rows: Sequence[Mapping]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        out[r["status"]] = out.get(r["status"], 0) + 1
    return out


def _md_cell(c: Mapping) -> str:
    if not c["status"]:
        return ""
    mark = " ⚠" if c["status"] == FLAGGED else (" (expected)" if c["status"] == EXPECTED else "")
    if c["status"] == REFERENCE:
        return f"{c['ours']} / {c['published']}"
    return f"{c['ours']} / {c['published']} / {c['difference']}{mark}"


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(
    tables: Sequence[Mapping], rows: Sequence[Mapping], spec: Mapping, sweep: Sequence[Mapping] = ()
) -> str:
    """The tables as Markdown (the figures are in the HTML page)."""
    title = spec.get("title") or "Guo et al. 2017 / Kull et al. 2019 on Kängsepp's logits"
    counts = _counts(rows)
    lines = [f"# {_md_escape(title)}", "", _summary_text(counts), ""]
    for t in tables:
        lines += [f"## {_md_escape(t['title'])}", "", _md_escape(t["note"]), ""]
        header = [*t["header"], *t["columns"]]
        lines.append("| " + " | ".join(map(_md_escape, header)) + " |")
        lines.append("|" + "---|" * len(t["header"]) + "---:|" * len(t["columns"]))
        for r in t["rows"]:
            lines.append(
                "| "
                + " | ".join([*map(_md_escape, r["labels"]), *map(_md_cell, r["cells"])])
                + " |"
            )
        lines.append("")
    if sweep:
        lines += _sweep_md(sweep)
    return "\n".join(lines) + "\n"


def _summary_text(counts: Mapping[str, int]) -> str:
    parts = [f"{n} {s}" for s, n in sorted(counts.items())]
    return (
        "Each cell: ours / published / difference in the publication's units and digits "
        "(Guo et al. and the slides: ours / published, a reference band). A cell is flagged ⚠ "
        "when |difference| exceeds the base tolerance plus half a unit of the last printed digit. "
        "Cells: " + (", ".join(parts) or "none") + "."
    )


def _sweep_summary(sweep: Sequence[Mapping]) -> list[dict]:
    out: dict[str, dict] = {}
    for r in sweep:
        d = out.setdefault(
            r["model"], {"model": r["model"], "diagram": [], "best": None, "fitted": None}
        )
        if r["kind"] == "diagram":
            d["diagram"].append((r["temperature"], r["ece"]))
        elif r["kind"] == "curve":
            if d["best"] is None or r["ece"] < d["best"][1]:
                d["best"] = (r["temperature"], r["ece"])
        elif r["kind"] == "fitted":
            d["fitted"] = (r["temperature"], r["ece"])
    return list(out.values())


def _sweep_md(sweep: Sequence[Mapping]) -> list[str]:
    summ = _sweep_summary(sweep)
    temps = [t for t, _ in summ[0]["diagram"]] if summ else []
    lines = [
        "## Temperature sweep: ECE, % (15 bins, test part) of softmax(z / T)",
        "",
        "| Model | "
        + " | ".join(f"T = {t:g}" for t in temps)
        + " | best T on the curve | fitted T (TS) |",
        "|---|" + "---:|" * (len(temps) + 2),
    ]
    for d in summ:
        cells = [f"{100 * e:.2f}" for _, e in d["diagram"]]
        best = f"{d['best'][0]:.2f} ({100 * d['best'][1]:.2f})" if d["best"] else "–"
        fit = f"{d['fitted'][0]:.3f} ({100 * d['fitted'][1]:.2f})" if d["fitted"] else "–"
        lines.append(f"| {_md_escape(d['model'])} | " + " | ".join([*cells, best, fit]) + " |")
    return [*lines, ""]


_CSS = (
    "body{font-family:sans-serif;margin:2em;max-width:90em}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}td.num{text-align:right}"
    ".differs{background:#fdd}.expected{background:#ffd}.missing,.no-logits{color:#999}"
    ".reference-band{background:#f4f4ff}small{color:#555}img{max-width:100%}p.note{color:#333}"
)
_CLASSES = {
    OK: "ok",
    FLAGGED: "differs",
    EXPECTED: "expected",
    MISSING: "missing",
    REFERENCE: "reference-band",
    NO_LOGITS: "no-logits",
    "": "",
}


def _html_table(t: Mapping) -> str:
    e = html.escape
    out = [
        f"<h2>{e(t['title'])}</h2><p class='note'>{e(t['note'])}</p><table><thead><tr>"
        + "".join(f"<th>{e(h)}</th>" for h in [*t["header"], *t["columns"]])
        + "</tr></thead><tbody>"
    ]
    for r in t["rows"]:
        tds = [f"<td>{e(str(x))}</td>" for x in r["labels"]]
        for c in r["cells"]:
            cls = _CLASSES.get(c["status"], "")
            if not c["status"]:
                tds.append("<td></td>")
                continue
            small = (
                e(c["published"])
                if c["status"] == REFERENCE
                else f"{e(c['published'])} ({e(c['difference'])})"
            )
            tds.append(
                f"<td class='num {cls}' title='{e(c['status'])}'>{e(c['ours'])}<br><small>{small}</small></td>"
            )
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def to_html(
    tables: Sequence[Mapping],
    rows: Sequence[Mapping],
    spec: Mapping,
    *,
    sweep: Sequence[Mapping] = (),
    figures: Mapping[str, Sequence[str | os.PathLike]] | None = None,
) -> str:
    """A self-contained HTML page: every table (text escaped), the sweep summary and, per model,
    the figures in ``figures[model]`` (PNG files, embedded as data URIs)."""
    from calbench.report.render import png_data_uri

    e = html.escape
    title = spec.get("title") or "Guo et al. 2017 / Kull et al. 2019 on Kängsepp's logits"
    out = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        f"<p>{e(spec.get('description') or '')}</p>",
        f"<p class='tolerances'>{e(_summary_text(_counts(rows)))}</p>",
        "<h2>Sources</h2><ul>"
        + "".join(f"<li><b>{e(k)}</b>: {e(v)}</li>" for k, v in SOURCES.items())
        + "</ul>",
    ]
    out += [_html_table(t) for t in tables]
    if sweep:
        summ = _sweep_summary(sweep)
        temps = [t for t, _ in summ[0]["diagram"]] if summ else []
        out.append(
            "<h2>Temperature sweep (Guo et al. 2017, section 4.2): ECE, % (15 bins, test part)</h2>"
            "<table><thead><tr><th>Model</th>"
            + "".join(f"<th>T = {t:g}</th>" for t in temps)
            + "<th>best T on the curve (ECE)</th><th>fitted T (ECE)</th></tr></thead><tbody>"
        )
        for d in summ:
            cells = "".join(f"<td class='num'>{100 * v:.2f}</td>" for _, v in d["diagram"])
            best = f"{d['best'][0]:.2f} ({100 * d['best'][1]:.2f})" if d["best"] else "–"
            fit = f"{d['fitted'][0]:.3f} ({100 * d['fitted'][1]:.2f})" if d["fitted"] else "–"
            out.append(
                f"<tr><td>{e(d['model'])}</td>{cells}<td class='num'>{e(best)}</td>"
                f"<td class='num'>{e(fit)}</td></tr>"
            )
        out.append("</tbody></table>")
    for model, paths in (figures or {}).items():
        out.append(f"<h3>{e(model)}</h3>")
        for p in paths:
            out.append(f"<img alt='{e(Path(p).stem)}: {e(model)}' src='{png_data_uri(p)}'>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# file-level entry points (verbs temperature-sweep and guo-kull-tables)
# --------------------------------------------------------------------------------------------
def load_halves(logits_path, split_path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{"val": (logits, labels), "test": (...)}`` of a logits file and its split ``.npz``
    (``val_idx``, ``test_idx``: a partition of the rows; for a pre-split source, its own parts)."""
    from calbench.logits import load_logits

    data = load_logits(logits_path)
    n = len(data["labels"])
    if not os.path.isfile(split_path):
        raise FileNotFoundError(f"split file {split_path} does not exist; run calbench split first")
    with np.load(split_path, allow_pickle=False) as s:
        if "val_idx" not in s.files or "test_idx" not in s.files:
            raise ValueError(f"{split_path} lacks val_idx/test_idx; regenerate the split")
        val, test = s["val_idx"].astype(np.int64), s["test_idx"].astype(np.int64)
    both = np.concatenate([val, test])
    if len(both) != n or not np.array_equal(np.sort(both), np.arange(n)):
        raise ValueError(
            f"split {split_path} is not a partition of the {n} rows of {logits_path}; "
            "rebuild the split from these logits"
        )
    z, y = data["logits"], data["labels"]
    return {"val": (z[val], y[val]), "test": (z[test], y[test])}


def _png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    return buf.getvalue()


def write_sweep(
    logits_path,
    split_path,
    *,
    model: str,
    out_grid,
    out_curve,
    out_csv,
    temperatures: Sequence[float] = (0.5, 1.0, 1.5, 2.0),
    curve: Sequence[float] | None = None,
    ts_calibrator=None,
    n_bins: int = 15,
) -> list[dict]:
    """:func:`temperature_sweep` on the test part of ``logits_path``; writes the diagram grid and
    the curve (PNG) and the ECE values (CSV, :data:`SWEEP_COLUMNS`), atomically. The fitted
    temperature is read from ``ts_calibrator`` (a fitted ``ts`` JSON) when given."""
    from calbench.io import atomic_write_bytes, atomic_write_text

    fitted = None
    if ts_calibrator:
        from calbench.report.render import fitted_temperature

        fitted = fitted_temperature(ts_calibrator)
    z, y = load_halves(logits_path, split_path)["test"]
    grid, fig, rows = temperature_sweep(
        z,
        y,
        model=model,
        temperatures=temperatures,
        curve=curve,
        fitted_temperature=fitted,
        n_bins=n_bins,
    )
    png_grid, png_curve = _png_bytes(grid), _png_bytes(fig)
    text = csv_text(rows, SWEEP_COLUMNS)
    atomic_write_bytes(out_grid, png_grid)
    atomic_write_bytes(out_curve, png_curve)
    atomic_write_text(out_csv, text)
    return rows


def write_tables(
    metrics_csv,
    spec: Mapping,
    *,
    out_html,
    out_md,
    out_csv,
    out_summary,
    summary_logits=None,
    summary_split=None,
    summary_calibrators: Mapping[str, str | os.PathLike] | None = None,
    sweep_csvs: Sequence[str | os.PathLike] = (),
    sweep_figures: Mapping[str, Sequence[str | os.PathLike]] | None = None,
) -> list[dict]:
    """Every output of the study: the comparison cells (CSV), the publications' tables
    (Markdown, HTML), the summary table (CSV) of ``spec['summary_model']`` from its logits, split
    and fitted calibrator JSONs, and the temperature-sweep figures and values. Returns the cells.

    ``spec``: ``title, description, models`` ({name: {num_classes, ...}}), ``calibrators``,
    ``metric_map``, ``tolerances``, ``expected_to_differ`` (see :func:`comparison_rows`).
    """
    from calbench.calibrators import load_calibrator
    from calbench.io import atomic_write_text
    from calbench.report.tables import METRIC_COLUMNS, read_long_csv

    metrics = read_long_csv([metrics_csv], required=METRIC_COLUMNS)
    n_classes = {
        m: int(v["num_classes"])
        for m, v in (spec.get("models") or {}).items()
        if v.get("num_classes")
    }
    cells = comparison_rows(metrics, n_classes, spec)
    tabs = study_tables(cells, spec)
    summary: list[dict] = []
    if summary_logits:
        if not summary_split:
            raise ValueError("summary_logits needs summary_split (the model's split .npz)")
        cals = {m: load_calibrator(p) for m, p in (summary_calibrators or {}).items()}
        if not cals:
            raise ValueError("the summary table needs at least one fitted calibrator JSON")
        halves = load_halves(summary_logits, summary_split)
        summary = summary_rows(halves, cals, model=spec.get("summary_model") or "")
        tabs.append(summary_table(summary, spec))
    sweep: list[dict] = []
    for path in sweep_csvs:
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                sweep.append(
                    {
                        "model": r["model"],
                        "kind": r["kind"],
                        "temperature": float(r["temperature"]),
                        "ece": float(r["ece"]),
                    }
                )
    cell_text = csv_text(cells, COMPARISON_COLUMNS)
    md = to_markdown(tabs, cells, spec, sweep)
    page = to_html(tabs, cells, spec, sweep=sweep, figures=sweep_figures)
    atomic_write_text(out_csv, cell_text)
    atomic_write_text(out_summary, csv_text(summary, SUMMARY_COLUMNS))
    atomic_write_text(out_md, md)
    atomic_write_text(out_html, page)
    return cells
