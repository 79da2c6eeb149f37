"""The library files each workflow rule lists as inputs (``lib_sources`` in common.smk) are
derived from the code (calbench._sources); these tests check the derivation against what a verb
really loads when it runs, and that every rule names its own verb."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from calbench import _sources
from calbench._sources import all_verb_sources, verb_modules, verb_sources, verbs

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "workflow" / "rules"

_PROBE = (
    "import json, sys\n"
    "from calbench.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "mods = sorted(m for m in sys.modules if m == 'calbench' or m.startswith('calbench.'))\n"
    "print('MODULES ' + json.dumps([rc, mods]))\n"
)


def loaded_modules(*argv) -> set[str]:
    """calbench modules in sys.modules after ``calbench <argv>`` ran in a fresh interpreter."""
    res = subprocess.run(
        [sys.executable, "-c", _PROBE, *map(str, argv)], capture_output=True, text=True, timeout=600
    )
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("MODULES ")]
    assert line, res.stderr[-3000:]
    rc, mods = json.loads(line[-1][len("MODULES ") :])
    assert rc == 0, res.stderr[-3000:]
    return set(mods)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from calbench.cli import main
    from calbench.logits import save_logits
    from calbench.split import save_split, study_split

    d = tmp_path_factory.mktemp("src")
    rng = np.random.default_rng(0)
    z = (rng.normal(size=(200, 4)) * 3).astype(np.float32)
    y = np.argmax(z / 2 + rng.gumbel(size=z.shape), axis=1)  # informative, not separable
    save_logits(d / "m.npz", z, y, order_hash="o", model="m", dataset="d")
    val, test = study_split(200)
    save_split(d / "split.npz", val, test)
    for name in ("uncalibrated", "ts"):  # fitted as the verb fits them (records fitted_on)
        assert main([str(a) for a in _fit_args(d, name, d / f"{name}.json")]) == 0
    return d


def _fit_args(d, method, out):
    return [
        "fit-calibrator",
        "--logits",
        d / "m.npz",
        "--split",
        d / "split.npz",
        "--method",
        method,
        "--out",
        out,
    ]


def test_fit_calibrator_lists_the_scaling_fits_torch_helper_and_the_logits_reader():
    # the two drifted cases of the hand-kept lists
    fit = verb_modules("fit-calibrator")
    assert "calbench._torch" in fit and "calbench.logits" in fit
    for verb in ("split", "fit-calibrator", "evaluate", "compare", "plot-reliability"):
        assert "calbench.logits" in verb_modules(verb), verb
    assert all(Path(p).is_file() for p in verb_sources("evaluate"))
    # a verb's list is its own: split runs no calibrator, fitting and comparing draw nothing,
    # evaluate draws its calibrator's diagram (--plot)
    assert not any(m.startswith("calbench.calibrators") for m in verb_modules("split"))
    assert "calbench.plots" not in verb_modules("fit-calibrator") | verb_modules("compare")
    assert "calbench.plots" in verb_modules("evaluate")
    assert "calbench.training" in verb_modules("train-model")
    assert "calbench.training" not in verb_modules("cache-logits") | verb_modules("evaluate")


@pytest.mark.parametrize("method", ["ts", "hist", "dirichlet"])
def test_static_sources_cover_what_fit_calibrator_loads(study, tmp_path, method):
    loaded = loaded_modules(*_fit_args(study, method, tmp_path / "c.json"))
    assert loaded <= verb_modules("fit-calibrator"), loaded - verb_modules("fit-calibrator")


@pytest.mark.slow
@pytest.mark.parametrize(
    "verb, args",
    [
        ("split", lambda d, t: ["--logits", d / "m.npz", "--out", t / "s.npz"]),
        (
            "evaluate",
            lambda d, t: [
                "--logits",
                d / "m.npz",
                "--split",
                d / "split.npz",
                "--calibrator",
                d / "ts.json",
                "--n-bootstrap",
                "5",
                "--plot",
                t / "e.png",
                "--out",
                t / "e.csv",
            ],
        ),
        (
            "compare",
            lambda d, t: [
                "--logits",
                d / "m.npz",
                "--split",
                d / "split.npz",
                "--calibrators",
                d / "ts.json",
                d / "uncalibrated.json",
                "--n-bootstrap",
                "5",
                "--out",
                t / "c.csv",
            ],
        ),
        (
            "plot-reliability",
            lambda d, t: [
                "--logits",
                d / "m.npz",
                "--split",
                d / "split.npz",
                "--calibrator",
                d / "ts.json",
                d / "uncalibrated.json",
                "--grid",
                "--out",
                t / "g.png",
            ],
        ),
        ("reference-csv", lambda d, t: ["--out", t / "r.csv"]),
    ],
)
def test_static_sources_cover_what_a_verb_loads(study, tmp_path, verb, args):
    loaded = loaded_modules(verb, *args(study, tmp_path))
    assert loaded <= verb_modules(verb), loaded - verb_modules(verb)


@pytest.mark.slow
@pytest.mark.parametrize(
    "method", ["uncalibrated", "vs", "vs_b", "ms_b", "ts_sbece", "iso", "bbq"]
)
def test_static_sources_cover_every_calibrator_fit(study, tmp_path, method):
    loaded = loaded_modules(*_fit_args(study, method, tmp_path / "c.json"))
    assert loaded <= verb_modules("fit-calibrator")


def _rule_blocks():
    for smk in sorted(RULES.glob("*.smk")):
        text = smk.read_text()
        # named rules, and rules made in a loop (``rule:`` with a ``name:``, the batches)
        for m in re.finditer(r"^\s*rule(?: (\w+))?:\n(.*?)(?=^\s*rule[ :]|\Z)", text, re.S | re.M):
            name = m.group(1) or re.search(r"name:\s*f?\"([^\"]+)\"", m.group(2)).group(1)
            yield smk.name, name, m.group(2)


def test_every_rule_lists_the_sources_of_its_own_verb():
    checked = 0
    for smk, rule, body in _rule_blocks():
        shell = (
            re.search(r"calbench ([a-z][a-z-]+)", body.split("shell:", 1)[-1])
            if "shell:" in body
            else None
        )
        lib = re.findall(r'lib_sources\("([\w-]+)"\)', body)
        if shell is None:
            assert not lib, f"{smk}:{rule} lists library sources but runs no calbench verb"
            continue
        verb = shell.group(1)
        assert verb in verbs(), f"{smk}:{rule} runs unknown verb {verb}"
        assert lib, f"{smk}:{rule} runs calbench {verb} but has no lib=lib_sources(...) input"
        assert lib == [verb], (
            f"{smk}:{rule} lists {lib} for verb {verb}"
        )
        checked += 1
    assert checked >= 12


def test_the_cached_sources_equal_the_derived_ones_and_go_stale_on_an_edit(tmp_path, monkeypatch):
    """The workflow reads lib_sources from a cache keyed by every library file's path, mtime
    and size: the cache gives what the derivation gives, and any change of a file recomputes."""
    cache = tmp_path / "sources.json"
    first = all_verb_sources(cache=cache)
    assert first == {v: verb_sources(v) for v in verbs()}
    assert json.loads(cache.read_text())["sources"] == first

    calls = []
    real = _sources.verb_sources
    monkeypatch.setattr(_sources, "verb_sources", lambda v: calls.append(v) or real(v))
    assert all_verb_sources(cache=cache) == first and calls == []  # read from the cache

    stored = json.loads(cache.read_text())
    stored["sources"]["evaluate"] = ["/stale"]
    stored["fingerprint"][0][1] += 1  # as if a library file had been edited
    cache.write_text(json.dumps(stored))
    assert all_verb_sources(cache=cache) == first and len(calls) == len(verbs())

    cache.write_text("{not json")  # a corrupt cache is recomputed, not trusted
    assert all_verb_sources(cache=cache) == first
    assert json.loads(cache.read_text())["sources"] == first


def test_code_manifest_lists_each_file_digest_relative_to_the_package(tmp_path):
    """results/code/<verb>.sha256: `sha256sum` lines of the verb's library files, paths relative
    to the package's parent (the same text wherever calbench is installed)."""
    import hashlib

    from calbench._sources import ROOT, code_manifest_text

    files = verb_sources("split")
    text = code_manifest_text(files)
    lines = text.splitlines()
    assert len(lines) == len(files) and text.endswith("\n")
    for line, path in zip(lines, sorted(files), strict=True):
        digest, rel = line.split("  ")
        assert rel == Path(path).relative_to(ROOT.parent).as_posix() and rel.startswith("calbench/")
        assert digest == hashlib.sha256(Path(path).read_bytes()).hexdigest()
    assert code_manifest_text(list(reversed(files))) == text  # order-independent
