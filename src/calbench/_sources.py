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
3. in the library too the unit is the function: a module's import-time code (its top-level
   statements and imports, decorators, class bodies) runs whenever the module is imported, a
   function only when something the verb runs refers to it, and the imports inside a function
   count only then. Modules named in string constants such as the registries'
   ``"calbench.models.trained"`` or ``"calbench.data.cifar:CIFAR10"`` (imported with
   :mod:`importlib`) count whole; importing ``a.b.c`` also runs the packages ``a`` and ``a.b``.

So an import moved from a function to the top of its module adds its target to every verb that
imports the module; that is why some calbench imports stay inside functions (``# lazy: code
inputs``, docs/architecture.md). The analysis over-approximates (a referenced function counts
even on a path the verb never takes), so an edit may rerun a job that did not need it, never
the reverse. ``tests/workflow/test_lib_sources.py`` checks the result against the modules a verb really
loads at run time.
"""

from __future__ import annotations

import ast
import functools
import json
import os
from pathlib import Path

from calbench.io import file_digest

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


def _is_package(name: str) -> bool:
    return module_file(name).name == "__init__.py"


def _resolve_from(node: ast.ImportFrom, module: str) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if _is_package(module) else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


# --- the code units of a module -----------------------------------------------------------
# A unit is (module, name): a top-level function or class ``name``, or ``""`` for the code that
# runs when the module is imported (imports, assignments, decorators, and, as a simplification,
# every class body with its methods: classes are mostly used through registries). ``"*"`` means
# every unit of the module (a module imported by a string, used as a value, ...).
@functools.cache
def _defs(module: str) -> dict[str, ast.AST]:
    return {
        n.name: n
        for n in _tree(module_file(module)).body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }


def _import_aliases(nodes, module: str) -> dict[str, tuple[str, str | None]]:
    """``{local name: (module, attribute or None)}`` bound by the import statements in
    ``nodes`` (calbench modules only)."""
    out: dict[str, tuple[str, str | None]] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if module_file(a.name) is None:
                    continue
                if a.asname:
                    out[a.asname] = (a.name, None)
                else:
                    out[a.name.split(".")[0]] = (a.name.split(".")[0], None)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve_from(node, module)
            if module_file(target) is None:
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                out[a.asname or a.name] = (sub, None) if module_file(sub) else (target, a.name)
    return out


@functools.cache
def _module_aliases(module: str) -> dict[str, tuple[str, str | None]]:
    return _import_aliases(_tree(module_file(module)).body, module)


def _resolve_attr(module: str, name: str, depth: int = 0) -> set[tuple[str, str]]:
    """Units that ``module.name`` denotes (following re-exports)."""
    sub = f"{module}.{name}"
    if module_file(sub):
        return {(sub, "")}
    if name in _defs(module):
        return {(module, name)}
    alias = _module_aliases(module).get(name)
    if alias and depth < 10:
        target, attr = alias
        return {(module, "")} | (_resolve_attr(target, attr, depth + 1) if attr else {(target, "")})
    return {(module, "")}  # a module-level variable: its initialisation runs on import


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _references(nodes, module: str, aliases: dict) -> set[tuple[str, str]]:
    """Units referenced by the code in ``nodes`` (names, attribute chains, module strings)."""
    out: set[tuple[str, str]] = set()
    defs = _defs(module)
    attribute_bases: set[int] = set()
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Attribute):
                chain = _dotted(node)
                if not chain or chain[0] not in aliases:
                    continue
                base_mod, attr = aliases[chain[0]]
                if attr is not None:
                    continue
                attribute_bases.add(id(node.value) if isinstance(node.value, ast.Name) else -1)
                mod, rest = base_mod, chain[1:]
                while rest and module_file(f"{mod}.{rest[0]}"):
                    mod, rest = f"{mod}.{rest[0]}", rest[1:]
                out |= _resolve_attr(mod, rest[0]) if rest else {(mod, "*")}
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value.split(":", 1)[0]
                if text.startswith(PACKAGE + ".") and " " not in text and module_file(text):
                    out.add((text, "*"))
            elif isinstance(node, ast.Import | ast.ImportFrom):
                out |= {(mod, "") for mod, _ in _import_aliases([node], module).values()}
    for top in nodes:
        for node in ast.walk(top):
            if not isinstance(node, ast.Name):
                continue
            if node.id in defs:
                out.add((module, node.id))
            elif node.id in aliases:
                mod, attr = aliases[node.id]
                if attr is not None:
                    out |= _resolve_attr(mod, attr)
                elif id(node) not in attribute_bases:
                    out.add((mod, "*"))  # a module used as a value
    return out


def _body_nodes(module: str) -> list[ast.AST]:
    """What runs on import: every statement except function bodies (decorators, defaults and
    annotations of functions do run; class bodies are kept whole, see above)."""
    out: list[ast.AST] = []
    for n in _tree(module_file(module)).body:
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            out += n.decorator_list + n.args.defaults + [d for d in n.args.kw_defaults if d]
        else:
            out.append(n)
    return out


@functools.cache
def _unit_deps(module: str, name: str) -> frozenset[tuple[str, str]]:
    deps = {(m, "") for m in _with_parents(module)}
    if name == "*":
        deps |= {(module, n) for n in _defs(module)}
        return frozenset(deps)
    if name == "":
        deps |= _references(_body_nodes(module), module, _module_aliases(module))
        deps |= {(module, n) for n, d in _defs(module).items() if isinstance(d, ast.ClassDef)}
        return frozenset(deps)
    node = _defs(module)[name]
    nested = [n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)]
    aliases = {**_module_aliases(module), **_import_aliases(nested, module)}
    deps |= _references([node], module, aliases)
    return frozenset(deps)


def closure(units, skip=frozenset()) -> set[tuple[str, str]]:
    """``units`` plus every unit they reach, transitively (``skip``: units not to follow)."""
    seen: set[tuple[str, str]] = set()
    todo = list(units)
    while todo:
        u = todo.pop()
        if u in seen or u in skip or module_file(u[0]) is None:
            continue
        if u[1] not in ("", "*") and u[1] not in _defs(u[0]):
            u = (u[0], "")
            if u in seen:
                continue
        seen.add(u)
        todo.extend(_unit_deps(*u))
    return seen


# --- the CLI: which code runs for which verb --------------------------------------------------
def _cli_modules() -> list[str]:
    tree = _tree(module_file(CLI))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_COMMAND_MODULES" for t in node.targets
        ):
            return [f"{CLI}.{m}" for m in ast.literal_eval(node.value)]
    raise RuntimeError("calbench/cli/__init__.py defines no _COMMAND_MODULES")


def _handlers(name: str) -> dict[str, str]:
    """``{verb: handler function name}`` from ``register`` of CLI module ``name``."""
    out: dict[str, str] = {}
    fn = _defs(name).get("register")
    if fn is None:
        return out
    verb = None
    calls = sorted(
        (n for n in ast.walk(fn) if isinstance(n, ast.Call)), key=lambda c: (c.lineno, c.col_offset)
    )
    for call in calls:
        attr = call.func.attr if isinstance(call.func, ast.Attribute) else None
        if attr == "add_parser" and call.args and isinstance(call.args[0], ast.Constant):
            verb = call.args[0].value
        elif attr == "set_defaults" and verb:
            for kw in call.keywords:
                if kw.arg == "func" and isinstance(kw.value, ast.Name):
                    out[verb] = kw.value.id
    return out


def verbs() -> dict[str, tuple[str, str]]:
    """``{verb: (CLI module, handler)}`` of every verb of the ``calbench`` command."""
    out = {}
    for mod in _cli_modules():
        for verb, handler in _handlers(mod).items():
            out[verb] = (mod, handler)
    return out


def verb_units(verb: str) -> set[tuple[str, str]]:
    """Code units ``calbench <verb>`` executes: the start-up (``calbench.cli.main`` builds the
    parser: every CLI module is imported and its ``register`` runs) and the verb's handler."""
    table = verbs()
    if verb not in table:
        raise ValueError(f"calbench has no verb {verb!r}; verbs: {sorted(table)}")
    handlers = {(m, h) for m, h in table.values()}
    start = {(CLI, ""), (CLI, "main"), (CLI, "build_parser")}
    for m in _cli_modules():
        start |= {(m, ""), (m, "register")}
    mod, handler = table[verb]
    # other verbs' handlers are only named by register (set_defaults), never run
    return closure(start | {(mod, handler)}, skip=frozenset(handlers - {(mod, handler)}))


def verb_modules(verb: str) -> set[str]:
    """calbench modules (files) ``calbench <verb>`` executes code of (see module docstring)."""
    return {m for m, _ in verb_units(verb)}


def verb_sources(verb: str) -> list[str]:
    """Absolute paths of the calbench files ``calbench <verb>`` executes, sorted."""
    return sorted({str(module_file(m)) for m in verb_modules(verb)})


# --- a cache for the workflow's start-up --------------------------------------------------------
def _fingerprint() -> list[list]:
    """(relative path, mtime_ns, size) of every calbench source file: any edit changes it."""
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        st = path.stat()
        out.append([str(path.relative_to(ROOT)), st.st_mtime_ns, st.st_size])
    return out


def all_verb_sources(cache=None) -> dict[str, list[str]]:
    """``{verb: verb_sources(verb)}`` for every verb.

    Reading the code takes ~0.5 s, paid by every ``snakemake`` invocation (a no-op rerun
    included). With ``cache`` (a JSON file path) the result is stored there with the
    fingerprint of every calbench source file (path, mtime, size) and reused while the
    fingerprint is unchanged; a missing, unreadable or stale cache is recomputed and rewritten.
    """
    fingerprint = _fingerprint() if cache else None
    if cache:
        try:
            with open(cache) as fh:
                stored = json.load(fh)
            if stored.get("fingerprint") == fingerprint and stored.get("root") == str(ROOT):
                return stored["sources"]
        except (OSError, ValueError, AttributeError, KeyError):
            pass
    sources = {verb: verb_sources(verb) for verb in verbs()}
    if cache:
        text = json.dumps({"root": str(ROOT), "fingerprint": fingerprint, "sources": sources})
        cache = Path(cache)
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
            tmp.write_text(text)
            tmp.replace(cache)
        except OSError:
            pass  # a read-only working directory: compute again next time
    return sources


def code_manifest_text(paths) -> str:
    """``sha256  path`` lines (``sha256sum`` format, paths relative to the calbench package's
    parent folder, sorted; a plug-in's file outside it: ``plugin:<folder>/<file>``) of the library
    files ``paths``: the code manifest of a verb, its rules' input.
    The text depends on the files' content only, not on where calbench is installed."""
    lines = []
    for p in sorted(str(p) for p in paths):
        path = Path(p)
        st = path.stat()
        try:
            rel = path.resolve().relative_to(ROOT.parent).as_posix()
        except ValueError:  # a plug-in's file (calbench.plugins): its package folder and name
            rel = "plugin:" + "/".join(path.resolve().parts[-2:])
        lines.append(f"{_digest(path, st.st_mtime_ns, st.st_size)}  {rel}")
    return "\n".join(lines) + "\n"


@functools.cache
def _digest(path: Path, mtime_ns: int, size: int) -> str:
    """SHA-256 of ``path``, read once per (path, mtime, size): the verbs share most files, and
    an edited file is read again."""
    return file_digest(path)
