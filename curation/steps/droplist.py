"""Drop lists: what a corpus-wide phase removes from one shard, each with its reason.

A phase writes one file per shard it covers (`curation.core.layout.drops_path`: columns `id`, `reason`,
`detail` (the evidence: the kept copy, the cluster, the matched benchmark item) and `image`, always
written, possibly empty); that shard's tokenize task drops exactly those ids with `DropListed`, so
removal is by (source, shard, id) and can never take anything else with it. A row whose `image` is set
removes only that image (its index in the record's `meta["images"]`) from a record that holds several
(an interleaved document): the record stays, and `DropListed` notes the images to remove in
`meta["drop_images"]` for the record's encoder, which removes them and counts them by reason. A
tokenize task's fingerprint can cover its own slice (the file's sha256) rather than the whole phase.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from curation.core.atomic import atomic_write_parquet
from curation.core.record import Drop, Record
from curation.steps.base import Filter

SCHEMA = pa.schema([("id", pa.string()), ("reason", pa.string()), ("detail", pa.string()),
                    ("image", pa.int32())])
IMAGE = "image"   # first element of the key of a per-image row in `read_drops`: ("image", id, index)


def write_drops(path: Path, rows: list[tuple]) -> None:
    """(id, reason, detail) triples, or (id, reason, detail, image index) for one image of a record, in
    the order the phase found them."""
    write_drop_columns(path, pa.array([r[0] for r in rows], pa.string()), pa.array([r[1] for r in rows], pa.string()),
                       pa.array([r[2] for r in rows], pa.string()),
                       pa.array([r[3] if len(r) > 3 else None for r in rows], pa.int32()))


def write_drop_columns(path: Path, ids, reasons, details, images=None) -> None:
    """A drop list from Arrow columns (no Python row per record, as the dedup assemblies write them): the ids,
    their reasons (a column, or one string for all), the evidence of each (null is written as ""), and the
    image index of a row that removes one image (None: whole records)."""
    def column(values, kind: pa.DataType) -> pa.Array:
        return pa.chunked_array(values).combine_chunks().cast(kind)
    n = len(ids)
    text = pa.string()
    reason = pa.array([reasons] * n, text) if isinstance(reasons, str) else column(reasons, text)
    columns = [column(ids, text), reason, pc.fill_null(column(details, text), ""),
               pa.nulls(n, pa.int32()) if images is None else column(images, pa.int32())]
    atomic_write_parquet(path, pa.Table.from_arrays(columns, schema=SCHEMA))


def read_drops(path: Path) -> dict:
    """id -> (reason, detail) for whole records, and ("image", id, index) -> (reason, detail) for single
    images. The keys of both kinds never collide, so drop lists of several phases merge with `dict.update`."""
    t = pq.read_table(path)
    return {(rid if k is None else (IMAGE, rid, int(k))): (reason, detail)
            for rid, reason, detail, k in zip(t.column("id").to_pylist(), t.column("reason").to_pylist(),
                                              t.column("detail").to_pylist(), t.column("image").to_pylist())}


class DropListed(Filter):
    """Drops the records a phase listed, each with its reason and evidence (id -> (reason, detail)); images
    listed one by one (`("image", id, index) -> (reason, detail)`) are noted in the record's
    `meta["drop_images"]` ({index: reason})."""

    def __init__(self, name: str, reasons: dict, **kw):
        self.name = name
        super().__init__(**kw)
        def pair(v):
            return v if isinstance(v, tuple) else (v, "")
        self.reasons = {k: pair(v) for k, v in reasons.items() if isinstance(k, str)}
        self.images: dict[str, dict[str, str]] = {}
        for k, v in reasons.items():
            if not isinstance(k, str):
                self.images.setdefault(k[1], {})[str(k[2])] = pair(v)[0]   # str keys: meta stays JSON-able

    def keep(self, record: Record) -> bool | Drop:
        listed = self.reasons.get(record.id)
        if listed:
            return Drop(*listed)
        if record.id in self.images:
            record.meta.setdefault("drop_images", {}).update(self.images[record.id])
        return True
