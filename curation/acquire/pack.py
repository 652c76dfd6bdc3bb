"""Image folders and downloaded image URLs become WebDataset tars in `raw/<source>/`, so every image
source is read by one reader (`curation.steps.image.read.WebDatasetReader`).

A sample is `<key>.<ext>` (the image bytes, unchanged), `<key>.json` (metadata: for a folder, the
file name and a sidecar `<stem>.json`'s fields; for a URL list, the entry's fields plus `url`,
`final_url` and `sha256`) and, for a folder image with a sidecar `<stem>.txt`, that caption's bytes
unchanged as `<key>.txt` (so a caption that is not UTF-8 is quarantined by the reader, not mended). Tars are written in sorted key
order with fixed member metadata (mtime 0, uid 0, mode 0644), `per_tar` samples each, so the same
inputs give byte-identical tars. A body that is not a known image format keeps the `.bin` extension
and is quarantined by the reader (`no_image`), never dropped here.
"""
from __future__ import annotations

import io
import json
import re
import tarfile
from collections.abc import Iterable
from pathlib import Path

from curation.core.media import IMAGE_EXTS
from curation.errors import InputError

TAR_NAME = "images-{:05d}.tar"


def sniff_ext(data: bytes) -> str:
    """The image format's extension from its magic bytes, or `.bin`."""
    if data[:3] == b"\xff\xd8\xff":
        return ".jpg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return ".png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return ".gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    if data[:2] == b"BM":
        return ".bmp"
    if data[:4] in (b"II*\x00", b"MM\x00*"):
        return ".tif"
    return ".bin"


def safe_key(name: str) -> str:
    """A WebDataset key: no dots (they separate the extension), no path separators."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def _member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.uid, info.gid = len(data), 0, 0o644, 0, 0
    tar.addfile(info, io.BytesIO(data))


Sample = tuple[str, bytes, dict, "bytes | None"]   # key, image bytes, JSON fields, caption bytes


def write_tars(samples: Iterable[Sample], folder: Path, per_tar: int = 1000) -> list[str]:
    """Write samples, sorted by key, into `folder/images-NNNNN.tar`."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("images-*.tar"):
        old.unlink()
    ordered = sorted(samples, key=lambda s: s[0])
    names = []
    for start in range(0, len(ordered), per_tar):
        name = TAR_NAME.format(start // per_tar)
        tmp = folder / f".{name}.tmp"
        with tarfile.open(tmp, "w", format=tarfile.USTAR_FORMAT) as tar:
            for key, data, fields, caption in ordered[start:start + per_tar]:
                _member(tar, f"{key}{sniff_ext(data)}", data)
                _member(tar, f"{key}.json", json.dumps(fields, sort_keys=True, ensure_ascii=False).encode())
                if caption is not None:
                    _member(tar, f"{key}.txt", caption)
        tmp.replace(folder / name)
        names.append(name)
    return names


def folder_samples(root: Path) -> list[Sample]:
    """Images under `root` (recursively) with their sidecar `.txt` caption / `.json` fields."""
    if not root.is_dir():
        raise InputError(f"image folder {root} does not exist; fix acquire.path")
    samples, keys = [], {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_EXTS):
        rel = path.relative_to(root).with_suffix("")
        key = safe_key(str(rel))
        if key in keys:
            raise InputError(f"images {keys[key]} and {path} map to the same sample key {key!r}; rename one")
        keys[key] = path
        fields: dict = {"file": str(path.relative_to(root))}
        sidecar = path.with_suffix(".json")
        if sidecar.is_file():
            try:
                obj = json.loads(sidecar.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise InputError(f"{sidecar}: not UTF-8 JSON ({e}); fix or remove it") from None
            fields.update(obj if isinstance(obj, dict) else {})
        caption = path.with_suffix(".txt")
        samples.append((key, path.read_bytes(), fields, caption.read_bytes() if caption.is_file() else None))
    return samples
