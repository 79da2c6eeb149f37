"""Published result tables shipped as package data, for comparison with reproduced numbers.

``coursework_2021``: the 18 tables of R. Vasilev's 2021 MSU coursework on post-hoc calibration
(Tables 1-14 of the PDF plus the ACC/BS/MCE/NLL variants of Tables 1-2), long format, one row per
printed cell: ``table, metric, group, dataset, model, loss, method, value, study_key,
calbench_model``. Values are the printed numbers (ACC/ECE/MCE/cwECE in percent, NLL and Brier
as is); ``value`` is returned as float and ``printed`` keeps the original string with its
rounding. See README.md next to the CSV for the source.
"""

from __future__ import annotations

import csv
from importlib import resources

AVAILABLE = ("coursework_2021",)


def load_reference(name: str = "coursework_2021") -> list[dict]:
    """Rows of a shipped reference table as dicts (``value`` float, ``group`` int, ``printed`` str)."""
    if name not in AVAILABLE:
        raise ValueError(f"unknown reference table {name!r}; available: {list(AVAILABLE)}")
    text = resources.files(__name__).joinpath(f"{name}.csv").read_text()
    rows = []
    for r in csv.DictReader(text.splitlines()):
        r["printed"] = r["value"]
        r["value"] = float(r["value"])
        r["group"] = int(r["group"])
        rows.append(r)
    return rows


def lookup(rows: list[dict], **where) -> list[dict]:
    """Rows whose fields equal every ``where`` item (e.g. ``metric="ECE", calbench_model="c100_resnet20"``)."""
    return [r for r in rows if all(r.get(k) == v for k, v in where.items())]
