"""Scan image tars without decoding pixels: tar headers give each member's byte offset and size, and
the first bytes of each image give its format and dimensions (PIL parses headers lazily; a JPEG
whose size marker lies past the first read is read further, doubling, up to the whole member).

A WebDataset sample is the group of members sharing a key (the name up to the first dot of its last
path component); `scan_tar` returns one row per image member with that key, so captions (`.txt`,
`.json`) stay attached to their image by key.
"""
from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from curation.core.media import IMAGE_EXTS, key_of

FIRST_READ = 4096


@dataclass(frozen=True)
class ScannedImage:
    key: str
    member: str
    offset: int       # of the image bytes inside the tar
    size: int
    width: int        # 0 when the header could not be parsed (the image is quarantined later)
    height: int
    format: str


def _fast_header(head: bytes) -> tuple[int, int, str] | None:
    """PNG, JPEG, GIF and WebP sizes straight from their headers (PIL's plugin probing costs ~5× more);
    None when the format is another or the needed bytes are not in `head` yet."""
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24 and head[12:16] == b"IHDR":
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big"), "PNG"
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little"), "GIF"
    if head[:2] == b"\xff\xd8":
        i = 2
        while i + 9 <= len(head):
            if head[i] != 0xFF:
                return None  # not a marker where one must be: let PIL judge
            marker = head[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            length = int.from_bytes(head[i + 2:i + 4], "big")
            if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                return int.from_bytes(head[i + 7:i + 9], "big"), int.from_bytes(head[i + 5:i + 7], "big"), "JPEG"
            i += 2 + length
        return None
    return None


def image_header(read, size: int) -> tuple[int, int, str]:
    """(width, height, format) from the first bytes; `read(n)` returns the first n bytes."""
    n = min(FIRST_READ, size)
    while True:
        head = read(n)
        fast = _fast_header(head)
        if fast is not None:
            return fast
        try:
            with Image.open(io.BytesIO(head)) as img:
                return img.width, img.height, img.format or ""
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
            if n >= size:
                return 0, 0, ""
            n = min(2 * n, size)


def scan_tar(path: Path) -> list[ScannedImage]:
    """One row per image member of an uncompressed tar, in archive order; no pixel is decoded."""
    rows = []
    with open(path, "rb") as raw, tarfile.open(fileobj=raw, mode="r:") as tar:
        for m in tar:
            if not m.isfile() or Path(m.name).suffix.lower() not in IMAGE_EXTS:
                continue

            def read(n, m=m):
                raw.seek(m.offset_data)
                return raw.read(n)
            w, h, fmt = image_header(read, m.size)
            rows.append(ScannedImage(key_of(m.name), m.name, m.offset_data, m.size, w, h, fmt))
    return rows
