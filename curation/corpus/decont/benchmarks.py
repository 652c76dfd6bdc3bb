"""The benchmark registry: evaluation sets declared in the recipe as local files, read into items.

An item's text is its named fields joined with newlines; a field may hold a string, a number, a list
of strings (multiple-choice options, chat turns) or a mapping with a `text` list (ARC's `choices`).
Nothing is downloaded: a missing file or field is an error naming the benchmark and the fix.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
from dataclasses import dataclass
from pathlib import Path

from curation.errors import InputError


@dataclass(frozen=True)
class Item:
    benchmark: str
    item_id: str
    text: str


def _flatten(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (int, float)):
        return [str(value)]
    if isinstance(value, dict):
        return _flatten(value.get("text", list(value.values())))
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _flatten(v)]
    return [str(value)]


def _rows(path: Path):
    name = path.name.removesuffix(".gz")
    opener = gzip.open if path.suffix == ".gz" else open
    if name.endswith(".jsonl"):
        with opener(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as e:
                        raise InputError(f"benchmark file {path} line {n}: {e.msg}; fix or re-export the file") from None
    elif name.endswith(".csv"):
        with opener(path, "rt", encoding="utf-8", newline="") as f:
            yield from csv.DictReader(io.StringIO(f.read()))
    elif name.endswith(".parquet"):
        import pyarrow.parquet as pq
        yield from pq.read_table(path).to_pylist()
    else:
        raise InputError(f"benchmark file {path}: unknown format; use .jsonl(.gz), .csv(.gz) or .parquet")


def check_fields(name: str, path: Path, fields: list[str]) -> None:
    """`InputError` when the benchmark's first row lacks one of `fields` (a typo in the recipe), so that
    `curate validate` says so before any work, as the run would."""
    row = next(iter(_rows(path)), None)
    missing = [f for f in fields if row is not None and f not in row]
    if missing:
        raise InputError(f"benchmark {name!r}: {path} has no field(s) {missing}; its fields are "
                         f"{sorted(row)}; fix `fields`")


def load_items(name: str, path: Path, fields: list[str], id_field: str | None) -> list[Item]:
    if not path.is_file():
        raise InputError(f"benchmark {name!r}: file {path} does not exist; give a local copy (nothing is "
                         f"downloaded at run time)")
    items = []
    for i, row in enumerate(_rows(path)):
        missing = [f for f in fields if f not in row]
        if missing and i == 0:
            raise InputError(f"benchmark {name!r}: {path} has no field(s) {missing}; its fields are "
                             f"{sorted(row)}; fix `fields`")
        text = "\n".join(s for f in fields for s in _flatten(row.get(f)))
        item_id = str(row[id_field]) if id_field and row.get(id_field) is not None else str(i)
        items.append(Item(name, item_id, text))
    return items
