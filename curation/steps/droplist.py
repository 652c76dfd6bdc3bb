"""Drop lists: the ids a corpus-wide phase removes from one shard, each with its reason.

A phase writes one file per shard it covers (`curation.core.layout.drops_path`: columns `id`,
`reason` and `detail` (the evidence: the kept copy, the cluster, the matched benchmark item), always
written, possibly empty); that shard's tokenize task drops exactly those ids with
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

SCHEMA = pa.schema([("id", pa.string()), ("reason", pa.string()), ("detail", pa.string())])


def write_drops(path: Path, rows: list[tuple[str, str, str]]) -> None:
    """(id, reason, detail) in the order the phase found them."""
    atomic_write_parquet(path, pa.table({"id": [r[0] for r in rows], "reason": [r[1] for r in rows],
                                         "detail": [r[2] for r in rows]}, schema=SCHEMA))


def read_drops(path: Path) -> dict[str, tuple[str, str]]:
    """id -> (reason, detail)."""
    t = pq.read_table(path)
    return {i: (r, d) for i, r, d in zip(t.column("id").to_pylist(), t.column("reason").to_pylist(),
                                         t.column("detail").to_pylist())}


class DropListed(Filter):
    """Drops the records a phase listed, each with its reason and evidence (id -> (reason, detail))."""

    def __init__(self, name: str, reasons: dict[str, tuple[str, str] | str], **kw):
        self.name = name
        super().__init__(**kw)
        self.reasons = {k: v if isinstance(v, tuple) else (v, "") for k, v in reasons.items()}

    def keep(self, record: Record) -> bool | Drop:
        listed = self.reasons.get(record.id)
        return Drop(*listed) if listed else True
