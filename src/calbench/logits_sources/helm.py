"""A HELM run's instance-level predictions (format ``helm``): ``scenario_state.json``.

``helm-run`` writes each run to ``benchmark_output/runs/{suite}/{run_name}/``; its
``scenario_state.json`` (stanford-crfm/helm ``src/helm/benchmark/runner.py``, a
``ScenarioState`` of ``src/helm/benchmark/adaptation/scenario_state.py`` serialised without
``None`` fields) holds ``adapter_spec`` (with ``method``) and ``request_states``, each a
``RequestState`` (``src/helm/benchmark/adaptation/request_state.py``): ``instance``
(``id``, ``split``, ``references`` = ``[{"output": {"text"}, "tags": ["correct"] | []}]``,
optional ``perturbation``), ``train_trial_index``, ``reference_index``, ``request_mode``
(``original`` / ``calibration``) and ``result`` (``success``, ``completions`` =
``[{"text", "logprob", "tokens": [{"text", "logprob"}]}]``, ``src/helm/common/request.py``).

Per-choice scores exist for the adapter methods that score each choice by its own request,
``multiple_choice_separate_original`` and ``multiple_choice_separate_calibrated``
(``src/helm/benchmark/adaptation/adapter_spec.py``). Their requests echo the prompt, which ends in
``" " + reference``; HELM's ``evaluate_references`` (``src/helm/benchmark/metrics/
basic_metrics.py``) sums the log-probabilities of the reference's last tokens and scores a
choice by that sum divided by its token count (``separate_original``) or by the sum minus the
same reference's sum without context (``separate_calibrated``); its ``max_prob`` is the softmax
of these scores. The logits written here are those scores, so ``softmax(logits)`` is HELM's
distribution over the choices; the reference's tokens are found without HELM's tokenizer, as the
shortest run of final tokens whose texts join to the reference (surrounding spaces ignored).

``multiple_choice_joint`` runs (HELM's default for MMLU) ask for one generated letter; the choices
are the letters ``A, B, ...`` of ``output_mapping`` (``get_reference_prefix`` in
``src/helm/benchmark/adaptation/adapters/multiple_choice_joint_adapter.py``). HELM before
February 2024 (commit e1aae40e, "Remove top_logprobs") logged each token's ``top_logprobs``
(``{text: log-probability}``, the request's ``top_k_per_token`` = the adapter's ``num_outputs``,
5 by default): a choice's logit is then the log of the summed probability of the first token's
alternatives that spell its letter (``" A"``, ``"A"``), and ``softmax(logits)`` that distribution
restricted to the K letters and re-normalised (HELM's own ``max_prob`` for these runs is the
unnormalised probability of the generated text). A letter missing from ``top_logprobs`` (its
probability fell below the top k) is a one-line error, and so is a run without ``top_logprobs``
(HELM since February 2024 logs ``text`` and ``logprob`` only): run such a scenario with a
separate method.

The label is the index of the reference tagged ``correct`` (exactly one). Rows follow the
instances' first appearance; ``train_trial_index`` 0 and unperturbed instances are read (options
``trial``, ``perturbation``: a perturbation's ``name``). Items with another number of choices are
grouped as in :mod:`calbench.logits_sources.lm_eval` (``choices: K``). No split of its own: the
study split applies.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping

import numpy as np

from calbench.logits_sources.choices import choice_count

SEPARATE = ("multiple_choice_separate_original", "multiple_choice_separate_calibrated")
JOINT = "multiple_choice_joint"
CORRECT_TAG = "correct"


def _reference_logprob(rs: Mapping, text: str, where: str) -> tuple[float, int]:
    """``(sum of log-probabilities, token count)`` of the final tokens spelling ``text``."""
    result = rs.get("result") or {}
    if not result.get("success", False):
        raise ValueError(f"{where}: the request failed (result.success is false); rerun it")
    comps = result.get("completions") or []
    if len(comps) != 1 or not isinstance(comps[0].get("tokens"), list):
        raise ValueError(f"{where}: expected one completion with tokens, found {len(comps)}")
    tokens = comps[0]["tokens"]
    want = text.strip()
    joined, total = "", 0.0
    for n, tok in enumerate(reversed(tokens), start=1):
        if not isinstance(tok, Mapping) or not isinstance(tok.get("text"), str):
            raise ValueError(f"{where}: a token without text")
        lp = tok.get("logprob")
        if isinstance(lp, bool) or not isinstance(lp, (int, float)) or not math.isfinite(lp):
            raise ValueError(f"{where}: token {tok['text']!r} has log-probability {lp!r}")
        joined, total = tok["text"] + joined, total + float(lp)
        if joined.strip() == want and want:
            return total, n
        if len(joined.strip()) > len(want) + 1:
            break
    raise ValueError(
        f"{where}: the completion's final tokens do not spell the reference {want[:40]!r}; is this "
        "an echoed multiple_choice_separate request?"
    )


def _joint_scores(rs: Mapping, k: int, where: str) -> list[float]:
    """The K letters' log-probabilities from the first generated token's ``top_logprobs``."""
    result = rs.get("result") or {}
    if not result.get("success", False):
        raise ValueError(f"{where}: the request failed (result.success is false); rerun it")
    comps = result.get("completions") or []
    tokens = comps[0].get("tokens") if comps and isinstance(comps[0], Mapping) else None
    if not tokens or not isinstance(tokens[0], Mapping):
        raise ValueError(f"{where}: the completion has no tokens")
    top = tokens[0].get("top_logprobs")
    if not isinstance(top, Mapping) or not top:
        raise ValueError(
            f"{where}: the generated token has no top_logprobs (HELM logs them only before "
            "February 2024); per-choice log-probabilities need them or a separate method"
        )
    letters = [chr(ord("A") + i) for i in range(k)]
    mapping = rs.get("output_mapping")
    if isinstance(mapping, Mapping) and sorted(mapping) != letters:
        raise ValueError(f"{where}: output_mapping keys {sorted(mapping)[:6]} are not {letters}")
    scores, missing = [], []
    for letter in letters:
        vals = []
        for text, lp in top.items():
            if str(text).strip() == letter:
                if (
                    isinstance(lp, bool)
                    or not isinstance(lp, (int, float))
                    or not math.isfinite(lp)
                ):
                    raise ValueError(f"{where}: top_logprobs[{text!r}] = {lp!r} is not a number")
                vals.append(float(lp))
        if not vals:
            missing.append(letter)
            continue
        m = max(vals)
        scores.append(m + math.log(sum(math.exp(v - m) for v in vals)))
    if missing:
        raise ValueError(
            f"{where}: choices {missing} are not among the first generated token's "
            f"{len(top)} top_logprobs; their log-probabilities are unknown (raise the run's "
            "num_outputs, or use a separate method)"
        )
    return scores


def read_helm(path, options: Mapping) -> tuple[np.ndarray, np.ndarray, None]:
    """``(logits, labels, None)`` of a HELM ``scenario_state.json`` (see the module docstring).
    ``options``: ``choices``, ``trial`` (default 0), ``perturbation`` (default none)."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except ValueError:
        raise ValueError(f"{path} is not JSON; expected a HELM run's scenario_state.json") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("request_states"), list):
        raise ValueError(f"{path} has no request_states; expected a HELM scenario_state.json")
    method = (doc.get("adapter_spec") or {}).get("method")
    if method not in (*SEPARATE, JOINT):
        raise ValueError(
            f"{path}: adapter method {method!r} logs no log-probability per choice; run the "
            f"scenario with method {SEPARATE[0]} or {SEPARATE[1]}"
        )
    trial = int(options.get("trial", 0))
    pert = options.get("perturbation")
    items: dict = {}  # instance key -> {"refs", "scores": {(index, mode): (logprob, n)}}
    for i, rs in enumerate(doc["request_states"]):
        where = f"{path}: request_states[{i}]"
        if not isinstance(rs, Mapping) or not isinstance(rs.get("instance"), Mapping):
            raise ValueError(f"{where} has no instance")
        inst = rs["instance"]
        if rs.get("train_trial_index", 0) != trial:
            continue
        if ((inst.get("perturbation") or {}).get("name")) != pert:
            continue
        key = inst.get("id") if inst.get("id") is not None else json.dumps(inst, sort_keys=True)
        refs = inst.get("references")
        if not isinstance(refs, list) or not refs:
            raise ValueError(f"{where}: instance {key} has no references")
        if method == JOINT:
            if key in items:
                raise ValueError(f"{where} repeats instance {key}")
            items[key] = {"refs": refs, "joint": _joint_scores(rs, len(refs), where)}
            items[key]["where"] = where
            continue
        idx, mode = rs.get("reference_index"), rs.get("request_mode") or "original"
        if not isinstance(idx, int) or not 0 <= idx < len(refs):
            raise ValueError(f"{where}: reference_index {idx!r} for {len(refs)} references")
        item = items.setdefault(key, {"refs": refs, "scores": {}, "where": where})
        if (idx, mode) in item["scores"]:
            raise ValueError(f"{where} repeats reference {idx} ({mode}) of instance {key}")
        text = (refs[idx].get("output") or {}).get("text")
        if not isinstance(text, str):
            raise ValueError(f"{where}: reference {idx} of instance {key} has no output.text")
        item["scores"][(idx, mode)] = _reference_logprob(rs, text, where)
    if not items:
        raise ValueError(
            f"{path} has no request states for trial {trial} and perturbation {pert!r}"
        )
    counts = Counter(len(it["refs"]) for it in items.values())
    want_k = options.get("choices")
    want_k = choice_count(path, counts, want_k)
    rows, labels = [], []
    for key, it in items.items():
        refs = it["refs"]
        if len(refs) != want_k:
            continue
        gold = [j for j, r in enumerate(refs) if CORRECT_TAG in (r.get("tags") or [])]
        if len(gold) != 1:
            raise ValueError(
                f"{it['where']}: instance {key} has {len(gold)} references tagged correct; "
                "one gold choice per item is needed"
            )
        scores = list(it.get("joint") or [])
        for j in range(want_k if method != JOINT else 0):
            orig = it["scores"].get((j, "original"))
            if orig is None:
                raise ValueError(f"{path}: instance {key} has no request for reference {j}")
            if method == SEPARATE[0]:
                scores.append(orig[0] / orig[1])
            else:
                cal = it["scores"].get((j, "calibration"))
                if cal is None:
                    raise ValueError(
                        f"{path}: instance {key} has no calibration request for reference {j}"
                    )
                scores.append(orig[0] - cal[0])
        rows.append(scores)
        labels.append(gold[0])
    if want_k < 2 or not rows:
        raise ValueError(
            f"{path} has no item with {want_k} (>= 2) choices (counts: {dict(sorted(counts.items()))})"
        )
    z = np.array(rows, dtype=np.float64)
    return z - z.max(axis=1, keepdims=True), np.array(labels, dtype=np.int64), None
