"""Media file conventions shared by acquisition (which packs samples) and the readers (which unpack them)."""
from __future__ import annotations

IMAGE_EXTS = {".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff"}


def key_of(name: str) -> str:
    base = name.rsplit("/", 1)
    return (base[0] + "/" if len(base) == 2 else "") + base[-1].split(".", 1)[0]
