"""Our numbers beside published ones: ``results/tables/reference.csv``.

:func:`reference_comparison` pairs each published cell (``report.reference`` of the config, e.g.
the coursework's tables, Vasilev 2021) with our test-half value; ``calbench aggregate`` writes the
rows once and ``calbench render-report`` reads them back with :func:`read_reference_table`.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence

from calbench.display import display_spec
from calbench.results import REFERENCE_TABLE_COLUMNS


def reference_comparison(
    rows: Sequence[Mapping],
    reference: Sequence[Mapping],
    *,
    tolerances: Mapping[str, float] | None = None,
    half: str = "test",
    units: str = "fraction",
) -> list[dict]:
    """Pair our test-half values with published ones: ours, theirs, difference, within tolerance.

    ``reference`` rows have ``dataset, model, method, metric, value`` keyed like ours (config
    names). ``units="display"`` means published values are in the printed scale of
    :data:`DISPLAY` (e.g. percent for ECE) and are divided by that scale first. ``tolerances``
    maps metric -> largest allowed ``|ours - theirs|`` (as a fraction); rows without a
    tolerance get ``within = None``.
    """
    if units not in ("fraction", "display"):
        raise ValueError(f"reference units must be 'fraction' or 'display', got {units!r}")
    ours = {
        (r["dataset"], r["model"], r["method"], r["metric"]): r for r in rows if r["half"] == half
    }
    out = []
    for ref in reference:
        key = (ref["dataset"], ref["model"], ref["method"], ref["metric"])
        if key not in ours:
            continue
        theirs = float(ref["value"])
        if units == "display":
            theirs /= display_spec(ref["metric"])[0]
        mine = ours[key]["value"]
        diff = mine - theirs
        tol = (tolerances or {}).get(ref["metric"])
        out.append(
            {
                "dataset": key[0],
                "model": key[1],
                "method": key[2],
                "metric": key[3],
                "ours": mine,
                "ci_low": ours[key].get("ci_low", float("nan")),
                "ci_high": ours[key].get("ci_high", float("nan")),
                "theirs": theirs,
                "difference": diff,
                "tolerance": tol,
                "within": None if tol is None else bool(abs(diff) <= tol),
            }
        )
    return out


def read_reference_table(path) -> list[dict]:
    """The rows of a :func:`reference_comparison` CSV (``results/tables/reference.csv``, written
    by ``calbench aggregate``) as :func:`reference_comparison` returned them: floats at full
    precision (blank = NaN), ``tolerance`` ``None`` when blank, ``within`` ``True`` / ``False``
    / ``None``."""
    out = []
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in REFERENCE_TABLE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(
                f"{path} lacks columns {missing}; rerun calbench aggregate --reference"
            )
        for row in reader:
            for key in ("ours", "ci_low", "ci_high", "theirs", "difference"):
                row[key] = _to_float(row[key])
            row["tolerance"] = None if row["tolerance"] == "" else float(row["tolerance"])
            within = row["within"]
            if within not in ("True", "False", ""):
                raise ValueError(f"{path}: within must be True, False or blank, got {within!r}")
            row["within"] = None if within == "" else within == "True"
            out.append(row)
    return out


def _to_float(text) -> float:
    return float("nan") if text is None or text == "" else float(text)
