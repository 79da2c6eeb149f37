"""A config file is data: no value in it runs as shell code (issue 33, group 1).

Every string of a config that the schema and :func:`calbench.config_check.check_config` accept
is set to a value holding ``$(...)``, backticks, ``;``, quotes and a newline (plus the keys that
reach the shell as paths: ``mirrors``, ``datasets.<slug>.root`` / ``mirrors``,
``report.reference.csv``); the dry run's shell commands (``snakemake -n -p``) are then executed
with a stand-in ``calbench`` that records its arguments. No marker file may appear, and the
paths must reach the verb as one argument each, byte for byte.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from calbench.config_check import check_config

REPO = Path(__file__).resolve().parents[2]
SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
pytestmark = [pytest.mark.slow]

if shutil.which("snakemake") is None:  # pragma: no cover
    pytest.skip("snakemake is not installed (pip install -e .[workflow])", allow_module_level=True)

#: Shell metacharacters of every kind; each would create a PWNED* file if it ran.
EVIL = "x$(touch PWNED1)`touch PWNED2`;touch PWNED3\ntouch PWNED4 'q' \"d\" \\ & z"
#: The same without '$' and line breaks, which labels refuse (config_check): for those keys.
EVIL_LABEL = "x`touch PWNED5`;touch PWNED6 'q' \"d\" \\ & z|touch PWNED7"


VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def _schema_ok(cfg: dict) -> bool:
    return VALIDATOR.is_valid(cfg)


def _string_paths(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _string_paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _string_paths(v, (*path, i))
    elif isinstance(node, str):
        yield path


def _set(cfg, path, value):
    for k in path[:-1]:
        cfg = cfg[k]
    cfg[path[-1]] = value


def evil_config(name: str) -> tuple[dict, list[str]]:
    """``config/<name>`` with every string the checks accept made evil; the keys changed."""
    original = yaml.safe_load((REPO / "config" / name).read_text())
    cfg = copy.deepcopy(original)
    cfg["mirrors"] = [EVIL + "m"]
    first = next(iter(cfg["datasets"]))
    cfg["datasets"][first]["root"] = EVIL + "r"
    cfg["datasets"][first]["mirrors"] = [EVIL + "d"]
    cfg["report"] = {**(cfg.get("report") or {}), "reference": {"csv": EVIL + "c.csv"}}
    changed = {}
    for path in list(_string_paths(original)):
        trial = copy.deepcopy(cfg)
        _set(trial, path, EVIL + str(path[-1]))
        if _schema_ok(trial):
            cfg = trial
            changed[".".join(map(str, path))] = path
    # the library's checks refuse some values (a logits file name, a git ref): keep those as
    # they were, key by key as the problems name them
    problems = check_config(cfg)
    second = True
    while problems:
        keys = {p.split(":", 1)[0] for p in problems}
        drop = [k for k in changed if any(k.startswith(key) for key in keys)]
        assert drop, problems
        for k in drop:
            path = changed.pop(k)
            value = original
            for part in path:
                value = value[part]
            if second:  # one more try with the label-safe value, its own for each key (two
                # entries displayed alike are refused: calbench.config_check)
                value = EVIL_LABEL + "_".join(map(str, path))
                changed[k] = path
            _set(cfg, path, value)
        second = False
        problems = check_config(cfg)
    assert _schema_ok(cfg)
    fixed = ["mirrors", f"datasets.{first}.root", f"datasets.{first}.mirrors", "report.reference.csv"]
    return cfg, fixed + list(changed)


FAKE = """#!{python}
import json, os, sys
with open(os.environ["ARGV_LOG"], "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
"""


def _commands(text: str) -> list[tuple[str, str]]:
    """``(rule, shell command)`` of every job of a dry run's ``-p`` output."""
    out = []
    for block in re.split(r"\n(?=\[\w{3} \w{3} +\d+ [\d:]+ \d{4}\]\n)", text):
        rule = re.search(r"^(?:local)?rule (\w+):", block, re.M)
        m = re.search(r"^Shell command: (.*)", block, re.M | re.S)
        if rule and m and not m.group(1).startswith("None"):
            cmd = re.split(r"\n\nJob stats:|\nJob stats:", m.group(1))[0]
            out.append((rule.group(1), cmd.rstrip("\n")))
    return out


@pytest.mark.parametrize("name", ["test_shift.yaml", "guo_kull_logits.yaml"])
def test_config_values_never_run_as_shell_code(tmp_path, name):
    cfg, changed = evil_config(name)
    assert len(changed) >= 8, changed
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
    (run / (EVIL + "c.csv")).write_text("dataset,model,method,metric,value\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "calbench"
    fake.write_text(FAKE.format(python=sys.executable))
    fake.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    res = subprocess.run(
        ["snakemake", "-s", str(REPO / "Snakefile"), "-n", "-p", "--cores", "1",
         "--configfile", "config.yaml"],
        cwd=run, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    text = res.stdout + res.stderr
    assert res.returncode == 0, text[-3000:]
    commands = _commands(text)
    rules = {r for r, _ in commands}
    assert len(commands) >= 5 and len(rules) >= 5, rules
    log = tmp_path / "argv.jsonl"
    for rule, cmd in commands:
        m = re.search(r"> (\S+) 2>&1$", cmd)
        if m:
            (run / m.group(1)).parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["bash", "-c", cmd], cwd=run, capture_output=True, text=True, timeout=60,
            env={**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}", "ARGV_LOG": str(log)},
        )  # fmt: skip
        assert done.returncode == 0, (rule, cmd, done.stderr)
    assert not list(tmp_path.rglob("PWNED*")), "a config value ran as shell code"
    argv = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(argv) == len(commands)
    words = {a for args in argv for a in args}
    if name == "test_shift.yaml":  # the keys that reach the verbs as paths, byte for byte
        for value in (EVIL + "r", EVIL + "m", EVIL + "d", EVIL + "c.csv"):
            assert value in words, value
