"""The compared cells in the publications' layouts (Guo et al. 2017 Tables 1, S2, S3; Kull et
al. 2019 Tables 3, 4 and full-precision rows; Kängsepp's notebook; CalArena) and the summary
table of the Guo et al. summary slides."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from calbench.metrics import accuracy, ece, mce
from calbench.metrics.binning import ECE_BINS
from calbench.reference.guo_kull.published import (
    MISSING,
    REFERENCE,
    published_rows,
)


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

    return _guo_tables(sel, names) + _same_logits_tables(sel)


def _guo_tables(sel, names: Mapping) -> list[dict]:
    """Guo et al. 2017 Tables 1, S2 and S3 (a reference band: their own networks); ``sel(**where)``
    selects the compared rows, ``names`` maps calibrator keys to display names."""
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
    return out


KULL_NOTE = (
    "Same logits as Kull et al.; their conventions: log-loss = scikit-learn's log_loss of 2019 "
    "(clip 1e-15, renormalise); classwise ECE summed over classes with their per-class bins; "
    "Brier divided by K; Dirichlet / MS-ODIR: 5-fold CV on the validation part, test "
    "predictions averaged over the 5 fold models. Rows without published logits (convnet, "
    "Kull et al.'s own re-trainings) have no value of ours."
)
#: The tables computed from Kängsepp's logits themselves, in order: (rows selected, title, note,
#: row fields, row header, column field) of :func:`_grid`.
_SAME_LOGITS_TABLES = (
    (
        {"source": "kull19_nb", "table": "table3"},
        "Kull et al. 2019, Table 3: log-loss (6 decimals): ours / published / difference",
        KULL_NOTE,
        ("published_model",),
        ("Model",),
        "published_method",
    ),
    (
        {"source": "kull19_nb_table4"},
        "Kull et al. 2019, Table 4: classwise ECE (sum over classes): ours / published / difference",
        KULL_NOTE,
        ("published_model",),
        ("Model",),
        "published_method",
    ),
    (
        {"source": "kull19_nb", "table": "full_precision"},
        "Kull et al. 2019, full-precision test metrics: ours / published / difference",
        KULL_NOTE + " ECE and MCE as fractions (15 bins), error in %.",
        ("published_model", "published_method"),
        ("Model", "Method"),
        "published_metric",
    ),
    (
        {"source": "kangsepp_nb"},
        "Kängsepp's notebook: test ECE (15 bins) and log-loss: ours / published / difference",
        "Same logits; histogram binning with 15 equal bins, isotonic regression "
        "one-vs-rest with renormalised rows.",
        ("published_model", "published_metric"),
        ("Model", "Metric"),
        "published_method",
    ),
    (
        {"source": "calarena"},
        "CalArena: ours / published / difference",
        "Same pickles, converted to float32 probabilities first (log-loss may "
        "differ slightly); Brier summed over classes.",
        ("dataset", "published_model"),
        ("Dataset", "Model"),
        "column",  # one column per published method and metric
    ),
)


def _same_logits_tables(sel) -> list[dict]:
    """The tables computed from Kängsepp's logits themselves (:data:`_SAME_LOGITS_TABLES`): Kull
    et al. 2019 Tables 3 and 4 and the full-precision rows, Kängsepp's notebook, CalArena
    (``sel`` as in :func:`_guo_tables`)."""
    out = []
    for where, title, note, row_fields, row_header, col_field in _SAME_LOGITS_TABLES:
        sub = sel(**where)
        if not sub:
            continue
        if col_field == "column":
            for r in sub:
                r["column"] = f"{r['published_method']} {r['published_metric']}"
        out.append(_grid(sub, title, note, row_fields, row_header, col_field))
    return out


# --------------------------------------------------------------------------------------------
# the summary table: accuracy, average confidence, ECE, MCE before and after calibration
# --------------------------------------------------------------------------------------------
def summary_rows(
    halves: Mapping[str, tuple[np.ndarray, np.ndarray]],
    calibrators: Mapping[str, object],
    *,
    model: str,
    n_bins: int = ECE_BINS,
) -> list[dict]:
    """Accuracy, average top-label confidence, ECE and MCE (fractions, ``n_bins`` equal-width
    bins; Guo et al. 2017 eqs. 3 and 5) of each fitted calibrator on each part
    (``halves[name] = (logits, labels)``, e.g. ``val`` and ``test``)."""
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
