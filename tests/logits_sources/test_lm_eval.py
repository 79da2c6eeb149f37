"""lm-evaluation-harness ``--log_samples`` JSONL (format ``lm_eval``), with logs written here the
way lm_eval/loggers/evaluation_tracker.py writes them (values made strings by sanitize_list,
``target`` as ``str``, ``arguments`` as ``gen_args_<i>`` / ``arg_<j>``), never a network call."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from calbench.functional import softmax
from calbench.logits import load_logits
from calbench.logits_sources import formats, import_logits

REPO = Path(__file__).resolve().parents[2]


def sample(
    doc_id, lls, gold, *, choices=None, filt="none", metrics=("acc", "acc_norm"), strings=True
):
    """One line of samples_<task>_<date>.jsonl for a multiple-choice item."""
    gold = int(gold)
    choices = choices or [f"choice {i}" for i in range(len(lls))]
    ctx = f"Question {doc_id}?\nAnswer:"
    args = [(ctx, f" {c}") for c in choices]
    if "acc_mutual_info" in metrics:
        args += [("", f" {c}") for c in choices]
    resps = [[(ll, False)] for ll in lls]
    filtered = [(ll, False) for ll in lls]
    conv = (lambda v: str(v)) if strings else (lambda v: v)
    return {
        "doc_id": doc_id,
        "doc": {"question": f"Question {doc_id}?", "choices": choices, "answer": gold},
        "target": str(gold),
        "arguments": {
            f"gen_args_{i}": {f"arg_{j}": a for j, a in enumerate(arg)}
            for i, arg in enumerate(args)
        },
        "resps": [[[conv(x) for x in r] for r in rr] for rr in resps],
        "filtered_resps": [[conv(x) for x in r] for r in filtered],
        "filter": filt,
        "metrics": list(metrics),
        "doc_hash": "0" * 64,
        "prompt_hash": "1" * 64,
        "target_hash": "2" * 64,
        "acc": 1.0,
        "acc_norm": 1.0,
    }


def write_log(path, samples):
    with open(path, "w", encoding="utf-8") as f:
        for s in samples:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
    return path


def _mmlu(n=12, k=4, seed=0):
    rng = np.random.default_rng(seed)
    lls = -rng.uniform(0.1, 8.0, size=(n, k)) - 300.0  # long contexts: large negative values
    gold = rng.integers(0, k, n)
    return lls, gold


def _read(path, **options):
    return formats.read("lm_eval", path, options=options)


def test_multiple_choice_log_becomes_choice_logits(tmp_path):
    lls, gold = _mmlu()
    order = [5, 0, 11, 3, 1, 2, 4, 6, 7, 8, 9, 10]  # lines need not be in doc_id order
    f = write_log(
        tmp_path / "samples_mmlu_anatomy_2026-01-01T00-00-00.jsonl",
        [sample(i, lls[i].tolist(), gold[i]) for i in order],
    )
    imp = _read(f)
    assert imp.logits.shape == (12, 4) and imp.split is None
    np.testing.assert_array_equal(imp.labels, gold)
    np.testing.assert_allclose(softmax(imp.logits.astype(np.float64)), softmax(lls), atol=1e-6)
    assert (imp.logits.max(1) == 0).all()  # shifted by each item's largest log-likelihood


def test_numbers_written_by_older_versions_and_a_text_target(tmp_path):
    lls, gold = _mmlu(4, 3)
    lines = [sample(i, lls[i].tolist(), gold[i], strings=False) for i in range(4)]
    lines[2]["target"] = f"choice {gold[2]}"  # doc_to_target gave the choice's text
    imp = _read(write_log(tmp_path / "s.jsonl", lines))
    np.testing.assert_array_equal(imp.labels, gold)


def test_mutual_info_reads_the_conditional_half(tmp_path):
    lls, gold = _mmlu(3, 4)
    lines = [
        sample(i, lls[i].tolist() + [-1.0] * 4, gold[i], metrics=("acc", "acc_mutual_info"))
        for i in range(3)
    ]
    imp = _read(write_log(tmp_path / "s.jsonl", lines))
    np.testing.assert_allclose(softmax(imp.logits.astype(np.float64)), softmax(lls), atol=1e-6)


def test_items_with_other_counts_are_grouped_or_refused(tmp_path):
    lls, gold = _mmlu(6, 4)
    lines = [sample(i, lls[i].tolist(), gold[i]) for i in range(6)]
    lines += [sample(6, [-1.0, -2.0, -3.0, -4.0, -5.0], 4), sample(7, [-1.0, -2.0], 1)]
    f = write_log(tmp_path / "s.jsonl", lines)
    with pytest.raises(
        ValueError,
        match=r"1 items with 2 choices, 6 items with 4 choices, 1 items with 5 choices.*set logits.choices to one of \[2, 4, 5\]",
    ) as exc:
        _read(f)
    assert "\n" not in str(exc.value)
    assert _read(f, choices=4).logits.shape == (6, 4)
    two = _read(f, choices=2)
    assert two.logits.shape == (1, 2) and two.labels.tolist() == [1]  # K = 2 works
    with pytest.raises(ValueError, match="no item with 3 choices"):
        _read(f, choices=3)


@pytest.mark.parametrize(
    "edit, options, message",
    [
        (lambda ls: ls.append(dict(ls[0])), {}, "repeats doc_id 0"),
        (
            lambda ls: ls.append({**ls[0], "filter": "strict"}),
            {},
            r"holds the filters \['none', 'strict'\]; set logits.filter",
        ),
        (lambda ls: None, {"filter": "strict"}, "has no filter 'strict'"),
        (lambda ls: ls[1].update(filtered_resps=["B"]), {}, "only multiple-choice"),
        (lambda ls: ls[1].update(target="7"), {}, "target 7 is outside the item's 4 choices"),
        (lambda ls: ls[1].update(target="[0, 1]"), {}, "lists several gold choices"),
        (lambda ls: ls[1].update(target="nonsense"), {}, "neither a choice index nor"),
        (lambda ls: ls[1].update(filtered_resps=[["-inf", "False"]] * 4), {}, "is not finite"),
        (lambda ls: ls[1].pop("doc_id"), {}, "line 2 has no doc_id"),
    ],
)
def test_bad_logs_are_one_line_errors(tmp_path, edit, options, message):
    lls, gold = _mmlu(3, 4)
    lines = [sample(i, lls[i].tolist(), gold[i]) for i in range(3)]
    edit(lines)
    f = write_log(tmp_path / "s.jsonl", lines)
    with pytest.raises(ValueError, match=message) as exc:
        _read(f, **options)
    assert "\n" not in str(exc.value)


def test_not_json_and_empty(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text('{"doc_id": 0\n')
    with pytest.raises(ValueError, match="line 1 is not JSON"):
        _read(f)
    f.write_text("\n")
    with pytest.raises(ValueError, match="holds no samples"):
        _read(f)


def test_config_example_imports_its_log(tmp_path):
    """config/llm_mmlu.yaml: its model's entry imports a log written in the published format
    (its local_path pointed here), with the study split, through the default calibrators."""
    from calbench.study_config import complete

    cfg = yaml.safe_load((REPO / "config" / "llm_mmlu.yaml").read_text())
    default = yaml.safe_load((REPO / "config.yaml").read_text())
    assert "calibrators" not in cfg  # the default set, written once in config.yaml
    assert complete(dict(cfg), REPO)["calibrators"] == default["calibrators"]
    ((name, entry),) = cfg["models"].items()
    lg = entry["logits"]
    assert lg["format"] == "lm_eval" and lg["local_path"]
    lls, gold = _mmlu(40, 4)
    log = write_log(tmp_path / lg["file"], [sample(i, lls[i].tolist(), gold[i]) for i in range(40)])
    entry = {**entry, "logits": {**lg, "local_path": str(log)}}
    summary = import_logits(name, entry, tmp_path / "out.npz", resources=tmp_path / "res")
    d = load_logits(tmp_path / "out.npz")
    assert d["logits"].shape == (40, 4) and summary["format"] == "lm_eval"
    assert d["dataset"] == entry["dataset"] and "split" not in summary
