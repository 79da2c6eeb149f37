"""A HELM run's scenario_state.json (format ``helm``), written here in the layout of
stanford-crfm/helm (ScenarioState / RequestState / RequestResult serialised without None fields),
never a network call."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calbench.logits_sources import formats

SEP_ORIG, SEP_CAL = "multiple_choice_separate_original", "multiple_choice_separate_calibrated"


def _tokens(prompt: str, reference: str, rng):
    """Echoed tokens: the prompt's words, then the reference in 3-character pieces."""
    toks = [{"text": w, "logprob": float(-rng.uniform(0, 5))} for w in prompt.split(" ")]
    piece = " " + reference
    ref = [piece[i : i + 3] for i in range(0, len(piece), 3)]
    toks += [{"text": t, "logprob": float(-rng.uniform(0, 5))} for t in ref]
    return toks, toks[-len(ref) :]


def _request_state(inst, j, mode, prompt, rng, trial=0):
    toks, ref = _tokens(prompt, inst["references"][j]["output"]["text"], rng)
    return {
        "instance": inst,
        "reference_index": j,
        "request_mode": mode,
        "train_trial_index": trial,
        "request": {"model": "openai/gpt2", "prompt": prompt, "echo_prompt": True, "max_tokens": 0},
        "result": {
            "success": True,
            "embedding": [],
            "completions": [
                {"text": prompt, "logprob": sum(t["logprob"] for t in toks), "tokens": toks}
            ],
            "cached": True,
        },
        "num_train_instances": 0,
        "prompt_truncated": False,
        "num_conditioning_tokens": 0,
    }, ref


def write_run(path, n=6, k=4, method=SEP_ORIG, seed=0, counts=None, trials=1):
    """A scenario_state.json; returns HELM's scores per instance (evaluate_references)."""
    rng = np.random.default_rng(seed)
    states, scores, golds = [], [], []
    for i in range(n):
        kk = (counts or {}).get(i, k)
        gold = int(rng.integers(0, kk))
        inst = {
            "input": {"text": f"Question {i}?"},
            "references": [
                {"output": {"text": f"answer number {j}"}, "tags": ["correct"] if j == gold else []}
                for j in range(kk)
            ],
            "split": "test",
            "id": f"id{i}",
        }
        row = []
        for trial in range(trials):
            for j in range(kk):
                ref_text = inst["references"][j]["output"]["text"]
                st, ref = _request_state(
                    inst, j, "original", f"Question {i}? Answer: {ref_text}", rng, trial
                )
                states.append(st)
                s = sum(t["logprob"] for t in ref)
                if method == SEP_ORIG:
                    score = s / len(ref)
                else:
                    cst, cref = _request_state(
                        inst, j, "calibration", f"Answer: {ref_text}", rng, trial
                    )
                    states.append(cst)
                    score = s - sum(t["logprob"] for t in cref)
                if trial == 0:
                    row.append(score)
        scores.append(row)
        golds.append(gold)
    doc = {
        "adapter_spec": {"method": method, "model": "openai/gpt2", "max_train_instances": 0},
        "request_states": states,
    }
    path.write_text(json.dumps(doc, indent=2))
    return scores, golds


def _read(path, **options):
    return formats.read("helm", path, options=options)


@pytest.mark.parametrize("method", [SEP_ORIG, SEP_CAL])
def test_separate_methods_give_helms_reference_scores(tmp_path, method):
    f = tmp_path / "scenario_state.json"
    scores, golds = write_run(f, method=method, trials=2)
    imp = _read(f)
    want = np.array(scores) - np.max(scores, axis=1, keepdims=True)
    np.testing.assert_allclose(imp.logits, want, atol=1e-5)
    assert imp.labels.tolist() == golds and imp.split is None
    # HELM's predicted_index: the first argmax of the scores
    assert imp.logits.argmax(1).tolist() == np.argmax(scores, axis=1).tolist()


def test_binary_items_and_grouping_by_count(tmp_path):
    f = tmp_path / "scenario_state.json"
    write_run(f, n=5, k=2, counts={4: 3})
    with pytest.raises(ValueError, match=r"4 items with 2 choices, 1 items with 3 choices") as exc:
        _read(f)
    assert "\n" not in str(exc.value)
    two = _read(f, choices=2)
    assert two.logits.shape == (4, 2)  # K = 2
    assert _read(f, choices=3).logits.shape == (1, 3)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda d: d["adapter_spec"].update(method="generation"),
            "logs no log-probability per choice",
        ),
        (lambda d: d["request_states"][0]["result"].update(success=False), "the request failed"),
        (
            lambda d: d["request_states"][0]["result"]["completions"][0]["tokens"].pop(),
            "do not spell the reference",
        ),
        (lambda d: d["request_states"].pop(0), "has no request for reference 0"),
        (lambda d: d["request_states"].append(d["request_states"][0]), "repeats reference 0"),
        (
            lambda d: d["request_states"][0]["instance"]["references"][1]["tags"].append("correct"),
            "2 references tagged correct",
        ),
        (lambda d: d.pop("request_states"), "has no request_states"),
        (
            lambda d: d["request_states"][0]["result"]["completions"][0]["tokens"][-1].update(
                logprob=None
            ),
            "has log-probability None",
        ),
    ],
)
def test_bad_runs_are_one_line_errors(tmp_path, edit, message):
    f = tmp_path / "scenario_state.json"
    write_run(f, n=3)
    doc = json.loads(f.read_text())
    edit(doc)
    f.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=message) as exc:
        _read(f)
    assert "\n" not in str(exc.value)


def test_perturbed_instances_are_left_out_unless_named(tmp_path):
    f = tmp_path / "scenario_state.json"
    write_run(f, n=3)
    doc = json.loads(f.read_text())
    extra = json.loads(json.dumps(doc["request_states"][:4]))
    for st in extra:
        st["instance"]["perturbation"] = {"name": "typos", "prob": 0.1}
    doc["request_states"] += extra
    f.write_text(json.dumps(doc))
    assert _read(f).logits.shape == (3, 4)
    assert _read(f, perturbation="typos").logits.shape == (1, 4)


def write_joint_run(path, n=5, k=4, seed=0, top=True, drop=None):
    """A multiple_choice_joint run as HELM before February 2024 wrote it: one request per
    instance, output_mapping A.., the generated token's top_logprobs (top_k_per_token 5)."""
    rng = np.random.default_rng(seed)
    states, want, golds = [], [], []
    for i in range(n):
        gold = int(rng.integers(0, k))
        refs = [
            {"output": {"text": f"answer {j}"}, "tags": ["correct"] if j == gold else []}
            for j in range(k)
        ]
        lp = -rng.uniform(0.1, 4, size=k)
        alternatives = {f" {chr(65 + j)}": float(lp[j]) for j in range(k)}
        alternatives["A"] = -5.0  # the same letter without its space: probabilities add up
        if drop is not None and i == 1:
            alternatives.pop(f" {chr(65 + drop)}")
        alternatives["\n"] = -6.0
        first = {"text": " A", "logprob": float(lp[0])}
        if top:
            first["top_logprobs"] = alternatives
        states.append(
            {
                "instance": {
                    "input": {"text": f"Q{i}"},
                    "references": refs,
                    "split": "test",
                    "id": f"id{i}",
                },
                "train_trial_index": 0,
                "output_mapping": {chr(65 + j): f"answer {j}" for j in range(k)},
                "request": {
                    "model": "openai/davinci",
                    "prompt": f"Q{i}\nAnswer:",
                    "top_k_per_token": 5,
                    "max_tokens": 1,
                },
                "result": {
                    "success": True,
                    "completions": [{"text": " A", "logprob": float(lp[0]), "tokens": [first]}],
                    "cached": True,
                },
                "num_train_instances": 5,
                "prompt_truncated": False,
            }
        )
        row = lp.copy()
        row[0] = np.logaddexp(lp[0], -5.0)
        want.append(row)
        golds.append(gold)
    path.write_text(
        json.dumps(
            {
                "adapter_spec": {"method": "multiple_choice_joint", "num_outputs": 5},
                "request_states": states,
            }
        )
    )
    return np.array(want), golds


def test_joint_runs_read_the_letters_top_logprobs(tmp_path):
    f = tmp_path / "scenario_state.json"
    want, golds = write_joint_run(f)
    imp = _read(f)
    np.testing.assert_allclose(imp.logits, want - want.max(1, keepdims=True), atol=1e-5)
    assert imp.labels.tolist() == golds


@pytest.mark.parametrize(
    "kwargs, message",
    [({"top": False}, "has no top_logprobs"), ({"drop": 2}, r"choices \['C'\] are not among")],
)
def test_joint_runs_without_every_letter_are_refused(tmp_path, kwargs, message):
    f = tmp_path / "scenario_state.json"
    write_joint_run(f, **kwargs)
    with pytest.raises(ValueError, match=message) as exc:
        _read(f)
    assert "\n" not in str(exc.value)
