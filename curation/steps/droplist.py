"""Drop lists: the ids a corpus-wide phase removes from one shard, each with its reason.

A phase writes one file per shard it covers (`curation.core.layout.drops_path`: columns `id`,
`reason`, always written, possibly empty); that shard's tokenize task drops exactly those ids with
`DropListed`, so removal is by (source, shard, id) and can never take anything else with it. A
tokenize task's fingerprint can cover its own slice (the file's sha256) rather than the whole phase.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.atomic import atomic_write_parquet
from curation.core.record import Drop, Record
from curation.steps.base import Filter

SCHEMA = pa.schema([("id", pa.string()), ("reason", pa.string())])


def write_drops(path: Path, rows: list[tuple[str, str]]) -> None:
    """(id, reason) pairs in the order the phase found them."""
    atomic_write_parquet(path, pa.table({"id": [r[0] for r in rows], "reason": [r[1] for r in rows]},
                                        schema=SCHEMA))


def read_drops(path: Path) -> dict[str, str]:
    t = pq.read_table(path)
    return dict(zip(t.column("id").to_pylist(), t.column("reason").to_pylist()))


class DropListed(Filter):
    """Drops the records a phase listed, each with its reason (id -> reason)."""

    def __init__(self, name: str, reasons: dict[str, str], **kw):
        self.name = name
        super().__init__(**kw)
        self.reasons = reasons

    def keep(self, record: Record) -> bool | Drop:
        reason = self.reasons.get(record.id)
        return Drop(reason) if reason else True
