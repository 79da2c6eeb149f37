"""Report sections of the calibration-during-training studies (docs/objectives.md).

Rows are *objectives*: the models sharing ``(dataset, display.name, display.loss)`` are replicates
(seeds, ``display.seed``) of one objective; every cell is the mean over them with the sample
standard deviation (``ddof=1``) when there are several, as the seed papers print "mean ± std".

* :func:`metacal_tables`: Bohdal et al. 2021 table 1 (error, ECE, ECE after
  temperature scaling and the fitted temperature) and its appendix tables (adaptive and classwise
  ECE, before and after TS).
* :func:`softcal_tables`: Karandikar et al. 2021 table 1 (accuracy, l2 ECE with
  equal-mass bins, the same after TS), TS against TS-SB-ECE, and appendix table 4 (KS error,
  mean-sweep CE) with the marginal CE.
* :func:`dece_history`: the per-epoch validation ECE and DECE of the training histories and
  their Pearson / Spearman correlation (Bohdal et al. 2021 fig. 1).

Everything works on plain rows (dicts of the long metrics CSV) and numpy.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from calbench import table_model as G
from calbench.display import best_mask, format_value
from calbench.stats import mean_ranks


@dataclass(frozen=True)
class Column:
    """One column of a study table: ``metric`` of calibrator ``method`` (``label`` printed)."""

    method: str
    metric: str
    label: str


@dataclass
class StudyTable:
    """Objectives x columns; ``mean``/``std`` float arrays (NaN = missing), ``n`` replicates.

    ``bold[i, j]`` marks the best printed mean of column ``j`` (max for accuracy, min for errors;
    the temperature column has no best).
    """

    key: str
    title: str
    row_labels: list[list[str]]
    row_header: list[str]
    columns: list[Column]
    mean: np.ndarray
    std: np.ndarray
    n: np.ndarray

    @property
    def bold(self) -> np.ndarray:
        mask = np.zeros(self.mean.shape, dtype=bool)
        for j, c in enumerate(self.columns):
            if c.metric != "temperature":  # the fitted T has no best
                mask[:, j] = best_mask(self.mean[:, j][None, :], c.metric)[0]
        return mask

    def cell(self, i: int, j: int) -> str:
        metric = self.columns[j].metric
        text = format_value(metric, float(self.mean[i, j]))
        if self.n[i, j] > 1 and math.isfinite(self.std[i, j]):
            text += f" ± {format_value(metric, float(self.std[i, j]))}"
        return text

    @property
    def col_labels(self) -> list[str]:
        return [c.label for c in self.columns]

    def grid(self) -> G.GridTable:
        """The printed table (:class:`calbench.table_model.GridTable`); its CSV holds each
        column's mean, sample std and number of replicates."""
        bold = self.bold
        cells = [
            [
                G.Cell(
                    self.cell(i, j),
                    bold=bool(bold[i, j]),
                    csv=(
                        format_value(c.metric, float(self.mean[i, j])),
                        format_value(c.metric, float(self.std[i, j])),
                        int(self.n[i, j]),
                    ),
                )
                for j, c in enumerate(self.columns)
            ]
            for i in range(len(self.row_labels))
        ]
        return G.GridTable(
            title=self.title,
            row_header=list(self.row_header),
            col_labels=self.col_labels,
            labels=[list(x) for x in self.row_labels],
            cells=cells,
            css_class="study-table",
            data=(("key", self.key),),
            csv_suffixes=("std", "n"),
        )

    def rows(self) -> list[dict]:
        return self.grid().rows()


def objective_groups(models: Mapping[str, Mapping], present: set[str]) -> dict[tuple, list[str]]:
    """``{(dataset, name, loss): [model, ...]}`` in config order, for models in ``present``."""
    groups: dict[tuple, list[str]] = {}
    for m, v in models.items():
        if m not in present:
            continue
        d = v.get("display") or {}
        key = (v.get("dataset", ""), str(d.get("name") or m), str(d.get("loss") or ""))
        groups.setdefault(key, []).append(m)
    return groups


def _values(rows, half="test") -> dict[tuple[str, str, str], float]:
    out = {}
    for r in rows:
        if r.get("half", half) != half:
            continue
        out[(r["model"], r["method"], r["metric"])] = float(r["value"])
        if r["metric"] == "accuracy":
            out[(r["model"], r["method"], "error")] = 1.0 - float(r["value"])
    return out


def study_table(
    rows: Sequence[Mapping],
    models: Mapping[str, Mapping],
    columns: Sequence[Column],
    *,
    key: str,
    title: str,
    temperatures: Mapping[str, float] | None = None,
    dataset_labels: Mapping[str, str] | None = None,
    half: str = "test",
) -> StudyTable | None:
    """Mean ± std over replicates of each objective for ``columns``; ``None`` if no data.

    Columns without any value are dropped (e.g. a metric the study did not evaluate).
    ``temperatures`` maps model -> fitted temperature (column metric ``temperature``).
    """
    vals = _values(rows, half)
    for m, t in (temperatures or {}).items():
        vals[(m, "ts", "temperature")] = float(t)
    present = {r["model"] for r in rows}
    groups = objective_groups(models, present)
    if not groups:
        return None
    cols = [
        c
        for c in columns
        if any((m, c.method, c.metric) in vals for g in groups.values() for m in g)
    ]
    if not cols:
        return None
    shape = (len(groups), len(cols))
    mean, std, n = np.full(shape, np.nan), np.full(shape, np.nan), np.zeros(shape, dtype=int)
    for i, members in enumerate(groups.values()):
        for j, c in enumerate(cols):
            x = np.array(
                [vals[(m, c.method, c.metric)] for m in members if (m, c.method, c.metric) in vals]
            )
            x = x[np.isfinite(x)]
            n[i, j] = x.size
            if x.size:
                mean[i, j] = x.mean()
                std[i, j] = x.std(ddof=1) if x.size > 1 else np.nan
    dl = dataset_labels or {}
    labels = [[dl.get(d, d), name, loss] for (d, name, loss) in groups]
    return StudyTable(
        key=key,
        title=title,
        row_labels=labels,
        row_header=["Dataset", "Model", "Objective"],
        columns=list(cols),
        mean=mean,
        std=std,
        n=n,
    )


METACAL_MAIN = (
    Column("uncalibrated", "error", "Error, %"),
    Column("uncalibrated", "ece", "ECE, %"),
    Column("ts", "ece", "ECE after TS, %"),
    Column("ts", "temperature", "T"),
)
METACAL_APPENDIX = (
    Column("uncalibrated", "ace", "Adaptive ECE, %"),
    Column("ts", "ace", "Adaptive ECE after TS, %"),
    Column("uncalibrated", "cwece", "Classwise ECE, %"),
    Column("ts", "cwece", "Classwise ECE after TS, %"),
)
SOFTCAL_MAIN = (
    Column("uncalibrated", "accuracy", "Accuracy, %"),
    Column("uncalibrated", "ece_l2_mass", "ECE, % (l2, equal-mass)"),
    Column("ts", "ece_l2_mass", "ECE after TS, %"),
)
SOFTCAL_TS = (
    Column("ts", "ece_l2_mass", "TS: ECE l2 mass, %"),
    Column("ts_sbece", "ece_l2_mass", "TS-SB-ECE: ECE l2 mass, %"),
    Column("ts", "ece", "TS: ECE, %"),
    Column("ts_sbece", "ece", "TS-SB-ECE: ECE, %"),
)
SOFTCAL_APPENDIX = (
    Column("uncalibrated", "accuracy", "Accuracy, %"),
    Column("uncalibrated", "ece_l2_mass", "ECE, % (l2, equal-mass)"),
    Column("uncalibrated", "ks", "KS error, %"),
    Column("uncalibrated", "ece_sweep", "Mean-sweep CE, %"),
    Column("uncalibrated", "marginal_ce", "Marginal CE, %"),
)


def metacal_tables(rows, models, *, temperatures=None, dataset_labels=None) -> list[StudyTable]:
    """Seed 002 table 1 and the appendix tables (adaptive / classwise ECE), test half."""
    out = []
    for key, cols, title in (
        ("metacal_main", METACAL_MAIN, "Meta-Calibration table 1: error, ECE, ECE after TS (T)"),
        (
            "metacal_appendix",
            METACAL_APPENDIX,
            "Meta-Calibration appendix: adaptive and classwise ECE",
        ),
    ):
        t = study_table(
            rows,
            models,
            cols,
            key=key,
            title=title,
            temperatures=temperatures,
            dataset_labels=dataset_labels,
        )
        if t is not None:
            out.append(t)
    return out


def softcal_tables(rows, models, *, dataset_labels=None) -> list[StudyTable]:
    """Seed 004 table 1, TS versus TS-SB-ECE, and appendix table 4 (+ marginal CE), test half."""
    out = []
    for key, cols, title in (
        (
            "softcal_main",
            SOFTCAL_MAIN,
            "Soft calibration table 1: accuracy, l2 equal-mass ECE, after TS",
        ),
        (
            "softcal_ts",
            SOFTCAL_TS,
            "Post-hoc: temperature scaling on NLL (TS) versus on SB-ECE (TS-SB-ECE)",
        ),
        (
            "softcal_appendix",
            SOFTCAL_APPENDIX,
            "Soft calibration table 4: KS error, mean-sweep CE, marginal CE",
        ),
    ):
        t = study_table(rows, models, cols, key=key, title=title, dataset_labels=dataset_labels)
        if t is not None:
            out.append(t)
    return out


# --------------------------------------------------------------------------------------------
# histories: DECE against ECE over training (Bohdal et al. 2021 fig. 1)
# --------------------------------------------------------------------------------------------
def read_history(path) -> dict[str, np.ndarray]:
    """A history CSV as ``{column: float array}``."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        raise ValueError(f"{path} holds no epochs; rerun calbench train-model")
    return {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}


def correlations(a, b) -> tuple[float, float]:
    """Pearson and Spearman correlation of two equal-length samples (NaN pairs dropped; NaN when
    fewer than 3 pairs or a constant sample)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan"), float("nan")
    pearson = float(np.corrcoef(a, b)[0, 1])
    spearman = float(np.corrcoef(mean_ranks(a), mean_ranks(b))[0, 1])
    return pearson, spearman


def dece_history(histories: Mapping[str, str], labels: Mapping[str, str]) -> dict | None:
    """Per-model correlation of validation ECE and DECE over epochs, plus all points pooled.

    ``histories`` maps model -> history CSV path; models whose history has no ``val_ece`` are
    skipped. Returns ``{"rows": [{"model", "epochs", "pearson", "spearman", "last_ece",
    "last_dece"}], "pooled": (pearson, spearman), "points": {label: (ece array, dece array)}}``
    or ``None`` when no history has validation columns.
    """
    rows, points = [], {}
    all_e, all_d = [], []
    for m, path in histories.items():
        h = read_history(path)
        if "val_ece" not in h or "val_dece" not in h:
            continue
        e, d = h["val_ece"], h["val_dece"]
        p, s = correlations(e, d)
        label = labels.get(m, m)
        rows.append(
            {
                "model": label,
                "epochs": int(e.size),
                "pearson": p,
                "spearman": s,
                "last_ece": float(e[-1]),
                "last_dece": float(d[-1]),
            }
        )
        points[label] = (e, d)
        all_e.append(e)
        all_d.append(d)
    if not rows:
        return None
    pooled = correlations(np.concatenate(all_e), np.concatenate(all_d))
    return {"rows": rows, "pooled": pooled, "points": points}


def dece_figure_png(points: Mapping[str, tuple]) -> bytes:
    """PNG of validation DECE against ECE over epochs (Bohdal et al. 2021 fig. 1), one line per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4.5))
    hi = 0.0
    for label, (e, d) in points.items():
        ax.plot(100 * e, 100 * d, "o-", ms=3, lw=0.8, label=label, alpha=0.8)
        hi = max(hi, float(np.nanmax(e)), float(np.nanmax(d)))
    ax.plot([0, 100 * hi], [0, 100 * hi], "k--", lw=0.8)
    ax.set_xlabel("validation ECE, % (15 bins)")
    ax.set_ylabel("validation DECE, %")
    ax.set_title("DECE against ECE over training epochs")
    if len(points) <= 12:
        ax.legend(fontsize=6)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


# --------------------------------------------------------------------------------------------
# output formats of study tables
# --------------------------------------------------------------------------------------------
def study_to_html(t: StudyTable) -> str:
    return G.to_html(t.grid())


def study_to_markdown(t: StudyTable) -> str:
    return G.to_markdown(t.grid())


def study_to_csv(t: StudyTable) -> str:
    """Wide CSV: labels, then ``mean``, ``std`` and ``n`` of every column (printed scale)."""
    return G.to_csv(t.grid())
