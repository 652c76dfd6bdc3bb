"""Regenerated captions coming back into a run (Apertus 1.5 §2.2.1: "we quarantine and regenerate
flagged captions"), without curate importing anyone's model code.

The loop:

1. A run quarantines captions that fail a check (`curation.steps.image.captions`) and writes them to
   `OUT/review/captions_to_regenerate.parquet` (`curation.steps.image.worklist`: sample id, source,
   shard, input file and position, the image bytes, the caption, every problem found).
2. A team runs its own vision-language model over that file and writes a recaption file, Parquet or
   JSON lines, one row per sample: `id`, `caption` (the new caption) and optionally `source` (rows
   naming another source are ignored, so one file can serve several sources).
3. The recipe names the file, `images: {recaptions: path}`. On the next run the image check replaces
   the caption of every listed sample before checking it (`curation.steps.image.read.ImageCheck`):
   a regenerated caption that passes is kept, with `caption_regenerated: true` in the record's
   metadata (and `caption_flagged`: the problems of the caption it replaced, if any); one that fails
   is quarantined again with its problem and lands in the next work list, marked as a regeneration.
   An empty regenerated caption is quarantined as `empty_caption`, as generation pipelines reject
   empty outputs. The ledger table `captions` counts, per source, the captions checked, flagged,
   regenerated, and regenerated then kept or flagged again.

Flagged captions stay quarantined rather than kept without caption: dropping only the caption would
turn a paired sample into an unpaired image, moving its tokens from the paired (text-target) pool to
the unpaired one behind the source's back; quarantined, the sample waits for its regenerated caption,
and a source whose captions mostly fail stops the run (`max_quarantine_share`) instead of silently
becoming an image-only source.

Memory: a task holds the recaptions of its own source (id and caption); they are loaded once per
worker process and source.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from curation.core.hashing import sha256_file
from curation.errors import InputError, RecipeError

COLUMNS = ("id", "caption")


def _rows(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq
        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as e:
            raise InputError(f"{path}: not a readable Parquet file ({e})") from None
        if not set(COLUMNS) <= set(table.column_names):
            raise InputError(f"{path}: columns {table.column_names}; a recaption file needs {list(COLUMNS)}")
        return table.select([c for c in (*COLUMNS, "source") if c in table.column_names]).to_pylist()
    rows = []
    with open(path, "rb") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise InputError(f"{path} line {n}: not JSON ({e})") from None
            if not isinstance(obj, dict):
                raise InputError(f"{path} line {n}: not a JSON object")
            rows.append(obj)
    return rows


def check_file(path: Path, source: str) -> str:
    """The recaption file's sha256 (what the image check's fingerprint covers), after checking that it
    exists and has the `id` and `caption` columns; called when the run is planned."""
    if not path.is_file():
        raise RecipeError(f"source {source!r}: images.recaptions {path} does not exist; give the file of "
                          f"regenerated captions (id, caption), or remove the setting")
    if path.suffix not in (".parquet", ".jsonl"):
        raise RecipeError(f"source {source!r}: images.recaptions {path} must be a .parquet or .jsonl file")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq
        names = pq.read_schema(path).names
        if not set(COLUMNS) <= set(names):
            raise RecipeError(f"source {source!r}: images.recaptions {path} has columns {names}; it needs "
                              f"{list(COLUMNS)} (and optionally `source`)")
    return sha256_file(path)


@lru_cache(maxsize=8)
def load_recaptions(path: str, sha256: str, source: str) -> dict[str, str]:
    """id -> regenerated caption for `source` (rows without a `source`, or naming it). `sha256` keys
    the cache, so a file replaced between runs in one process is read again."""
    out: dict[str, str] = {}
    for n, row in enumerate(_rows(Path(path)), start=1):
        missing = [c for c in COLUMNS if c not in row]
        if missing:
            raise InputError(f"{path} row {n}: no {', '.join(missing)}; every row needs `id` and `caption`")
        if row.get("source") not in (None, source):
            continue
        rid, caption = row["id"], row["caption"]
        if rid is None or (caption is not None and not isinstance(caption, str)):
            raise InputError(f"{path} row {n}: id {rid!r} with caption {caption!r}; ids must be set and "
                             f"captions text (or null for an empty regeneration)")
        if str(rid) in out:
            raise InputError(f"{path}: id {rid!r} of source {source!r} is listed twice; keep one caption per "
                             f"sample")
        out[str(rid)] = caption or ""
    return out
