"""Image folders and downloaded image URLs become WebDataset tars in `raw/<source>/`, so every image
source is read by one reader (`curation.steps.image.read.WebDatasetReader`).

A sample is `<key>.<ext>` (the image bytes, unchanged), `<key>.json` (metadata: for a folder, the
file name and a sidecar `<stem>.json`'s fields; for a URL list, the entry's fields plus `url`,
`final_url` and `sha256`) and, for a folder image with a sidecar `<stem>.txt`, that caption's bytes
unchanged as `<key>.txt` (so a caption that is not UTF-8 is quarantined by the reader, not mended). A folder
is read only inside itself and `input.allow_roots` (`folder_samples`; refusals are listed). Tars are written in sorted key
order with fixed member metadata (mtime 0, uid 0, mode 0644), `per_tar` samples each, so the same
inputs give byte-identical tars. A body that is not a known image format keeps the `.bin` extension
and is quarantined by the reader (`no_image`), never dropped here.
"""
from __future__ import annotations

import io
import json
import os
import re
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from curation.core.contain import InputTree, Refusal
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


@dataclass
class FolderScan:
    """What a folder holds: the samples to pack, and every item refused, as {path, reason, detail}."""
    samples: list[Sample] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)


def display_name(path: Path) -> str:
    """A path as UTF-8 text: bytes of a name that is not UTF-8 become backslash escapes (`caf\\xe9`)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def read_sidecar(tree: InputTree, path: Path) -> bytes | Refusal | None:
    """A sidecar's bytes; None when there is none (or a link inside the tree that leads nowhere)."""
    if not os.path.lexists(path):
        return None
    try:
        return tree.read_bytes(path)
    except FileNotFoundError:   # a dangling link inside the tree: no sidecar
        return None


def folder_samples(root: Path, allow_roots: list[Path] = ()) -> FolderScan:
    """Images under `root` (recursively) with their sidecar `.txt` caption / `.json` fields.

    Only files inside `root` (or an allowed root) are read (`curation.core.contain`): an image or a
    sidecar that is a link out of the tree refuses its sample (`link_outside_input`), as do a sidecar
    `.json` that is not a UTF-8 JSON object (`bad_sidecar`) and a second image with the key of an
    earlier one (`duplicate_key`); each refusal is listed with its path and detail."""
    if not root.is_dir():
        raise InputError(f"image folder {root} does not exist; fix acquire.path")
    root = Path(os.path.abspath(root))
    tree = InputTree(root, allow_roots)
    scan, keys = FolderScan(), {}

    def refuse(path: Path, reason: str, detail: str) -> None:
        scan.refused.append({"path": display_name(path.relative_to(root)), "reason": reason, "detail": detail})

    for path, refusal in tree.walk(IMAGE_EXTS):
        rel = path.relative_to(root)
        if refusal is not None:
            refuse(path, refusal.reason, refusal.detail)
            continue
        key = safe_key(str(rel.with_suffix("")))
        if key in keys:
            refuse(path, "duplicate_key", f"{keys[key]} and {rel} map to the same sample key {key!r}; rename one")
            continue
        image, meta, caption = tree.read_bytes(path), read_sidecar(tree, path.with_suffix(".json")), \
            read_sidecar(tree, path.with_suffix(".txt"))
        bad = next((x for x in (image, meta, caption) if isinstance(x, Refusal)), None)
        if bad is not None:
            refuse(path, bad.reason, bad.detail)
            continue
        fields: dict = {"file": display_name(rel)}
        if meta is not None:
            try:
                obj = json.loads(meta.decode("utf-8"))
                json.dumps(obj, ensure_ascii=False).encode("utf-8")   # no lone-surrogate escape ("\ud800")
            except (UnicodeError, json.JSONDecodeError) as e:
                refuse(path, "bad_sidecar", f"{rel.with_suffix('.json')}: not UTF-8 JSON ({e})")
                continue
            if not isinstance(obj, dict):
                refuse(path, "bad_sidecar", f"{rel.with_suffix('.json')}: not a JSON object")
                continue
            fields.update(obj)
        keys[key] = rel
        scan.samples.append((key, image, fields, caption))
    return scan
