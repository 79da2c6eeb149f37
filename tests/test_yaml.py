"""calbench's one YAML loader (calbench._yaml, issue 33 group 8): duplicate keys, YAML 1.1
booleans as keys and alias bombs are one-line errors naming the line; everything else loads as
PyYAML's safe_load does."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from calbench._yaml import MAX_NODES, load_yaml, load_yaml_file

REPO = Path(__file__).resolve().parents[1]


def _one_line(exc) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg


@pytest.mark.parametrize(
    "text, words",
    [
        ("a: 1\nb: 2\na: 3\n", "c.yaml line 3: duplicate key 'a' (first at line 1); keep one of them"),
        ("evaluation:\n  n_bootstrap: 10\n  seed: 0\n  n_bootstrap: 20\n", "line 4: duplicate key 'n_bootstrap' (first at line 2)"),
        ("calibrators:\n  ts: {}\n  iso: {}\n  ts: {display: T}\n", "line 4: duplicate key 'ts'"),
        ("x: {a: 1, a: 2}\n", "line 1: duplicate key 'a'"),
        ("on: push\n", "line 1: the key 'on' reads as the boolean True in YAML 1.1, not as a word; quote the key 'on'"),
        ("m:\n  Off: 1\n", "line 2: the key 'Off' reads as the boolean False"),
        ("x: [1, 2\n", "c.yaml line 2: "),  # the parser's own words follow (libyaml's or PyYAML's)
        ("x: !!python/object/apply:os.system [ls]\n", "could not determine a constructor"),
        ("a: &a [*a]\n", "line 1: an alias refers to a node that contains it (a cycle)"),
    ],
)  # fmt: skip
def test_bad_yaml_is_one_line_naming_the_line(text, words):
    with pytest.raises(ValueError) as exc:
        load_yaml(text, "c.yaml")
    assert words in _one_line(exc)


def test_alias_bomb_fails_fast():
    bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 9):
        bomb += f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]\n"
    start = time.perf_counter()
    with pytest.raises(ValueError) as exc:
        load_yaml(bomb, "bomb.yaml")
    assert time.perf_counter() - start < 0.5
    assert f"expands to more than {MAX_NODES:,} values" in _one_line(exc)
    # the same anchors used a few times are fine: what counts is the expanded size
    small = "a: &a [1, 2]\nb: *a\nc: [*a, *a]\n"
    assert load_yaml(small) == yaml.safe_load(small)


@pytest.mark.parametrize(
    "text",
    [
        "'on': 1\n\"yes\": 2\n",
        "base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n",  # merge keys may be overridden
        "a: [1, 2.5, null, true, '1e9', 2026-01-02]\n",
        "",
    ],
)
def test_valid_yaml_loads_as_safe_load_does(text):
    assert load_yaml(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    "path", sorted((REPO / "config").glob("*.yaml")) + [REPO / "config.yaml"], ids=lambda p: p.name
)
def test_shipped_configs_load_unchanged(path):
    assert load_yaml_file(path) == yaml.safe_load(path.read_text())


def test_registry_and_yaml_spec_use_the_loader(tmp_path):
    from calbench.models import parse_spec
    from calbench.models.entries import load_registry

    reg = tmp_path / "reg.yaml"
    reg.write_text("models:\n  a: {dataset: cifar10, source: train}\n  a: {dataset: cifar10, source: train}\n")
    with pytest.raises(ValueError, match=r"reg.yaml line 3: duplicate key 'a'"):
        load_registry(reg)
    spec = tmp_path / "spec.yaml"
    spec.write_text("arch: mlp\narch: cnn\n")
    with pytest.raises(ValueError, match=r"spec.yaml line 2: duplicate key 'arch'"):
        parse_spec(f"@{spec}")
