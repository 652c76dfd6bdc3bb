"""Bounded reading of input files: decompression with limits, lines with a length cap, rejections.

Readers never hold more than one record of input at a time, and never more than `max_record_bytes`
of it: a longer line (or WARC payload, or HTML page) is measured while it is skipped, in bounded
chunks, and reported with its size and a short preview (`Oversize`). Compressed inputs are
decompressed in bounded pieces, so a gzip or zstd bomb is refused (`decompression_bomb`) after at
most `ratio_floor_bytes` of output rather than expanded in memory.

Damage has its own reason, named after the codec: `not_gzip` (named `.gz`, but the bytes are not
gzip: often an HTML error page saved under the data's name), `truncated_gzip` (the stream ends
before its end-of-stream marker: an interrupted download), `corrupt_gzip` (bad data or checksum
inside the stream); likewise `not_zstd`, `truncated_zstd`, `corrupt_zstd`.

The parsers of the readers (`iter_jsonl_lines`, `curation.steps.text.readers.warc.iter_warc_records`,
`curation.steps.text.readers.html.iter_html_pages`) are plain generators that yield their items or a
`Reject`; the reader classes only turn them into records and counts.
"""
from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from curation.core.io import open_input

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
PREVIEW_BYTES = 200       # how much of an oversized record its quarantine entry shows
_CHUNK = 1 << 20          # bytes read at a time while skipping an oversized record
_ZSTD_FEED = 1024         # compressed bytes per zstd call: at most ~32 MiB of output even for RLE bombs


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-record and per-stream bounds (the recipe's `input.max_record_bytes` and `input.decompression`).

    A stream is a bomb when, past `ratio_floor_bytes` of output, it has expanded more than `max_ratio`
    times the compressed bytes read so far, or past `max_decompressed_bytes` in all. Text compresses
    3-15x with gzip and rarely beyond 50x even when very repetitive; bombs reach 1,000x (gzip) and
    30,000x (zstd)."""
    max_record_bytes: int = 32 * 2**20
    max_decompressed_bytes: int = 64 * 2**30
    max_ratio: float = 200.0
    ratio_floor_bytes: int = 64 * 2**20


@dataclass(frozen=True, slots=True)
class Oversize:
    """A record longer than `max_record_bytes`: its full size and its first bytes, nothing else."""
    size: int
    preview: bytes

    def describe(self, limit: int) -> str:
        return (f"{self.size:,} bytes, over max_record_bytes = {limit:,}; raise input.max_record_bytes "
                f"if records this large are expected")


class InputDamage(Exception):
    """Raised from a read when a stream cannot be read further; `reason` is the quarantine reason."""

    def __init__(self, reason: str, detail: str, source: str = ""):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.source = source  # the stream that broke (a tar's own compression, or a member's)


def codec_for(path: Path | str) -> str | None:
    """`gzip` or `zstd` from the file name (`.gz`, `.tgz`, `.zst`, `.zstd`), else None."""
    name = str(path).lower()
    if name.endswith((".gz", ".tgz", ".gzip")):
        return "gzip"
    if name.endswith((".zst", ".zstd")):
        return "zstd"
    return None


class _Counting(io.RawIOBase):
    """Counts the compressed bytes read from the file (the denominator of the ratio)."""

    def __init__(self, fh: BinaryIO):
        self.fh = fh
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self.fh.readinto(b)
        self.count += n or 0
        return n


class _Zstd(io.RawIOBase):
    """A zstd stream read in small compressed pieces (bounded output per call), with truncation
    detected from the frame state (zstandard's stream reader ends silently on a truncated frame)."""

    def __init__(self, src: _Counting):
        import zstandard
        self.src, self._dctx, self._error = src, zstandard.ZstdDecompressor(), zstandard.ZstdError
        self._d = self._dctx.decompressobj()
        self._pending = b""       # compressed bytes not yet fed
        self._out = b""           # decompressed bytes not yet handed out
        self._pos = 0
        self._in_frame = False

    def readable(self) -> bool:
        return True

    def _produce(self) -> bool:
        """Decompress until some output is ready; False at a clean end of the stream."""
        while True:
            if not self._pending:
                self._pending = self.src.read(_ZSTD_FEED)
                if not self._pending:
                    if self._in_frame:
                        raise EOFError("zstd stream ends inside a frame")
                    return False
            if self._d.eof:  # the next frame of a multi-frame file
                self._d = self._dctx.decompressobj()
            piece, self._pending = self._pending, b""
            self._in_frame = True
            try:
                out = self._d.decompress(piece)
            except self._error as e:
                raise zlib.error(str(e)) from None
            if self._d.eof:
                self._in_frame = False
                self._pending = self._d.unused_data
            if out:
                self._out, self._pos = out, 0
                return True

    def readinto(self, b) -> int:
        if self._pos >= len(self._out) and not self._produce():
            return 0
        n = min(len(b), len(self._out) - self._pos)
        b[:n] = self._out[self._pos:self._pos + n]
        self._pos += n
        return n


class _Guarded(io.RawIOBase):
    """Decompressed bytes with the ratio and size limits checked, and codec errors mapped to reasons."""

    def __init__(self, dec, counting: _Counting, limits: Limits, path: str, codec: str):
        self.dec, self.counting, self.limits, self.path, self.codec = dec, counting, limits, path, codec
        self.out = 0
        # one decompression step per call (GzipFile.read(n) would gather n bytes, losing them on damage)
        self._read = getattr(dec, "read1", dec.read)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        try:
            data = self._read(len(b))
        except EOFError as e:
            raise InputDamage(f"truncated_{self.codec}", f"{self.path}: compressed stream ends early after "
                              f"{self.out:,} bytes of output ({e}); re-fetch the file", self.path) from None
        except (zlib.error, gzip.BadGzipFile, OSError) as e:
            raise InputDamage(f"corrupt_{self.codec}", f"{self.path}: damaged {self.codec} data after "
                              f"{self.out:,} bytes of output ({e}); re-fetch the file", self.path) from None
        n = len(data)
        b[:n] = data
        self.out += n
        check_expansion(self.out, self.counting.count, self.limits, str(self.path))
        return n


def check_expansion(out: int, compressed: int, limits: Limits, what: str, total: int | None = None) -> None:
    """Raise `decompression_bomb` when `out` bytes decompressed from `compressed` break the ratio, or
    the stream's `total` output (default `out`) breaks the size limit."""
    if (out if total is None else total) > limits.max_decompressed_bytes:
        raise InputDamage("decompression_bomb", f"{what}: more than {limits.max_decompressed_bytes:,} bytes "
                          f"once decompressed (input.decompression.max_bytes); the rest is not read", what)
    if out > limits.ratio_floor_bytes and out > limits.max_ratio * max(compressed, 1):
        raise InputDamage("decompression_bomb", f"{what}: {out:,} bytes from {compressed:,} compressed "
                          f"(over {limits.max_ratio:g}x, input.decompression.max_ratio); the rest is not read", what)


def open_bounded(path: Path, limits: Limits, codec: str | None = None) -> BinaryIO:
    """The decompressed bytes of `path` (codec from its name unless given), buffered, limits enforced.

    Raises `InputDamage` (`not_gzip`/`not_zstd`) at once when the bytes do not start as the name says;
    later reads raise it for truncation, corruption or a bomb."""
    codec = codec if codec is not None else codec_for(path)
    raw = open_input(path)
    if codec is None:
        return raw
    try:
        return decompressing(raw, codec, limits, str(path))
    except InputDamage:
        raw.close()
        raise


def decompressing(raw: BinaryIO, codec: str, limits: Limits, what: str) -> BinaryIO:
    """`raw` (a seekable or peekable binary stream at its start) decompressed with the limits enforced."""
    head = raw.peek(4)[:4] if hasattr(raw, "peek") else raw.read(4)
    if not hasattr(raw, "peek"):
        raw.seek(0)
    magic = GZIP_MAGIC if codec == "gzip" else ZSTD_MAGIC
    if head and not head.startswith(magic):
        raise InputDamage(f"not_{codec}", f"{what}: named as {codec} but starts with {head!r}, not the {codec} "
                          f"magic {magic!r} (an error page saved under the data's name?); re-fetch it or fix the "
                          f"name", what)
    counting = _Counting(raw)
    dec = gzip.GzipFile(fileobj=counting, mode="rb") if codec == "gzip" else _Zstd(counting)
    return io.BufferedReader(_Guarded(dec, counting, limits, what, codec), buffer_size=_CHUNK)


def read_bounded(stream, limit: int) -> bytes | Oversize:
    """All of `stream` (a file-like object), or an `Oversize` once it passes `limit` bytes (the rest is
    read in chunks and counted, never kept)."""
    data = stream.read(limit + 1)
    if len(data) <= limit:
        return data
    size, preview = len(data), data[:PREVIEW_BYTES]
    del data
    while chunk := stream.read(_CHUNK):
        size += len(chunk)
    return Oversize(size, preview)


def iter_lines(stream, limit: int) -> Iterator[tuple[int, bytes | Oversize]]:
    """`(line number, line)` for each line of a binary stream, or an `Oversize` in place of a line
    longer than `limit` bytes (newline excluded). At most `limit + 1` bytes are held at a time."""
    lineno = 0
    while line := stream.readline(limit + 1):
        lineno += 1
        if len(line) <= limit or line.endswith(b"\n"):
            held = [line]
            del line
            yield lineno, held.pop()   # not kept in this suspended frame: the consumer owns the only copy
            continue
        size, preview = len(line), line[:PREVIEW_BYTES]
        del line
        while part := stream.readline(_CHUNK):
            size += len(part)
            if part.endswith(b"\n"):
                size -= 1
                break
        yield lineno, Oversize(size, preview)


def limits_for(inp) -> Limits:
    """The `Limits` of a recipe's `input:` block (`curation.recipe.schema.Input`)."""
    return Limits(max_record_bytes=inp.max_record_bytes, max_decompressed_bytes=inp.decompression.max_bytes,
                  max_ratio=inp.decompression.max_ratio)
