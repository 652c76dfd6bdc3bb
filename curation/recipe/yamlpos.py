"""Safe YAML loading that remembers where every key came from, and refuses what YAML lets through.

`load_with_lines(path)` returns the parsed data (`yaml.SafeLoader` semantics: no Python objects are
ever constructed) and a map from key paths such as `("sources", 2, "filters", 0)` to the 1-based
line in the file, so that validation errors can point at the exact line.

Three things plain `yaml.safe_load` accepts are errors here:
- a key written twice in one mapping (YAML keeps the last value silently): the error names both
  lines, `x.yaml:14 and :20: key 'license' appears twice in sources[2]`;
- aliases that expand to more than MAX_EXPANDED_NODES nodes (a "billion laughs" bomb) or refer to
  themselves: the composed node graph shares aliased nodes, so its expanded size is counted in time
  linear in the file without expanding anything; normal reuse (`x-filters: &f [...]`, `filters: *f`)
  stays far below the bound;
- a file larger than MAX_RECIPE_BYTES or nested deeper than the parser can follow.
A merge key (`<<: *base`) followed by explicit keys is YAML's way to override, not a duplicate.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from curation.errors import RecipeError

KeyPath = tuple[Any, ...]

MAX_RECIPE_BYTES = 16 * 2**20
# nodes once every alias is expanded; a recipe of 2,000 sources with shared filter lists is ~100k
MAX_EXPANDED_NODES = 500_000
_MERGE = "tag:yaml.org,2002:merge"


def _expanded_size(root: yaml.Node, where: str) -> int:
    """Nodes in the tree the graph unfolds to; memoised per node, so aliases are never expanded."""
    memo: dict[int, int] = {}
    on_path: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in memo:
            return memo[key]
        if key in on_path:
            raise RecipeError(f"{where}:{node.start_mark.line + 1}: a YAML alias refers to the node that "
                              f"contains it (a recursive structure); recipes must be trees")
        on_path.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total += sum(size(item) for item in node.value)
        on_path.discard(key)
        memo[key] = total
        return total

    return size(root)


def _scalar_key(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    """The key as YAML resolves it (so `1` and `0x1`, `true` and `yes` are the same key)."""
    if node.tag == _MERGE:
        return (_MERGE,)
    if not isinstance(node, yaml.ScalarNode):
        return ("<complex>", id(node))
    value = loader.construct_object(node)
    return (node.tag, value) if isinstance(value, (str, int, float, bool, type(None))) else (node.tag, node.value)


def format_path(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _check_duplicates(loader: yaml.SafeLoader, node: yaml.MappingNode, path: KeyPath, where: str) -> None:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = _scalar_key(loader, key_node)
        line = key_node.start_mark.line + 1
        if key in seen:
            inside = format_path(path) or "the recipe's top level"
            shown = key_node.value if isinstance(key_node, yaml.ScalarNode) else "<complex key>"
            raise RecipeError(f"{where}:{seen[key]} and :{line}: key {shown!r} appears twice in {inside}; "
                              f"YAML would silently keep the last value, so keep one of them")
        seen[key] = line


def _walk(loader: yaml.SafeLoader, node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int],
          checked: set[int], where: str) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        if id(node) not in checked:  # an aliased mapping is checked once, where it is first reached
            checked.add(id(node))
            _check_duplicates(loader, node, path, where)
        merged: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:  # `<<: *base` (or a list of them): its keys belong to this mapping
                merged += value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                continue
            if not isinstance(key_node, yaml.ScalarNode):   # `{a: 1}: x` or `[a]: x`: no recipe key is one
                raise RecipeError(f"{where}:{key_node.start_mark.line + 1} {format_path(path) or 'top level'}: a "
                                  f"key is a {'mapping' if isinstance(key_node, yaml.MappingNode) else 'list'}, "
                                  f"not a name; recipe keys are plain words (check for doubled braces `{{{{`)")
            key = key_node.value
            lines[path + (key,)] = key_node.start_mark.line + 1
            _walk(loader, value_node, path + (key,), lines, checked, where)
            lines[path + (key,)] = key_node.start_mark.line + 1
        for base in merged:  # explicit keys keep their own lines; merged ones point into the anchor
            if isinstance(base, yaml.MappingNode):
                inherited: dict[KeyPath, int] = {}
                _walk(loader, base, path, inherited, checked, where)
                for key, line in inherited.items():
                    lines.setdefault(key, line)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(loader, item, path + (i,), lines, checked, where)


def load_with_lines(path: Path) -> tuple[Any, dict[KeyPath, int]]:
    try:
        size = path.stat().st_size
        if size > MAX_RECIPE_BYTES:
            raise RecipeError(f"{path}: recipe is {size:,} bytes, more than {MAX_RECIPE_BYTES:,}; a recipe "
                              f"describes inputs, it does not hold them (list files with globs)")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecipeError(f"{path}: recipe file not found; check the path") from None
    except UnicodeDecodeError as e:
        raise RecipeError(f"{path}: recipe is not valid UTF-8 ({e.reason} at byte {e.start})") from None
    loader = yaml.SafeLoader(text)
    lines: dict[KeyPath, int] = {}
    try:
        node = loader.get_single_node()
        if node is None:
            return None, lines
        expanded = _expanded_size(node, str(path))
        if expanded > MAX_EXPANDED_NODES:
            raise RecipeError(f"{path}: YAML aliases expand this recipe to {expanded:,} nodes, more than "
                              f"{MAX_EXPANDED_NODES:,} (an alias bomb?); reuse anchors without nesting "
                              f"aliases of aliases")
        _walk(loader, node, (), lines, set(), str(path))
        data = loader.construct_document(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise RecipeError(f"{where}: invalid YAML: {getattr(e, 'problem', e)}") from None
    except RecursionError:
        raise RecipeError(f"{path}: recipe is nested too deeply for the YAML parser; flatten it") from None
    finally:
        loader.dispose()
    return data, lines


def line_for(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of `path`, or of its nearest ancestor that exists in the file."""
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return lines.get(())
