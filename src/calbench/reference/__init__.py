"""Published result tables shipped as package data, for comparison with reproduced numbers.

``coursework_2021``: the 18 tables of R. Vasilev's 2021 MSU coursework on post-hoc calibration
(Tables 1-14 of the PDF plus the ACC/BS/MCE/NLL variants of Tables 1-2), long format, one row per
printed cell: ``table, metric, group, dataset, model, loss, method, value, study_key,
calbench_model``. Values are the printed numbers (ACC/ECE/MCE/cwECE in percent, NLL and Brier
as is); ``value`` is returned as float and ``printed`` keeps the original string with its
rounding. See README.md next to the CSV for the source.

``guo_kull_logits``: the published numbers the Guo et al. 2017 / Kull et al. 2019 study on
Kängsepp's logits is compared with (Guo et al. Tables 1, S2, S3; Kull et al.'s notebook for
Tables 3-4 and its full-precision rows; Kängsepp's notebook; CalArena; a DenseNet-40 summary
table), same columns plus ``source``; see :mod:`calbench.reference.guo_kull`.
"""

from __future__ import annotations

import csv
import io
from importlib import resources

from calbench.results import REFERENCE_CSV_COLUMNS

AVAILABLE = ("coursework_2021", "guo_kull_logits")

#: The study's names -> the workflow's config keys (``config/coursework.yaml``).
DATASET_KEYS = {
    "CIFAR-10": "cifar10",
    "CIFAR-100": "cifar100",
    "ImageNet": "imagenet",
    "TinyImageNet": "tiny_imagenet",
}
METHOD_KEYS = {
    "Uncalibrated": "uncalibrated",
    "Hist-binning": "hist",
    "Isotonic": "iso",
    "T-scaling": "ts",
    "V-scaling": "vs",
    "V-scaling-b": "vs_b",
    "M-scaling-b": "ms_b",
}
METRIC_KEYS = {
    "ACC": "accuracy",
    "ECE": "ece",
    "cwECE": "cwece",
    "MCE": "mce",
    "NLL": "nll",
    "BS": "brier",
}


def load_reference(name: str = "coursework_2021") -> list[dict]:
    """Rows of a shipped reference table as dicts (``value`` float, ``group`` int, ``printed`` str)."""
    if name not in AVAILABLE:
        raise ValueError(f"unknown reference table {name!r}; available: {list(AVAILABLE)}")
    text = resources.files(__name__).joinpath(f"{name}.csv").read_text()
    rows = []
    for r in csv.DictReader(text.splitlines()):
        r["printed"] = r["value"]
        # "NA": a cell the publication prints as not available (e.g. Guo et al.'s matrix scaling
        # on ImageNet, which did not converge)
        r["value"] = float("nan") if r["value"] == "NA" else float(r["value"])
        r["group"] = int(r["group"])
        rows.append(r)
    return rows


def lookup(rows: list[dict], **where) -> list[dict]:
    """Rows whose fields equal every ``where`` item (e.g. ``metric="ECE", calbench_model="c100_resnet20"``)."""
    return [r for r in rows if all(r.get(k) == v for k, v in where.items())]


def workflow_rows(name: str = "coursework_2021") -> list[dict]:
    """The cells of the metric tables (``metrics_<M>_<group>``; the ``fl_*`` tables repeat the
    group-2 uncalibrated cells) keyed like the workflow's config: ``dataset`` slug, ``model``
    (registry name), ``method`` (calibrator slug), ``metric`` (:data:`calbench.metrics.METRICS`
    name), ``value`` as printed (percent for ACC/ECE/MCE/cwECE: the report's ``units: display``),
    ``group`` and the study's ``table`` name."""
    if name != "coursework_2021":
        raise ValueError(
            f"reference table {name!r} has no single workflow key per cell (several sources per "
            "model); compare it with `calbench guo-kull-tables` (calbench.reference.guo_kull)"
        )
    out = []
    for r in load_reference(name):
        if not r["table"].startswith("metrics_"):
            continue
        out.append(
            {
                "dataset": DATASET_KEYS[r["dataset"]],
                "model": r["calbench_model"],
                "method": METHOD_KEYS[r["method"]],
                "metric": METRIC_KEYS[r["metric"]],
                "value": r["printed"],
                "group": r["group"],
                "table": r["table"],
            }
        )
    return out


def reference_csv_text(name: str = "coursework_2021") -> str:
    """:func:`workflow_rows` as CSV text (header :data:`REFERENCE_CSV_COLUMNS`); a
    ``calarena_*`` name: CalArena's packaged results (:mod:`calbench.reference.calarena`)."""
    if name.startswith("calarena_"):
        from calbench.reference import calarena  # lazy: code inputs

        return calarena.reference_csv_text(name)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(REFERENCE_CSV_COLUMNS)
    for r in workflow_rows(name):
        w.writerow([r[c] for c in REFERENCE_CSV_COLUMNS])
    return buf.getvalue()
