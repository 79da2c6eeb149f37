"""The one YAML loader of calbench: workflow configs (the Snakefile checks every ``--configfile``
with it before anything runs), model registries and YAML specs.

PyYAML's ``safe_load`` is safe against code execution but not against three mistakes and one
attack this loader refuses, each with a one-line ``ValueError`` naming the line and the fix:

* a **duplicate key** (two ``ts:`` entries, two ``n_bootstrap:``): ``safe_load`` keeps the last
  one silently;
* a **YAML 1.1 boolean as a key** (``on:``, ``off:``, ``yes:``, ``no:``): it reads as ``True``
  / ``False``, never as the word; the fix is to quote it;
* an **alias bomb** (``&a [*b, *b, ...]`` nested): aliases are shared references, so loading
  is quick, but every later walk (JSON, schema checks, copies) visits the expanded tree, 9^9
  nodes for nine lines. The composed node graph is measured before anything is constructed
  (memoised: linear in the document's size) and refused above :data:`MAX_NODES`.

Syntax errors become one line too (``YAMLError`` names the line and the problem).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

#: Most nodes (scalars, sequences, mappings) a document may expand to through its aliases; the
#: largest shipped config has under 5,000.
MAX_NODES = 1_000_000

_BOOL_WORDS = frozenset(
    w for b in ("yes", "no", "true", "false", "on", "off") for w in (b, b.title(), b.upper())
)


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """:class:`yaml.SafeLoader` (libyaml's C parser where PyYAML has it: the same documents,
    ~10x faster) refusing duplicate keys, boolean keys and alias bombs."""

    where = "YAML"

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None:
            _check_expansion(node, self.where)
        return node

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:  # the keys as written (before merging ``<<``)
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                line = key_node.start_mark.line + 1
                if (
                    isinstance(key_node, yaml.ScalarNode)
                    and key_node.tag == "tag:yaml.org,2002:bool"
                    and not key_node.style  # plain: None (Python parser) or "" (libyaml)
                    and key_node.value in _BOOL_WORDS
                ):
                    meaning = key_node.value.lower() in ("yes", "true", "on")
                    raise ValueError(
                        f"{self.where} line {line}: the key '{key_node.value}' reads as the "
                        f"boolean {meaning} in YAML 1.1, not as a word; quote the key "
                        f"'{key_node.value}'"
                    )
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: PyYAML's own error follows
                    continue
                if first is not None:
                    raise ValueError(
                        f"{self.where} line {line}: duplicate key {key!r} (first at line "
                        f"{first}); keep one of them"
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _check_expansion(root, where: str) -> None:
    """Raise when the node graph expands to more than :data:`MAX_NODES` nodes or has a cycle."""
    sizes: dict[int, int] = {}
    active: set[int] = set()
    # iterative post-order walk, memoised on node identity (aliases share nodes)
    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in sizes and not done:
            continue
        children = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        if not done:
            if key in active:
                raise ValueError(
                    f"{where} line {node.start_mark.line + 1}: an alias refers to a node that "
                    "contains it (a cycle); write the values out"
                )
            active.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        active.discard(key)
        total = 1 + sum(sizes[id(c)] for c in children)
        if total > MAX_NODES:
            raise ValueError(
                f"{where} line {node.start_mark.line + 1}: the YAML expands to more than "
                f"{MAX_NODES:,} values through its aliases (*name); write the values out or "
                "use fewer nested aliases"
            )
        sizes[key] = total


def load_yaml(text: str, where: str = "YAML"):
    """Parse one YAML document (``where`` names it in errors) with the checks above."""
    loader = _Loader(text)
    loader.where = where
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = " ".join(str(exc.problem or exc.context or "").split())
        raise ValueError(f"{where}{line}: {problem}; fix the YAML syntax") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{where}: {' '.join(str(exc).split())}; fix the YAML syntax") from None
    finally:
        loader.dispose()


def load_yaml_file(path: str | os.PathLike):
    """:func:`load_yaml` of a file (one-line errors for a missing file or a directory)."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{p} is a directory; pass a YAML file")
    if not p.is_file():
        raise FileNotFoundError(f"{p} does not exist; pass an existing YAML file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{p} is not UTF-8 text; save it as UTF-8 YAML") from None
    return load_yaml(text, str(p))
