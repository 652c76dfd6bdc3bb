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
import zlib
from collections.abc import Iterator
from pathlib import Path

from curation.core.record import Record
from curation.errors import RecordError
from curation.steps.base import Reader, Reject
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


class _TextReader(Reader):
    def __init__(self, path: Path, *, text_field: str, id_field: str | None, metadata_fields: list[str],
                 shard_label: str, conversations=None, **kw):
        super().__init__(path, shard_label=shard_label, **kw)
        self.conversations = conversations   # `curation.recipe.schema.Conversations`, or None
        self.text_field = text_field
        self.id_field = id_field
        self.metadata_fields = metadata_fields

    def _record(self, obj: dict, loc: str, where: str, raw: str) -> Record | Reject:
        """One parsed row -> a record, or the reason it cannot be one."""
        chat = None
        if self.conversations is not None:  # SFT: the chat template's skeleton goes to the shards with the text
            try:
                parsed = parse_conversation(obj, self.conversations)
            except RecordError as e:
                return Reject(loc, e.reason, f"{where}: {e.detail}", raw)
            text, chat = parsed.text, {"chat": parsed.chat, **({"media": parsed.media} if parsed.media else {})}
        else:
            text = obj.get(self.text_field)
        if isinstance(text, list) and text and chat is None:  # a conversation as plain text (decontamination sees all)
            text = _join_turns(text)
        if not isinstance(text, str):
            why = "missing" if text is None else f"a {type(text).__name__}, not a string"
            return Reject(loc, "missing_text", f"{where}: field {self.text_field!r} is {why}", raw)
        rid = obj.get(self.id_field) if self.id_field else loc
        if self.id_field and (rid is None or not str(rid).strip()):
            return Reject(loc, "missing_id", f"{where}: id field {self.id_field!r} is missing or empty", raw)
        meta = {k: obj[k] for k in self.metadata_fields if k in obj}
        meta.update(chat or {})
        return Record(id=str(rid), source=self.source, text=text, meta=meta)


class JsonlReader(_TextReader):
    def _lines(self) -> Iterator[tuple[int, bytes] | Reject]:
        f = gzip.open(self.path, "rb") if self.path.suffix == ".gz" else open(self.path, "rb")
        with f:
            lineno = 0
            try:
                for lineno, raw in enumerate(f, start=1):
                    yield lineno, raw
            except (EOFError, zlib.error, gzip.BadGzipFile) as e:
                yield Reject(f"{self.shard_label}:{lineno + 1}", "truncated_gzip",
                             f"{self.path}: compressed stream ends or breaks after line {lineno} ({e}); "
                             f"re-fetch the file")

    def parse(self) -> Iterator[Record | Reject]:
        for item in self._lines():
            if isinstance(item, Reject):
                yield item
                continue
            lineno, raw = item
            if not raw.strip():
                continue
            loc = f"{self.shard_label}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield Reject(loc, "invalid_utf8", f"{self.path} line {lineno}: byte {e.start} is not UTF-8 "
                             f"({e.reason})", raw.decode("utf-8", "backslashreplace"))
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                yield Reject(loc, "malformed_json", f"{self.path} line {lineno}: {e.msg} at column {e.colno}", line)
                continue
            if not isinstance(obj, dict):
                yield Reject(loc, "not_an_object", f"{self.path} line {lineno}: expected a JSON object, "
                             f"got {type(obj).__name__}", line)
                continue
            yield self._record(obj, loc, f"{self.path} line {lineno}", line)


class TableReader(_TextReader):
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

    def parse(self) -> Iterator[Record | Reject]:
        import pyarrow as pa
        row = 0
        try:
            for batch in self._batches():
                for obj in batch.to_pylist():
                    row += 1
                    yield self._record(obj, f"{self.shard_label}:{row}", f"{self.path} row {row}",
                                       json.dumps(obj, default=str)[:10_000])
        except (pa.ArrowException, OSError) as e:
            yield Reject(f"{self.shard_label}:{row + 1}", "corrupt_file",
                         f"{self.path}: unreadable after row {row} ({e}); re-fetch the file")
