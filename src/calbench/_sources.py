"""The calbench source files a CLI verb executes, found statically from the code itself.

The workflow gives every rule the library files its verb executes as inputs, so that editing a
module reruns exactly the jobs that run it (and their dependants). Kept by hand such lists drift;
:func:`verb_sources` derives them instead, by reading the code with :mod:`ast` (nothing is
imported or executed):

1. ``calbench <verb>`` starts by importing ``calbench.cli`` and every module of its
   ``_COMMAND_MODULES`` (their module-level imports run for every verb);
2. each CLI module's ``register`` maps a verb to its handler (``add_parser("verb")`` ...
   ``set_defaults(func=handler)``); the handler, the module-level functions and classes it
   references (transitively, also across CLI modules through ``from calbench.cli.x import f``)
   and the imports inside them are what the verb runs;
3. a library module counts with every ``calbench`` module it imports anywhere (module level or
   inside functions), and with the modules named in string constants such as the registries'
   ``"calbench.models.trained"`` or ``"calbench.data.cifar:CIFAR10"`` (imported with
   :mod:`importlib`); importing ``a.b.c`` also runs the packages ``a`` and ``a.b``.

Step 3 over-approximates (a module's function-level imports are counted even when the verb does
not call that function), so an edit may rerun a job that did not need it, never the reverse.
``tests/workflow/test_lib_sources.py`` checks the result against the modules a verb really
loads at run time.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PACKAGE = "calbench"
CLI = "calbench.cli"


def module_file(name: str) -> Path | None:
    """The file of module ``name`` (``calbench.a.b``), or ``None`` if it is not a calbench module."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = ROOT.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports_in(nodes, module: str, is_package: bool) -> set[str]:
    """calbench modules imported by the import statements and module-path strings in ``nodes``."""
    out: set[str] = set()
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(node, module, is_package)
                out.add(target)
                out.update(f"{target}.{a.name}" for a in node.names)  # submodules imported by name
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value.split(":", 1)[0]
                if text.startswith(PACKAGE + ".") and " " not in text:
                    out.add(text)
    return {m for m in out if module_file(m) is not None}


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


@functools.cache
def module_imports(name: str) -> frozenset[str]:
    """calbench modules that module ``name`` imports anywhere in its file (see module doc)."""
    path = module_file(name)
    tree = _tree(path)
    return frozenset(_imports_in(tree.body, name, path.name == "__init__.py"))


def closure(modules) -> set[str]:
    """``modules`` plus every calbench module they import, transitively, with their packages."""
    seen: set[str] = set()
    todo = [p for m in modules for p in _with_parents(m)]
    while todo:
        m = todo.pop()
        if m in seen or module_file(m) is None:
            continue
        seen.add(m)
        # a CLI module's functions run only for their own verb (see verb_modules)
        deps = _top_level_imports(m) if m.startswith(CLI + ".") else module_imports(m)
        for dep in deps:
            todo.extend(_with_parents(dep))
    return seen


# --- the CLI: which code runs for which verb --------------------------------------------------
def _cli_modules() -> list[str]:
    tree = _tree(module_file("calbench.cli"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_COMMAND_MODULES" for t in node.targets
        ):
            return [f"calbench.cli.{m}" for m in ast.literal_eval(node.value)]
    raise RuntimeError("calbench/cli/__init__.py defines no _COMMAND_MODULES")


def _top_level_imports(name: str) -> set[str]:
    path = module_file(name)
    body = [
        n for n in _tree(path).body if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    return _imports_in(body, name, path.name == "__init__.py")


def _handlers(name: str) -> dict[str, str]:
    """``{verb: handler function name}`` from ``register`` of CLI module ``name``."""
    out: dict[str, str] = {}
    for fn in _tree(module_file(name)).body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name == "register"):
            continue
        verb = None
        calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
        calls.sort(key=lambda c: (c.lineno, c.col_offset))
        for call in calls:
            attr = call.func.attr if isinstance(call.func, ast.Attribute) else None
            if attr == "add_parser" and call.args and isinstance(call.args[0], ast.Constant):
                verb = call.args[0].value
            elif attr == "set_defaults" and verb:
                for kw in call.keywords:
                    if kw.arg == "func" and isinstance(kw.value, ast.Name):
                        out[verb] = kw.value.id
    return out


def _definitions(name: str) -> dict[str, ast.AST]:
    return {
        n.name: n
        for n in _tree(module_file(name)).body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }


def _from_imports(name: str) -> dict[str, str]:
    """Module-level ``from calbench.x import f`` of CLI module ``name``: ``{f: calbench.x}``."""
    out = {}
    for node in _tree(module_file(name)).body:
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith(PACKAGE):
            for a in node.names:
                out[a.asname or a.name] = node.module
    return out


def _reachable_imports(module: str, function: str) -> set[str]:
    """Modules imported inside ``function`` of ``module`` and inside every module-level
    function/class it references, following references into other CLI modules."""
    out: set[str] = set()
    seen: set[tuple[str, str]] = set()
    todo = [(module, function)]
    while todo:
        mod, fn = todo.pop()
        if (mod, fn) in seen:
            continue
        seen.add((mod, fn))
        defs = _definitions(mod)
        if fn not in defs:
            continue
        node = defs[fn]
        path = module_file(mod)
        out |= _imports_in([node], mod, path.name == "__init__.py")
        imported = _from_imports(mod)
        for ref in {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}:
            if ref in defs:
                todo.append((mod, ref))
            elif ref in imported and imported[ref].startswith("calbench.cli"):
                todo.append((imported[ref], ref))
    return out


def verbs() -> dict[str, tuple[str, str]]:
    """``{verb: (CLI module, handler)}`` of every verb of the ``calbench`` command."""
    out = {}
    for mod in _cli_modules():
        for verb, handler in _handlers(mod).items():
            out[verb] = (mod, handler)
    return out


def verb_modules(verb: str) -> set[str]:
    """calbench modules ``calbench <verb>`` executes (see module docstring)."""
    table = verbs()
    if verb not in table:
        raise ValueError(f"calbench has no verb {verb!r}; verbs: {sorted(table)}")
    startup = {"calbench.cli", *_cli_modules()}
    for m in list(startup):
        startup |= _top_level_imports(m)
    mod, handler = table[verb]
    return closure(startup | _reachable_imports(mod, handler))


def verb_sources(verb: str) -> list[str]:
    """Absolute paths of the calbench files ``calbench <verb>`` executes, sorted."""
    return sorted({str(module_file(m)) for m in verb_modules(verb)})
