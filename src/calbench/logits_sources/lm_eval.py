"""A multiple-choice task's per-sample log of lm-evaluation-harness (format ``lm_eval``).

``lm_eval --log_samples --output_path OUT`` writes one ``samples_{task}_{date}.jsonl`` per task
(EleutherAI/lm-evaluation-harness ``lm_eval/loggers/evaluation_tracker.py``,
``save_results_samples``), one JSON object per line and filter, built in ``lm_eval/evaluator.py``
(``evaluate``, the ``log_samples`` branch):

* ``doc_id`` (int), ``doc`` (the dataset row), ``filter`` (the filter's name, ``none`` for
  multiple-choice tasks), ``metrics`` (the metric names, e.g. ``["acc", "acc_norm"]``);
* ``target``: ``str(task.doc_to_target(doc))``: the gold choice's index as text (``"2"``), or
  for tasks whose target is the choice text, that text;
* ``arguments``: ``{"gen_args_<i>": {"arg_0": context, "arg_1": continuation}}``, one per
  request: for a multiple-choice task one per choice, the continuation being the target
  delimiter (usually ``" "``) followed by the choice;
* ``resps`` / ``filtered_resps``: per request, ``[loglikelihood, is_greedy]``
  (``resps`` one level deeper); the tracker turns every value into a string
  (``lm_eval/utils.py`` ``sanitize_list``), older versions wrote numbers: both are read.

A multiple-choice task with the ``acc_mutual_info`` metric sends each choice twice (conditional,
then unconditional; ``lm_eval/api/task.py`` ``construct_requests`` / ``process_results``): only
the first half, the conditional log-likelihoods, is read. Each item's logits are its choices'
log-likelihoods ``log P(choice | context)`` (what lm-eval's ``acc`` takes the argmax of), shifted
by the item's largest one (softmax unchanged, float32 keeps their differences); its label is the
gold index. The logits file has no split of its own: the study split applies.

Items with another number of choices than the rest are grouped by that number: ``choices: K``
in the entry imports the items with K choices; without it, a log whose items do not all have the
same number is a one-line error naming the counts.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping

import numpy as np

from calbench.logits_sources.choices import choice_count

#: The metric whose requests are doubled (conditional, then unconditional log-likelihoods).
MUTUAL_INFO = "acc_mutual_info"


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{where}: log-likelihood {value!r} is not a number")
    try:
        x = float(value)
    except ValueError:
        raise ValueError(f"{where}: log-likelihood {value!r} is not a number") from None
    if not math.isfinite(x):
        raise ValueError(f"{where}: log-likelihood {value!r} is not finite")
    return x


def _loglikelihoods(sample: Mapping, where: str) -> list[float]:
    resps = sample.get("filtered_resps")
    if not isinstance(resps, list) or not resps:
        raise ValueError(
            f"{where}: no filtered_resps list; is this a multiple-choice task's "
            "--log_samples file (samples_<task>_<date>.jsonl)?"
        )
    out = []
    for r in resps:
        # filtered_resps: [ll, is_greedy] per choice; a generate_until task logs strings
        if isinstance(r, (list, tuple)) and len(r) == 2:
            out.append(_number(r[0], where))
        else:
            raise ValueError(
                f"{where}: filtered_resps holds {str(r)[:40]!r}, not [loglikelihood, is_greedy]: "
                "only multiple-choice (loglikelihood) tasks have per-choice log-likelihoods"
            )
    if MUTUAL_INFO in (sample.get("metrics") or []):
        if len(out) % 2:
            raise ValueError(f"{where}: acc_mutual_info log with an odd number of requests")
        out = out[: len(out) // 2]
    return out


def _choice_texts(sample: Mapping, k: int) -> list[str] | None:
    args = sample.get("arguments")
    if not isinstance(args, Mapping):
        return None
    texts = []
    for i in range(k):
        a = args.get(f"gen_args_{i}")
        if not isinstance(a, Mapping) or not isinstance(a.get("arg_1"), str):
            return None
        texts.append(a["arg_1"])
    return texts


def _gold(sample: Mapping, k: int, where: str) -> int:
    target = sample.get("target")
    if isinstance(target, bool) or target is None:
        raise ValueError(f"{where}: target {target!r} is not a choice index")
    text = str(target).strip()
    if text.lstrip("-").isdigit():
        g = int(text)
        if not 0 <= g < k:
            raise ValueError(f"{where}: target {g} is outside the item's {k} choices")
        return g
    if text.startswith("["):
        raise ValueError(
            f"{where}: target {text[:40]} lists several gold choices; one gold index per item is "
            "needed (multiple-target tasks are not supported)"
        )
    texts = _choice_texts(sample, k)
    hits = [i for i, t in enumerate(texts or []) if t.strip() == text]
    if len(hits) != 1:
        raise ValueError(
            f"{where}: target {text[:40]!r} is neither a choice index nor exactly one of the "
            "item's choices (arguments.gen_args_<i>.arg_1)"
        )
    return hits[0]


def read_lm_eval(path, options: Mapping) -> tuple[np.ndarray, np.ndarray, None]:
    """``(logits, labels, None)`` of a ``samples_<task>_<date>.jsonl``; rows in ``doc_id``
    order. ``options``: ``choices`` (import only the items with that many choices), ``filter``
    (the filter whose lines are read; needed when the log holds several)."""
    want_k = options.get("choices")
    want_filter = options.get("filter")
    items = []  # (doc_id, filter, lls, gold)
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}: line {line_no}"
            try:
                sample = json.loads(line)
            except ValueError:
                raise ValueError(
                    f"{where} is not JSON; expected lm_eval's --log_samples JSONL"
                ) from None
            if not isinstance(sample, dict) or "doc_id" not in sample:
                raise ValueError(f"{where} has no doc_id; expected lm_eval's --log_samples JSONL")
            items.append((sample["doc_id"], str(sample.get("filter", "none")), sample, where))
    if not items:
        raise ValueError(f"{path} holds no samples; expected lm_eval's --log_samples JSONL")
    filters = sorted({f for _, f, _, _ in items})
    if want_filter is None and len(filters) > 1:
        raise ValueError(
            f"{path} holds the filters {filters}; set logits.filter to the one to import"
        )
    chosen = want_filter if want_filter is not None else filters[0]
    if chosen not in filters:
        raise ValueError(f"{path} has no filter {chosen!r} (it has {filters}); fix logits.filter")
    rows, seen = [], set()
    for doc_id, f, sample, where in items:
        if f != chosen:
            continue
        if doc_id in seen:
            raise ValueError(
                f"{where} repeats doc_id {doc_id} (filter {f}); the log was appended to by a "
                "second run: keep one run's lines"
            )
        seen.add(doc_id)
        lls = _loglikelihoods(sample, where)
        rows.append((doc_id, lls, sample, where))
    counts = Counter(len(lls) for _, lls, _, _ in rows)
    want_k = choice_count(path, counts, want_k)
    if want_k < 2:
        raise ValueError(f"{path}: items have {want_k} choice(s); a classifier needs at least 2")
    rows = [r for r in rows if len(r[1]) == want_k]
    if not rows:
        raise ValueError(
            f"{path} has no item with {want_k} choices (counts: {dict(sorted(counts.items()))})"
        )
    try:
        rows.sort(key=lambda r: r[0])
    except TypeError:
        raise ValueError(f"{path}: doc_id values of different types; expected integers") from None
    z = np.array([r[1] for r in rows], dtype=np.float64)
    y = np.array([_gold(s, want_k, w) for _, _, s, w in rows], dtype=np.int64)
    return z - z.max(axis=1, keepdims=True), y, None
