"""Safe YAML loading that remembers where every key came from.

`load_with_lines(path)` returns the parsed data (via `yaml.safe_load` semantics: no Python
objects are ever constructed) and a map from key paths such as `("sources", 2, "filters", 0)`
to the 1-based line in the file, so that validation errors can point at the exact line.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from curation.errors import RecipeError

KeyPath = tuple[Any, ...]


def _walk(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int]) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[path + (key,)] = key_node.start_mark.line + 1
            _walk(value_node, path + (key,), lines)
            lines[path + (key,)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, path + (i,), lines)


def load_with_lines(path: Path) -> tuple[Any, dict[KeyPath, int]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecipeError(f"{path}: recipe file not found; check the path") from None
    except UnicodeDecodeError as e:
        raise RecipeError(f"{path}: recipe is not valid UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise RecipeError(f"{where}: invalid YAML: {getattr(e, 'problem', e)}") from None
    lines: dict[KeyPath, int] = {}
    if node is not None:
        _walk(node, (), lines)
    return data, lines


def line_for(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of `path`, or of its nearest ancestor that exists in the file."""
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return lines.get(())


def format_path(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
