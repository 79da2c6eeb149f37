"""The report's "Spread over partitions" section: how much a cross-fitted study's verdicts depend
on the partition drawn (``evaluation.scheme: crossfit`` with ``repeats`` > 1).

A cross-fitted study (:meth:`calbench.protocol.CalibrateSpec.run`, docs/statistics.md
"Cross-fitted evaluation") partitions every labelled sample ``R`` times into ``F`` folds; the
calibrate step writes, per model, ``results/partitions/{dataset}/{model}.csv``
(:data:`calbench.results.PARTITION_COLUMNS`): per comparison, the share of partitions in which
the difference is significant, the between- and within-partition variance of the difference
(:func:`calbench.stats.resampled.variance_split`) and the calibrators' shares of first places
(:func:`calbench.stats.resampled.winner_share`). :func:`partitions_view` turns them into the
section's tables; :mod:`calbench.report.sections` places the section after the findings; :func:`scheme_protocol` is the scheme's part of the
report spec's ``protocol`` (empty for a holdout study, whose spec is then what it was).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from calbench.display import spec_labels
from calbench.report.ranks import metric_name
from calbench.results import PARTITION_COLUMNS, PARTITION_NUMERIC, read_long_csv


def scheme_protocol(evaluation: Mapping) -> dict:
    """The evaluation scheme for the report spec's ``protocol``: ``scheme``, ``folds`` and
    ``repeats`` for a cross-fitted study, nothing for a holdout one."""
    if evaluation.get("scheme", "holdout") != "crossfit":
        return {}
    return {k: evaluation[k] for k in ("scheme", "folds", "repeats")}


def read_partition_rows(paths) -> list[dict]:
    """The rows of the per-model partitions CSVs, read as strictly as every result file
    (:func:`calbench.results.read_long_csv`; ``within`` and ``between_share`` may be blank)."""
    return read_long_csv(
        list(paths or []),
        PARTITION_COLUMNS,
        numeric=PARTITION_NUMERIC,
        blank_ok=("between", "within", "between_share"),
    )


def _share(x: float) -> str:
    return f"{100 * x:.0f}%"


def _sci(x: float) -> str:
    return "–" if math.isnan(x) else f"{x:.2g}"


def partitions_view(rows: Sequence[Mapping], spec: Mapping) -> dict | None:
    """The section's tables from the partitions rows (``None`` without rows or with a single
    partition, where nothing spreads): ``winners`` (per model and metric, the calibrator first
    in most partitions and its share of first places) and ``pairs`` (per comparison: the
    difference, the share of partitions where it is significant after Holm's correction, and
    the between- and within-partition variance with the between part's share)."""
    if not rows or max(r["n_partitions"] for r in rows) < 2:
        return None
    ml, cl, _, _ = spec_labels(spec)  # the labels every other section uses

    def model(r) -> str:
        return ml.get(r["model"], r["model"])

    def cal(name: str) -> str:
        return cl.get(name, name)

    winners, pairs = {}, []
    for r in rows:
        winners.setdefault(
            (r["model"], r["metric"]),
            {"model": model(r), "metric": metric_name(r["metric"]), "winner": cal(r["winner"]),
             "share": _share(r["winner_share"])},
        )  # fmt: skip
        pairs.append(
            {
                "model": model(r), "metric": metric_name(r["metric"]), "family": r["family"],
                "method": cal(r["method"]), "baseline": cal(r["baseline"]),
                "difference": f"{r['difference']:.4g}",
                "significant": _share(r["significant_share"]), "between": _sci(r["between"]),
                "within": _sci(r["within"]),
                "between_share": "–" if math.isnan(r["between_share"]) else _share(r["between_share"]),
            }
        )  # fmt: skip
    first = rows[0]
    shares = [float(r["significant_share"]) for r in rows]
    stable = {(r["model"], r["metric"]): float(r["winner_share"]) for r in rows}
    return {
        "n_partitions": int(first["n_partitions"]),
        "folds": int(first["folds"]),
        "winners": list(winners.values()),
        "pairs": pairs,
        # the finding's counts: comparisons significant in every / some / no partition, and the
        # model-metric pairs whose first place is the same calibrator in every partition
        "n_pairs": len(shares),
        "in_all": sum(x == 1.0 for x in shares),
        "in_some": sum(0.0 < x < 1.0 for x in shares),
        "in_none": sum(x == 0.0 for x in shares),
        "n_winners": len(stable),
        "same_winner": sum(x == 1.0 for x in stable.values()),
    }


def partition_finding(view: Mapping | None) -> dict | None:
    """The findings' sentence on the spread over partitions (``None`` without the section):
    how many comparisons are significant in every, some and no partition, and on how many
    model-metric pairs the same calibrator ranks first in every partition."""
    if not view:
        return None
    r = view["n_partitions"]
    text = (
        f"Over the {r} partitions into folds: {view['in_all']} of {view['n_pairs']} comparisons "
        f"are significant in every partition, {view['in_some']} in some and {view['in_none']} "
        f"in none; the same calibrator ranks first in every partition on "
        f"{view['same_winner']} of {view['n_winners']} model-metric pairs (Spread over "
        "partitions)."
    )
    return {"family": "partitions", "text": text, "direction": "", "size": None,
            "support": "supported", "pairs": []}  # fmt: skip
