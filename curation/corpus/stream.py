"""Reading a processed shard's columns in bounded batches, for the corpus-wide phases' per-shard tasks.

A task that needs a column of every record (MinHash signatures and decontamination read `text`, exact
dedup reads `content_hash` and `meta`) holds one batch of `BATCH` rows at a time, so its memory is set
by the batch and what it keeps per record, not by the shard's size.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq

BATCH = 1024   # rows a task holds at once (the processed shards' row group, `steps.modality.ROW_GROUP`)


def column_batches(path: Path, columns: tuple[str, ...] = ("text",), batch: int = BATCH) -> Iterator[dict]:
    """A processed shard's `columns` in batches of at most `batch` rows, as dicts of lists."""
    for rb in pq.ParquetFile(path).iter_batches(batch_size=batch, columns=list(columns)):
        yield rb.to_pydict()
