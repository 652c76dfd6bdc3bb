"""The gzip members of a file, one at a time: how per-record gzip WARCs are read and resynchronised.

`Member(fh, start, ...)` decompresses the member that starts at byte `start` in bounded pieces and
knows where it ends; `next_member(fh, start)` finds the next member at or after `start` whose content
starts a WARC (or ARC) record, so that reading can resume past a damaged member. The decompression
ratio is judged per member (each member is independent), the size limit over the whole file.
"""
from __future__ import annotations

import io
import zlib

from curation.steps.text.readers.inputs import GZIP_MAGIC, InputDamage, Limits, check_expansion

_READ = 1 << 16


class Member(io.RawIOBase):
    """One gzip member of a file, decompressed in bounded pieces; `end` is set once it is complete."""

    def __init__(self, fh, start: int, totals: list[int], limits: Limits, what: str):
        self.fh, self.start, self.totals, self.limits, self.what = fh, start, totals, limits, what
        fh.seek(start)
        self.d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.tail = b""
        self.end: int | None = None
        self.n_in = self.n_out = 0  # this member's bytes: the ratio is judged per member

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while self.end is None:
            data = self.tail
            if not data:
                data = self.fh.read(_READ)
                self.n_in += len(data)
                if not data:
                    raise InputDamage("truncated_gzip", f"{self.what}: the gzip member at byte {self.start:,} "
                                      f"ends early (file cut short?); re-fetch the file")
            try:
                out = self.d.decompress(data, len(b))
            except zlib.error as e:
                raise InputDamage("corrupt_gzip", f"{self.what}: damaged gzip member at byte {self.start:,} "
                                  f"({e}); re-fetch the file") from None
            self.tail = self.d.unconsumed_tail
            if self.d.eof:
                self.end = self.fh.tell() - len(self.d.unused_data)
            if out:
                b[:len(out)] = out
                self.n_out += len(out)
                self.totals[0] += len(out)
                check_expansion(self.n_out, self.n_in, self.limits, f"{self.what} (member at byte {self.start:,})",
                                total=self.totals[0])
                return len(out)
        return 0


def next_member(fh, start: int) -> int | None:
    """The offset of the next gzip member at or after `start` whose content starts a WARC/ARC record."""
    pos = start
    while True:
        fh.seek(pos)
        chunk = fh.read(1 << 20)
        if len(chunk) < 3:
            return None
        i = chunk.find(GZIP_MAGIC + b"\x08")
        while i >= 0:
            fh.seek(pos + i)
            try:
                head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(fh.read(_READ), 16)
            except zlib.error:
                head = b""
            if head.startswith((b"WARC/", b"filedesc://")):
                return pos + i
            i = chunk.find(GZIP_MAGIC + b"\x08", i + 1)
        pos += len(chunk) - 2
