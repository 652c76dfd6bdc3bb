"""A modality is a declaration: how its samples are read, checked, kept in `processed/`, encoded
into token sequences and accounted for in the ledger. The runtime never asks which modality it
runs; it asks the declaration (`curation.steps.registry.MODALITIES`). Adding a modality is one
folder (this declaration and its recipe-level `curation.recipe.registry.SourceModality`) and one
registration line.

Processed shards are Parquet tables with the columns every phase reads (`id`, `text`, `meta` as
JSON, `content_hash` for exact dedup) plus the modality's own (`extra_columns`), written in row
groups as records stream in, so a process task never holds its shard in memory.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.io import Location
from curation.core.record import Record, StepStats
from curation.steps.base import Reader, StepSpec

BASE_COLUMNS = [("id", pa.string()), ("text", pa.string()), ("meta", pa.string()), ("content_hash", pa.binary(16))]
ROW_GROUP = 1024


@dataclass(frozen=True)
class LedgerTable:
    """A ledger table a modality contributes: its schema and its row per source."""
    name: str
    schema: pa.Schema
    # (run, source config, summed stats by step name, token counts by modality of the merged shard) -> row
    row: Callable[[str, object, dict[str, StepStats], dict], dict]


@dataclass(frozen=True)
class Modality:
    name: str
    extra_columns: list[tuple[str, pa.DataType]]
    content_hash: Callable[[Record], bytes]            # what exact dedup compares
    extra_row: Callable[[Record], dict]                # values of the extra columns
    reader: Callable[..., Reader]                      # (src, path, shard_label=, source=, sink=) -> reader
    reader_settings: Callable[[object], dict]          # what the reader reads from the source config
    checks: Callable[[object, Location, Path], list[StepSpec]]   # (src, input path or URL, recipe dir) -> checks
    encoder: Callable[[object, dict], StepSpec]        # (src, encode settings of the run) -> tokenize step
    outputs: Callable[[object], tuple[str, ...]]       # shard suffixes the tokenize step writes
    record_columns: tuple[str, ...] = ()                # extra columns the encoder reads back (into `Record.payload`)
    codec: str | None = None                           # the recipe key naming its codec (`image_tokenizer`)
    # the codecs one source's encoder runs, {kind: recipe key} (default: {name: codec}); a text source that
    # expands conversation media runs the image and/or audio codec, an interleaved source the image codec
    codecs_of: Callable[[object], dict[str, str]] | None = None
    family: str | None = None                          # the column it counts in by modality (Table 3); default name
    processed_writer: Callable[..., ProcessedWriter] | None = None
    ledger_table: LedgerTable | None = None
    # content hash of the files an input shard refers to (an audio manifest's clips), for fingerprints;
    # called with (source, shard path, recipe folder), the folder that relative `input.allow_roots` start from
    input_files: Callable[[object, Location, Path], object] = field(default=lambda src, path, base_dir: None)
    # (processed text, metadata) -> the text benchmark decontamination matches, when it is more than the
    # text (an audio clip's transcript and its translation); None: the processed text alone
    decont_text: Callable[[str, dict], str] | None = None

    def decontaminated_text(self, text: str, meta_json: str | None) -> str:
        """What decontamination matches and shows for one processed row (`text`, `meta` columns)."""
        return text if self.decont_text is None else self.decont_text(text, json.loads(meta_json or "{}"))

    def codecs(self, src) -> dict[str, str]:
        """{codec kind: recipe key} of the codecs `src`'s encoder runs (what the plan resolves and fingerprints)."""
        if self.codecs_of is not None:
            return self.codecs_of(src)
        return {self.name: self.codec} if self.codec else {}

    @property
    def budget_family(self) -> str:
        """text, image or audio: the modality column its tokens count in (interleaved documents are vision data)."""
        return self.family or self.name

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([*BASE_COLUMNS, *self.extra_columns])

    def writer(self, path: Path, **kw) -> ProcessedWriter:
        return (self.processed_writer or ProcessedWriter)(self, path, **kw)


class ProcessedWriter:
    """Streams kept records into `processed/<source>/<shard>.parquet` (atomically, in row groups)."""

    def __init__(self, modality: Modality, path: Path, **_):
        self.modality, self.path = modality, Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(self.path.name + ".tmp")
        # Dictionary pages and min/max statistics only for the ids: for a text (or image) column they
        # copy every large value several times over (a 20 MB text cost ~8x its size to write), and
        # nothing reads them (shards are streamed whole, row group by row group).
        self._writer = pq.ParquetWriter(self._tmp, modality.schema, compression="zstd",
                                        use_dictionary=["id"], write_statistics=["id"])
        self._rows: list[dict] = []

    def add(self, record: Record) -> None:
        self._rows.append({"id": record.id, "text": record.text,
                           "meta": json.dumps(record.meta, sort_keys=True, ensure_ascii=False, default=str),
                           "content_hash": self.modality.content_hash(record), **self.modality.extra_row(record)})
        if len(self._rows) >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        if self._rows:
            self._writer.write_table(pa.Table.from_pylist(self._rows, schema=self.modality.schema))
            self._rows = []

    def close(self) -> list[Path]:
        """Finish and rename into place; returns the files written."""
        self._flush()
        self._writer.close()
        os.replace(self._tmp, self.path)
        return [self.path]

    def abort(self) -> None:
        self._writer.close()
        self._tmp.unlink(missing_ok=True)


def read_processed(path: Path, source: str, columns: tuple[str, ...] = ()) -> Iterator[Record]:
    """The records of a processed shard, streamed one row group at a time (`ROW_GROUP` rows as written);
    `columns`: extra columns read back into `Record.payload`. Not `iter_batches`: it reads ahead, about a whole
    text column."""
    pf = pq.ParquetFile(path)
    for group in range(pf.num_row_groups):
        cols = pf.read_row_group(group, columns=["id", "text", "meta", *columns]).to_pydict()
        for i, (rid, text, meta) in enumerate(zip(cols["id"], cols["text"], cols["meta"])):
            yield Record(id=rid, source=source, text=text, meta=json.loads(meta),
                         payload={c: cols[c][i] for c in columns})
