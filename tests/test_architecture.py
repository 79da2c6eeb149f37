"""docs/architecture.md's table of rules, verbs, library modules and outputs is the truth: every
rule, verb and CLI module is in it and agrees with the code; the layers import as documented."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from calbench._sources import module_file, verbs

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "workflow" / "rules"
CLI = REPO / "src" / "calbench" / "cli"
DOC = REPO / "docs" / "architecture.md"
TARGET_RULES = {"all", "replication"}  # rules that only name targets


def _table(heading: str) -> list[list[str]]:
    """Rows (cells, backticks stripped) of the first table after line ``heading``."""
    lines = DOC.read_text().splitlines()
    start = lines.index(heading)
    rows, seen = [], False
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            seen = True
            cells = [c.strip().replace("`", "") for c in line.strip("|").split("|")]
            if not set("".join(cells)) <= set("-: "):
                rows.append(cells)
        elif seen:
            break
    return rows[1:]  # without the header


def _constants() -> dict[str, list[str]]:
    """The ``NAME = [...]`` string-list constants of the rule files (e.g. REPLICATION_OUTPUTS)."""
    text = "\n".join(p.read_text() for p in sorted(RULES.rglob("*.smk")))
    out = {}
    for m in re.finditer(r"^([A-Z_]+) = (\[[^\]]*\])", text, re.M):
        try:
            out[m.group(1)] = ast.literal_eval(m.group(2))
        except ValueError:
            continue
    return out


def _rules() -> dict[str, dict]:
    consts = _constants()
    out = {}
    for smk in sorted(RULES.glob("*.smk")):
        text = smk.read_text()
        # `use rule base as name with:` inherits base's shell (its verb) and overrides outputs
        for m in re.finditer(
            r"^use rule (\w+) as (\w+) with:\n(.*?)(?=^rule |^use rule |\Z)", text, re.S | re.M
        ):
            base = re.search(
                rf"^rule {m.group(1)}:\n(.*?)(?=^rule |^use rule |\Z)", text, re.S | re.M
            )
            text += (
                f"\nrule {m.group(2)}:\n{m.group(3)}    shell:{base.group(1).split('shell:', 1)[1]}"
            )
        for m in re.finditer(
            r"^rule (\w+):\n(.*?)(?=^rule |^ruleorder|^use rule |^#|\Z)", text, re.S | re.M
        ):
            body = m.group(2)
            block = re.search(r"^    output:\n(.*?)(?=^    \w+:)", body, re.S | re.M)
            outputs = set()
            if block:
                outputs |= set(
                    re.findall(r'"((?:results|resources|reports)/[^"]+)"', block.group(1))
                )
                for name, i in re.findall(r"([A-Z_]+)\[(\d)\]", block.group(1)):
                    outputs.add(consts[name][int(i)])
            verb = re.search(r"calbench ([a-z][a-z-]+)", body.split("shell:", 1)[-1])
            out[m.group(1)] = {
                "stage": smk.stem,
                "verb": verb.group(1) if verb and "shell:" in body else None,
                "outputs": outputs,
            }
    return out


RULE_ROWS = {r[0]: r for r in _table("## One name across layers")}
HAND_ROWS = {r[0]: r for r in _table("Verbs without a rule, run by hand only:")}


def test_every_rule_is_in_the_table_and_every_row_is_a_rule():
    rules = {r for r in _rules() if r not in TARGET_RULES}
    assert rules == set(RULE_ROWS), (rules - set(RULE_ROWS), set(RULE_ROWS) - rules)


@pytest.mark.parametrize("rule", sorted(RULE_ROWS))
def test_a_rows_stage_verb_library_and_outputs_are_the_rules(rule):
    _, stage, verb, library, outputs = RULE_ROWS[rule]
    found = _rules()[rule]
    assert found["stage"] == stage, f"rule {rule} lives in {found['stage']}.smk, not {stage}.smk"
    assert found["verb"] == verb, f"rule {rule} runs calbench {found['verb']}, not {verb}"
    assert verb == rule.replace("_", "-") or rule.startswith(verb.replace("-", "_")), (
        f"rule {rule} and its verb {verb} should share a name"
    )
    assert verbs()[verb][0] == f"calbench.cli.{stage}", f"{verb} is not in calbench/cli/{stage}.py"
    for mod in library.split(", "):
        assert module_file(mod) is not None, f"{mod} is not a calbench module"
    listed = set(outputs.split(", "))
    assert found["outputs"] <= listed, f"rule {rule} writes {found['outputs'] - listed} too"


def test_every_verb_has_a_rule_or_is_documented_as_hand_only():
    with_rule = {row[2] for row in RULE_ROWS.values()}
    assert set(verbs()) == with_rule | set(HAND_ROWS), set(verbs()) ^ (with_rule | set(HAND_ROWS))
    for verb, (_, stage, library, _) in HAND_ROWS.items():
        assert verbs()[verb][0] == f"calbench.cli.{stage}"
        assert module_file(library) is not None


#: cli modules that are not a stage: the shared argument helpers
CLI_INFRASTRUCTURE = {"_args"}


def test_every_cli_module_is_a_stage():
    stages = {row[1] for row in RULE_ROWS.values()} | {row[1] for row in HAND_ROWS.values()}
    modules = {p.stem for p in CLI.glob("*.py")} - {"__init__"} - CLI_INFRASTRUCTURE
    assert modules == stages, modules ^ stages


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_verb_modules_import_only_the_library_and_the_shared_argument_helpers():
    for path in CLI.glob("*.py"):
        if path.stem == "__init__":  # the entry point
            continue
        other = {
            m for m in _imports(path) if m.startswith("calbench.cli") and m != "calbench.cli._args"
        }
        other = {m for m in other if not m.startswith("calbench.cli._args.")}
        assert not other, f"{path.name} imports {sorted(other)}: import the library instead"


def test_the_library_never_imports_the_cli_or_snakemake():
    for path in (REPO / "src" / "calbench").rglob("*.py"):
        if CLI in path.parents or path.name == "__main__.py":  # `python -m calbench`
            continue
        bad = {m for m in _imports(path) if m.startswith(("calbench.cli", "snakemake"))}
        assert not bad, f"{path.relative_to(REPO)} imports {sorted(bad)}"


def _function_level_calbench_imports():
    """(file, line number, (first line, last line)) of every import of a calbench module made inside a
    function of the library."""
    src = REPO / "src" / "calbench"
    for path in sorted(src.rglob("*.py")):
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                ours = (
                    isinstance(node, ast.ImportFrom)
                    and (node.level > 0 or (node.module or "").split(".")[0] == "calbench")
                ) or (
                    isinstance(node, ast.Import)
                    and any(a.name.split(".")[0] == "calbench" for a in node.names)
                )
                if ours:  # the comment sits on its first or last line
                    ends = (lines[node.lineno - 1], lines[node.end_lineno - 1])
                    yield path.relative_to(REPO), node.lineno, ends


def test_every_function_level_calbench_import_names_a_documented_reason():
    """docs/architecture.md, "Imports": a calbench module imported inside a function ends with
    ``# lazy: <reason>``, and the reason is one of the doc's list."""
    doc = DOC.read_text()
    section = doc[doc.index("Imports. "): doc.index("## Library layout")]
    reasons = set(re.findall(r"^- `([^`]+)`", section, flags=re.M))
    assert {"cli start-up", "code inputs"} <= reasons, reasons
    found = sorted(set(_function_level_calbench_imports()))  # nested functions: seen twice
    assert len(found) > 50  # the walk sees the library's function-level imports
    bad = []
    for path, lineno, ends in found:
        said = {m.group(1) for e in ends if (m := re.search(r"# lazy: (.+?)\s*$", e))}
        if not said or not said <= reasons:
            bad.append(f"{path}:{lineno}: {ends[0].strip()}")
    assert not bad, "function-level imports without a documented '# lazy: <reason>':\n" + "\n".join(bad)


def _calbench_module_names() -> dict[str, Path]:
    src = REPO / "src" / "calbench"
    out = {}
    for path in src.rglob("*.py"):
        parts = ["calbench", *path.relative_to(src).with_suffix("").parts]
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _import_graph() -> dict[str, set[str]]:
    """Module -> the calbench modules it imports, at the top or inside a function (``from a
    import b`` counts as ``a.b`` when that is a module; ``if TYPE_CHECKING:`` blocks do not
    count: they never run)."""
    mods = _calbench_module_names()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        skipped = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for stmt in node.body
            for n in ast.walk(stmt)
        }
        out = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for a in node.names:
                    out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base)
        graph[name] = {m for m in out if m in mods and m != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan 1972)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


#: the import cycles docs/architecture.md documents (function-level imports marked
#: ``# lazy: import cycle``); no other may appear
KNOWN_CYCLES = {
    frozenset({"calbench.losses", "calbench.losses.combined", "calbench.losses.interleaved"}),
    frozenset({"calbench.models.pretrained", "calbench.models.staging"}),
    frozenset({"calbench.report.overview", "calbench.report.views"}),
}


def test_no_import_cycles_among_calbench_modules_but_the_documented_ones():
    """Counting imports inside functions too: a lazy import hides a cycle from Python, not from
    the layering (calbench.plugins sits above calibrators/ and metrics/, which never import it)."""
    cycles = set(_cycles(_import_graph()))
    assert cycles <= KNOWN_CYCLES, [sorted(c) for c in cycles - KNOWN_CYCLES]


def test_the_registries_never_import_the_plugin_loader():
    graph = _import_graph()
    below = [m for m in graph if m.startswith(("calbench.calibrators", "calbench.metrics"))]
    assert below and not [m for m in below if "calbench.plugins" in graph[m]]
