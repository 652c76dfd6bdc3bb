"""Reading a processed shard's columns in bounded batches, for the corpus-wide phases' per-shard tasks.

A task that needs a column of every record (MinHash signatures and decontamination read `text`, exact
dedup reads `content_hash` and `meta`) holds one batch of `BATCH` rows at a time, so its memory is set
by the batch and what it keeps per record, not by the shard's size.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq

from curation.steps.modality import ROW_GROUP

BATCH = ROW_GROUP   # rows a task converts to Python at once


def column_batches(path: Path, columns: tuple[str, ...] = ("text",), batch: int = BATCH) -> Iterator[dict]:
    """A processed shard's `columns` in batches of at most `batch` rows, as dicts of lists.

    Read one row group at a time (the processed writer's row groups hold `ROW_GROUP` rows): pyarrow's
    `iter_batches` reads ahead and held about the whole column of a 24,000-document shard."""
    pf = pq.ParquetFile(path)
    for group in range(pf.num_row_groups):
        table = pf.read_row_group(group, columns=list(columns))
        for start in range(0, table.num_rows, batch):
            yield table.slice(start, batch).to_pydict()
