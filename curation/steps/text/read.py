"""Read one input shard into records, quarantining what is unusable.

`JsonlReader` reads JSON lines (plain or gzip); `TableReader` reads Parquet or Arrow files (a
Hugging Face dataset snapshot). The read step's unit is an input line or table row; an empty file
counts as one unit, quarantined as `empty_file` so that it shows in the ledger. Per line: invalid
UTF-8, malformed JSON, a non-object line, a missing or non-string text field are quarantined with
the line number; a truncated gzip stream quarantines the rest of the file as `truncated_gzip` and
keeps the lines read before the damage (an unreadable table file is one `corrupt_file` unit). Record
ids are the `id_field` value when given, else `<file-stem>:<line>`; a repeated id within a shard is
quarantined (ids must be unique). With `conversations` (`input.conversations`), a row is a chat/SFT
conversation (`curation.steps.text.turns`): its text segments become the text, the template's skeleton and
media list go to `meta["chat"]`/`meta["media"]`, and a row that cannot be rendered is quarantined with
the parser's reason. Otherwise a text field holding a list is a conversation as plain text: its turns
(strings or objects with `content`/`value`) are joined by blank lines, so filters and decontamination
see every turn.
"""
from __future__ import annotations

import gzip
import json
import time
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from curation.core.record import Record
from curation.errors import RecordError
from curation.steps.base import Step
from curation.steps.text.turns import parse_conversation


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
                 shard_label: str, conversations=None, **kw):
        super().__init__(**kw)
        self.path = path
        self.conversations = conversations   # `curation.recipe.schema.Conversations`, or None
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
        chat = None
        if self.conversations is not None:  # SFT: the chat template's skeleton goes to the shards with the text
            try:
                parsed = parse_conversation(obj, self.conversations)
            except RecordError as e:
                self.quarantine(loc, e.reason, f"{where}: {e.detail}", raw)
                return None
            text, chat = parsed.text, {"chat": parsed.chat, **({"media": parsed.media} if parsed.media else {})}
        else:
            text = obj.get(self.text_field)
        if isinstance(text, list) and text and chat is None:  # a conversation as plain text (decontamination sees all)
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
        meta.update(chat or {})
        return Record(id=rid, source=self.source, text=text, meta=meta)

    def _empty(self) -> None:
        self.stats.records_in += 1
        self.quarantine(f"{self.shard_label}:0", "empty_file", f"{self.path}: file has no records; "
                        f"remove it from the source or check how it was produced")


class JsonlReader(_Reader):
    def _lines(self) -> Iterator[tuple[int, bytes]]:
        if self.path.suffix == ".gz":
            f = gzip.open(self.path, "rb")
        else:
            f = open(self.path, "rb")
        with f:
            lineno = 0
            try:
                for lineno, raw in enumerate(f, start=1):
                    yield lineno, raw
            except (EOFError, zlib.error, gzip.BadGzipFile) as e:
                self.stats.records_in += 1
                self.quarantine(f"{self.shard_label}:{lineno + 1}", "truncated_gzip",
                                f"{self.path}: compressed stream ends or breaks after line {lineno} ({e}); "
                                f"re-fetch the file")

    def _parse(self) -> Iterator[Record]:
        stats = self.stats
        seen_ids: set[str] = set()
        any_line = False
        for lineno, raw in self._lines():
            if not raw.strip():
                continue
            any_line = True
            stats.records_in += 1
            loc = f"{self.shard_label}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                self.quarantine(loc, "invalid_utf8", f"{self.path} line {lineno}: byte {e.start} is not UTF-8 "
                                f"({e.reason})", raw.decode("utf-8", "backslashreplace"))
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                self.quarantine(loc, "malformed_json", f"{self.path} line {lineno}: {e.msg} at column {e.colno}",
                                line)
                continue
            if not isinstance(obj, dict):
                self.quarantine(loc, "not_an_object", f"{self.path} line {lineno}: expected a JSON object, "
                                f"got {type(obj).__name__}", line)
                continue
            record = self._record(obj, loc, f"{self.path} line {lineno}", line, seen_ids)
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
