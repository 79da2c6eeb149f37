"""How many more workflow rules an edit would rerun if a verb's code inputs were whole modules
(a verb's code = the modules it imports, transitively, every import of a module counted wherever
it sits) instead of the functions it runs (calbench._sources, today).

Two figures (docs/workflow.md, "Freshness"):

* per module of the library: how many of the workflow's rules (those with a ``lib_sources``
  input) list it among their code inputs, per function and per module;
* over the last ``--commits`` commits of ``git log``: for each commit, the rules whose code
  inputs hold a file the commit changed, per function and per module, summed.

The per-module variant starts from the same CLI units as today (the start-up and the verb's
handler), then counts every calbench module reached whole. Usage::

    PYTHONPATH=src python perf/code_inputs_granularity.py [--commits 100]
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
from pathlib import Path

from calbench import _sources as s

REPO = Path(__file__).resolve().parents[1]


def workflow_verbs() -> list[str]:
    """The verbs of the workflow's rules (one rule per ``lib_sources("verb")``)."""
    out = []
    for smk in sorted((REPO / "workflow" / "rules").rglob("*.smk")):
        out += re.findall(r'lib_sources\("([\w-]+)"\)', smk.read_text())
    return sorted(set(out))


def module_imports(module: str) -> set[str]:
    """calbench modules ``module`` imports anywhere (top level or in a function), with the
    packages above them, and modules named in its string constants."""
    out: set[str] = set()
    tree = s._tree(s.module_file(module))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for mod, _ in s._import_aliases([node], module).values():
                out |= set(s._with_parents(mod))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.split(":", 1)[0]
            if text.startswith(s.PACKAGE + ".") and " " not in text and s.module_file(text):
                out |= set(s._with_parents(text))
    return out


def per_module_files(verb: str) -> set[str]:
    todo = list(s.verb_modules(verb) - {s.CLI} - set(s._cli_modules()))
    # the CLI modules themselves: as today (start-up plus this verb's handler)
    seen = set(s.verb_modules(verb)) & ({s.CLI} | set(s._cli_modules()))
    library = set()
    while todo:
        m = todo.pop()
        if m in library:
            continue
        library.add(m)
        todo += [t for t in module_imports(m) if t not in library and not t.startswith(s.CLI)]
    return {str(s.module_file(m).relative_to(s.ROOT.parent)) for m in seen | library}


def per_function_files(verb: str) -> set[str]:
    return {str(Path(p).relative_to(s.ROOT.parent)) for p in s.verb_sources(verb)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=100)
    args = ap.parse_args()
    verbs = workflow_verbs()
    fn = {v: per_function_files(v) for v in verbs}
    mod = {v: per_module_files(v) for v in verbs}
    files = sorted({str(p.relative_to(s.ROOT.parent)) for p in s.ROOT.rglob("*.py")})
    rows = []
    for f in files:
        a = sum(f in fn[v] for v in verbs)
        b = sum(f in mod[v] for v in verbs)
        rows.append((b - a, f, a, b))
    total_a = sum(r[2] for r in rows)
    total_b = sum(r[3] for r in rows)
    print(f"{len(verbs)} workflow rules with code inputs; {len(files)} library files")
    print(
        f"mean rules rerun by an edit of one file: per function {total_a / len(files):.2f}, "
        f"per module {total_b / len(files):.2f}"
    )
    unchanged = sum(r[0] == 0 for r in rows)
    print(f"files whose edit reruns the same rules either way: {unchanged} of {len(files)}")
    print("largest differences (file: per function -> per module):")
    for _d, f, a, b in sorted(rows, reverse=True)[:12]:
        print(f"  {f}: {a} -> {b}")
    log = subprocess.run(
        ["git", "log", f"-{args.commits}", "--name-only", "--format=@@%h"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    commits = [c.split("\n") for c in log.split("@@")[1:]]
    sa = sb = touched = 0
    for c in commits:
        changed = {
            p[len("src/") :] for p in c[1:] if p.startswith("src/calbench/") and p.endswith(".py")
        }
        if not changed:
            continue
        touched += 1
        sa += sum(bool(changed & fn[v]) for v in verbs)
        sb += sum(bool(changed & mod[v]) for v in verbs)
    print(
        f"last {len(commits)} commits, {touched} editing the library: rules rerun per function "
        f"{sa}, per module {sb} ({sb - sa:+d}, {100 * (sb - sa) / max(sa, 1):+.0f}%)"
    )


if __name__ == "__main__":
    main()
