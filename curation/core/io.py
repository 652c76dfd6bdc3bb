"""Where inputs live: local paths, or fsspec URLs (`s3://bucket/prefix/*.jsonl.gz`, `hf://…`,
`memory://…`) read in place by the task that reads them, never copied to the driver first.

A location is a `Path` (local; `file://` URLs become paths, so containment checks apply) or a URL
string. A local input's identity is its sha256; a remote one's is its size and the filesystem's
content key (`fs.ukey`: the ETag or checksum the store reports), so planning never reads a remote
corpus through the driver. `acquire:` stays the way to materialise inputs that must be copied.
"""
from __future__ import annotations

import io
import re
from pathlib import Path
from typing import BinaryIO, TypeGuard

from curation.core.hashing import sha256_file

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
Location = Path | str


def is_url(location: object) -> TypeGuard[str]:
    return isinstance(location, str) and bool(_SCHEME.match(location)) and not location.startswith("file://")


def as_location(text: str) -> Location:
    """A string as written in a recipe or a node spec: a URL stays a string, anything else is a path."""
    if text.startswith("file://"):
        return Path(text.removeprefix("file://"))
    return text if is_url(text) else Path(text)


def _fs(url: str):
    import fsspec
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as e:   # an unknown protocol, or its package not installed
        raise OSError(f"cannot open {url}: {e}; install the fsspec implementation of its protocol "
                      f"(e.g. s3fs for s3://, huggingface_hub for hf://)") from None


def glob_input(pattern: str) -> list[str]:
    """Files matching a URL glob, as URLs, sorted."""
    fs, path = _fs(pattern)
    protocol = pattern.split("://", 1)[0]
    return sorted(f"{protocol}://{p.lstrip('/')}" if protocol != "memory" else f"memory://{p}"
                  for p in fs.glob(path) if fs.isfile(p))


def open_input(location: Location) -> BinaryIO:
    """A binary, buffered stream of the input's bytes."""
    if is_url(location):
        fs, path = _fs(location)
        raw = fs.open(path, "rb")
        return raw if hasattr(raw, "peek") else io.BufferedReader(raw)
    return open(location, "rb")


def identity(location: Location) -> tuple[int, str]:
    """(size in bytes, content identity): sha256 for a local file, `fsspec:<ukey>` for a remote one."""
    if is_url(location):
        fs, path = _fs(location)
        return int(fs.info(path).get("size") or 0), f"fsspec:{fs.ukey(path)}"
    return Path(location).stat().st_size, sha256_file(Path(location))
