"""Multiple-choice logs as K-way classifiers: the number of choices a log's items are imported
with (shared by the ``lm_eval`` and ``helm`` sources)."""

from __future__ import annotations

from collections.abc import Mapping


def choice_count(path, counts: Mapping[int, int], want_k) -> int:
    """The number of choices to import: ``want_k`` (``logits.choices``) when given, else the one
    number every item has (``counts``: number of choices -> items); items of mixed counts
    without ``logits.choices`` are a one-line error listing the counts."""
    if want_k is None:
        if len(counts) > 1:
            listed = ", ".join(f"{c:,} items with {k} choices" for k, c in sorted(counts.items()))
            raise ValueError(
                f"{path}: items have different numbers of choices ({listed}); set logits.choices "
                f"to one of {sorted(counts)} to import the items with that many"
            )
        want_k = next(iter(counts))
    return int(want_k)
