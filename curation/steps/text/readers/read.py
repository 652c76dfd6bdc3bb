"""Read one input shard into records, quarantining what is unusable.

`JsonlReader` reads JSON lines (plain, gzip or zstd); `TableReader` reads Parquet or Arrow files (a
Hugging Face dataset snapshot); WARC/WET and HTML pages have their own readers (`web_read.py`).
The read step's unit is an input line or table row; an empty file counts as one unit, quarantined as
`empty_file` so that it shows in the ledger (the `Reader` base class counts every unit). Per line:
invalid UTF-8, malformed JSON, a non-object line, a missing or non-string text field are quarantined
with the line number; a UTF-8 byte-order mark at the start of a line is ignored (RFC 8259 allows it); a
line longer than `max_record_bytes` is `record_too_large`, measured in bounded chunks and never held
whole. A compressed file whose bytes are not what its name says is one `not_gzip`/`not_zstd` unit; a
stream that breaks off quarantines the rest of the file as `truncated_gzip` (`corrupt_gzip` for bad
data, `decompression_bomb` past the limits of `curation.steps.text.readers.inputs.Limits`) and keeps the lines
read before the damage (an unreadable table file is one `corrupt_file` unit). Record ids are the
`id_field` value when given, else `<file-stem>:<line>`; a repeated id within a shard is quarantined (ids
must be unique). With `conversations` (`input.conversations`), a row is a chat/SFT conversation
(`curation.steps.conversation.turns`): its text segments become the text, the template's skeleton and media
list go to `meta["chat"]`/`meta["media"]`, and a row that cannot be rendered is quarantined with the
parser's reason. Otherwise a text field holding a list is a conversation as plain text: its turns
(strings or objects with `content`/`value`) are joined by blank lines, so filters and decontamination
see every turn.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from curation.core.io import is_url, open_input
from curation.core.record import Record
from curation.errors import RecordError
from curation.steps.base import Reader, Reject
from curation.steps.conversation.turns import parse_conversation
from curation.steps.text.readers.inputs import (
    PREVIEW_BYTES,
    InputDamage,
    Limits,
    Oversize,
    iter_lines,
    open_bounded,
)

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


class _TextReader(Reader):
    def __init__(self, path: Path, *, text_field: str, id_field: str | None, metadata_fields: list[str],
                 shard_label: str, conversations=None, limits: Limits | None = None, **kw):
        super().__init__(path, shard_label=shard_label, **kw)
        self.conversations = conversations   # `curation.recipe.schema.Conversations`, or None
        self.limits = limits or Limits()
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


def iter_jsonl_lines(path: Path, limits: Limits, label: str) -> Iterator[tuple[int, bytes | Oversize] | Reject]:
    """The lines of a JSON-lines file (plain, `.gz` or `.zst`) with their numbers, each at most
    `limits.max_record_bytes` (else an `Oversize`); damage to the file ends it with a `Reject`."""
    try:
        stream = open_bounded(path, limits)
    except InputDamage as e:
        yield Reject(f"{label}:1", e.reason, e.detail)
        return
    with stream:
        lineno = 0
        try:
            for item in iter_lines(stream, limits.max_record_bytes):
                lineno, held = item[0], [item]
                del item
                yield held.pop()   # a suspended frame keeps no reference to the line (see `JsonlReader.parse`)
        except InputDamage as e:
            kept = f"; lines 1-{lineno} were read" if lineno else ""
            yield Reject(f"{label}:{lineno + 1}", e.reason, e.detail + kept)


class JsonlReader(_TextReader):
    def parse(self) -> Iterator[Record | Reject]:
        for item in iter_jsonl_lines(self.path, self.limits, self.shard_label):
            if isinstance(item, Reject):
                yield item
                continue
            # Each copy of a large line is released as soon as the next exists: the bytes once decoded,
            # the decoded line once parsed (a suspended generator frame would hold them while the record
            # goes down the chain), so a record costs at most twice its size while read, once after.
            lineno, raw = item
            del item
            loc = f"{self.shard_label}:{lineno}"
            if isinstance(raw, Oversize):
                yield Reject(loc, "record_too_large", f"{self.path} line {lineno}: "
                             f"{raw.describe(self.limits.max_record_bytes)}",
                             raw.preview[:PREVIEW_BYTES].decode("utf-8", "backslashreplace"))
                continue
            raw = raw.removeprefix(BOM)
            if not raw or raw.isspace():   # (not `raw.strip()`: a copy of the line)
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield Reject(loc, "invalid_utf8", f"{self.path} line {lineno}: byte {e.start} is not UTF-8 "
                             f"({e.reason})", raw[:10_000].decode("utf-8", "backslashreplace"))
                continue
            del raw
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                yield Reject(loc, "malformed_json", f"{self.path} line {lineno}: {e.msg} at column {e.colno}",
                             line[:10_000])
                continue
            if not isinstance(obj, dict):
                yield Reject(loc, "not_an_object", f"{self.path} line {lineno}: expected a JSON object, "
                             f"got {type(obj).__name__}", line[:10_000])
                continue
            preview = line[:10_000]
            del line
            record = self._record(obj, loc, f"{self.path} line {lineno}", preview)
            del obj   # would keep the read text alive once a later step replaces `record.text`
            yield record


class TableReader(_TextReader):
    """Parquet (`.parquet`) or Arrow IPC (`.arrow`, as in Hugging Face dataset snapshots) files."""

    def _batches(self):
        import pyarrow as pa
        import pyarrow.parquet as pq
        if is_url(self.path):   # read in place through fsspec (Parquet or Arrow IPC by name)
            with open_input(self.path) as f:
                if str(self.path).endswith(".arrow"):
                    reader = pa.ipc.open_file(f)
                    yield from (reader.get_batch(i) for i in range(reader.num_record_batches))
                else:
                    yield from pq.ParquetFile(f).iter_batches(batch_size=1024)
            return
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
