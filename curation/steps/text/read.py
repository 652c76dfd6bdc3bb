"""Read one input shard into records, quarantining what is unusable.

`JsonlReader` reads JSON lines (plain, gzip or zstd); `TableReader` reads Parquet or Arrow files (a
Hugging Face dataset snapshot); WARC/WET and HTML pages have their own readers (`warc.py`, `html.py`).
The read step's unit is an input line or table row; an empty file counts as one unit, quarantined as
`empty_file` so that it shows in the ledger. Per line: invalid UTF-8, malformed JSON, a non-object line,
a missing or non-string text field are quarantined with the line number; a UTF-8 byte-order mark at
the start of a line is ignored (RFC 8259 allows it); a line longer than `max_record_bytes` is
`record_too_large`, measured in bounded chunks and never held whole. A compressed file whose bytes are
not what its name says is one `not_gzip`/`not_zstd` unit; a stream that breaks off quarantines the rest
of the file as `truncated_gzip` (`corrupt_gzip` for bad data, `decompression_bomb` past the limits of
`curation.steps.text.inputs.Limits`) and keeps the lines read before the damage (an unreadable table
file is one `corrupt_file` unit). Record ids are the `id_field` value when given, else
`<file-stem>:<line>`; a repeated id within a shard is quarantined (ids must be unique). A text field
holding a list is a conversation: its turns (strings or objects with `content`/`value`) are joined by
blank lines, so filters and decontamination see every turn.
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from curation.core.record import Record
from curation.steps.base import Step
from curation.steps.text.inputs import (
    PREVIEW_BYTES,
    InputDamage,
    Limits,
    Oversize,
    Rejection,
    iter_lines,
    open_bounded,
)
from curation.steps.text.turns import join_with_roles

BOM = b"\xef\xbb\xbf"


def _join_turns(turns: list) -> str | None:
    """Chat/SFT turns (strings, or objects with `content` or `value` as in OpenAI/ShareGPT layouts)
    joined by blank lines; None when a turn holds no text."""
    parts = []
    for turn in turns:
        content = turn.get("content", turn.get("value")) if isinstance(turn, dict) else turn
        if not isinstance(content, str):
            return None
        parts.append(content)
    return "\n\n".join(parts)


class _Reader(Step):
    name = "read"

    def __init__(self, path: Path, *, text_field: str, id_field: str | None, metadata_fields: list[str],
                 shard_label: str, turn_roles: bool = False, limits: Limits | None = None, **kw):
        super().__init__(**kw)
        self.path = path
        self.limits = limits or Limits()
        self.turn_roles = turn_roles
        self.text_field = text_field
        self.id_field = id_field
        self.metadata_fields = metadata_fields
        self.shard_label = shard_label

    def run(self, records: Iterable[Record] = ()) -> Iterator[Record]:
        stats = self.stats
        start = time.perf_counter()
        for record in self._parse():
            stats.seconds += time.perf_counter() - start
            yield record
            start = time.perf_counter()
        stats.seconds += time.perf_counter() - start

    def _record(self, obj: dict, loc: str, where: str, raw: str, seen_ids: set[str]) -> Record | None:
        """One parsed row -> a record, or None after quarantining it (counted by the caller as read)."""
        text = obj.get(self.text_field)
        roles = None
        if isinstance(text, list) and text and self.turn_roles:  # SFT: turns and roles kept for the shards
            joined = join_with_roles(text)
            if joined is None:
                self.quarantine(loc, "bad_turns", f"{where}: a turn lacks a known role or text content", raw)
                return None
            text, roles = joined
        elif isinstance(text, list) and text:  # a conversation: every turn is text (decontamination sees all)
            text = _join_turns(text)
        if not isinstance(text, str):
            why = "missing" if text is None else f"a {type(text).__name__}, not a string"
            self.quarantine(loc, "missing_text", f"{where}: field {self.text_field!r} is {why}", raw)
            return None
        rid = obj.get(self.id_field) if self.id_field else loc
        if self.id_field and (rid is None or not str(rid).strip()):
            self.quarantine(loc, "missing_id", f"{where}: id field {self.id_field!r} is missing or empty", raw)
            return None
        rid = str(rid)
        if rid in seen_ids:
            self.quarantine(loc, "duplicate_id", f"{where}: id {rid!r} already seen in this shard", raw)
            return None
        seen_ids.add(rid)
        self.stats.records_out += 1
        meta = {k: obj[k] for k in self.metadata_fields if k in obj}
        if roles is not None:
            meta["roles"] = roles
        return Record(id=rid, source=self.source, text=text, meta=meta)

    def _reject(self, r: Rejection) -> None:
        """Count a unit the parser turned down: a drop by design or a quarantine entry."""
        self.stats.records_in += 1
        if r.quarantine:
            self.quarantine(r.loc, r.reason, r.detail, r.raw)
        else:
            self.stats.dropped[r.reason] += 1

    def _empty(self) -> None:
        self.stats.records_in += 1
        self.quarantine(f"{self.shard_label}:0", "empty_file", f"{self.path}: file has no records; "
                        f"remove it from the source or check how it was produced")


def iter_jsonl_lines(path: Path, limits: Limits, label: str) -> Iterator[tuple[int, bytes | Oversize] | Rejection]:
    """The lines of a JSON-lines file (plain, `.gz` or `.zst`) with their numbers, each at most
    `limits.max_record_bytes` (else an `Oversize`); damage to the file ends it with a `Rejection`."""
    try:
        stream = open_bounded(path, limits)
    except InputDamage as e:
        yield Rejection(f"{label}:1", e.reason, e.detail)
        return
    with stream:
        lineno = 0
        try:
            for lineno, line in iter_lines(stream, limits.max_record_bytes):
                yield lineno, line
        except InputDamage as e:
            kept = f"; lines 1-{lineno} were read" if lineno else ""
            yield Rejection(f"{label}:{lineno + 1}", e.reason, e.detail + kept)


class JsonlReader(_Reader):
    def _parse(self) -> Iterator[Record]:
        stats = self.stats
        seen_ids: set[str] = set()
        any_line = False
        for item in iter_jsonl_lines(self.path, self.limits, self.shard_label):
            if isinstance(item, Rejection):
                self._reject(item)
                continue
            lineno, raw = item
            loc = f"{self.shard_label}:{lineno}"
            if isinstance(raw, Oversize):
                any_line = True
                stats.records_in += 1
                self.quarantine(loc, "record_too_large", f"{self.path} line {lineno}: "
                                f"{raw.describe(self.limits.max_record_bytes)}",
                                raw.preview[:PREVIEW_BYTES].decode("utf-8", "backslashreplace"))
                continue
            raw = raw.removeprefix(BOM)
            if not raw.strip():
                continue
            any_line = True
            stats.records_in += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                self.quarantine(loc, "invalid_utf8", f"{self.path} line {lineno}: byte {e.start} is not UTF-8 "
                                f"({e.reason})", raw[:10_000].decode("utf-8", "backslashreplace"))
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                self.quarantine(loc, "malformed_json", f"{self.path} line {lineno}: {e.msg} at column {e.colno}",
                                line[:10_000])
                continue
            if not isinstance(obj, dict):
                self.quarantine(loc, "not_an_object", f"{self.path} line {lineno}: expected a JSON object, "
                                f"got {type(obj).__name__}", line[:10_000])
                continue
            record = self._record(obj, loc, f"{self.path} line {lineno}", line[:10_000], seen_ids)
            if record is not None:
                yield record
        if not any_line and stats.records_in == 0:
            self._empty()


class TableReader(_Reader):
    """Parquet (`.parquet`) or Arrow IPC (`.arrow`, as in Hugging Face dataset snapshots) files."""

    def _batches(self):
        import pyarrow as pa
        import pyarrow.parquet as pq
        if self.path.suffix == ".arrow":
            with pa.memory_map(str(self.path)) as source:
                try:
                    reader = pa.ipc.open_stream(source)
                except pa.ArrowInvalid:
                    reader = pa.ipc.open_file(source)
                    yield from (reader.get_batch(i) for i in range(reader.num_record_batches))
                    return
                yield from reader
            return
        yield from pq.ParquetFile(self.path).iter_batches(batch_size=1024)

    def _parse(self) -> Iterator[Record]:
        import pyarrow as pa
        seen_ids: set[str] = set()
        row = 0
        try:
            for batch in self._batches():
                for obj in batch.to_pylist():
                    row += 1
                    self.stats.records_in += 1
                    record = self._record(obj, f"{self.shard_label}:{row}", f"{self.path} row {row}",
                                          json.dumps(obj, default=str)[:10_000], seen_ids)
                    if record is not None:
                        yield record
        except (pa.ArrowException, OSError) as e:
            self.stats.records_in += 1
            self.quarantine(f"{self.shard_label}:{row + 1}", "corrupt_file",
                            f"{self.path}: unreadable after row {row} ({e}); re-fetch the file")
            return
        if row == 0:
            self._empty()
