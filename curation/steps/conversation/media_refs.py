"""Media references in conversation data, as one string each: a path or URL as the data gives it, or a
`data:` URL for inline bytes or base64 (OpenAI `input_audio`, Hugging Face `{"bytes", "path"}` structs).

Content parts (`part_media`): `{"type": "image_url", "image_url": {"url"} | str}`, `{"type": "input_image",
"image_url": ...}`, `{"type": "image", "image" | "url" | "path": ...}`, `{"type": "input_audio",
"input_audio": {"data", "format"}}`, `{"type": "audio", "audio" | "url" | "path": ...}`. A part without a
reference (Hugging Face processor style, `{"type": "image"}`) is a bare placeholder: its media comes from
the row's media field, in order. Row fields (`media_list`): a string, a list of strings, or of structs.

`load_reference(ref, root)` gets the bytes a reference names: a `data:` URL's payload, or a file under
`root` (a relative path, or an absolute one inside `root`; nothing outside it is read). A URL of any other
scheme is refused: nothing is downloaded at run time (acquire the media first and reference the files).
"""
from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path

from curation.errors import RecordError

_MAGIC = ((b"\x89PNG", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"),
          (b"BM", "image/bmp"), (b"fLaC", "audio/flac"), (b"ID3", "audio/mpeg"), (b"OggS", "audio/ogg"))
_KINDS = {"image_url": "image", "input_image": "image", "image": "image", "input_audio": "audio", "audio": "audio"}


def data_url(data: bytes) -> str:
    mime = next((m for magic, m in _MAGIC if data.startswith(magic)), None)
    if mime is None and data[:4] == b"RIFF":
        mime = {b"WEBP": "image/webp", b"WAVE": "audio/wav"}.get(data[8:12])
    return f"data:{mime or 'application/octet-stream'};base64,{base64.b64encode(data).decode()}"


def reference(value, kind: str) -> str | None:
    """One media reference; None when the value names no media (a bare placeholder)."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            raise RecordError("bad_media", f"an empty {kind} reference")
        return value
    if isinstance(value, (bytes, bytearray)):
        return data_url(bytes(value))
    if isinstance(value, dict):
        if isinstance(value.get("bytes"), (bytes, bytearray)) and value["bytes"]:
            return data_url(bytes(value["bytes"]))
        if isinstance(value.get("data"), str) and value["data"]:   # OpenAI input_audio: base64 and a format
            return f"data:{kind}/{value.get('format') or 'wav'};base64,{value['data']}"
        for key in ("url", "path"):
            if isinstance(value.get(key), str) and value[key].strip():
                return value[key]
    raise RecordError("bad_media", f"cannot read a {kind} reference from {str(value)[:80]!r}")


def part_media(part) -> tuple[str, str | None] | None:
    """(kind, reference or None) of a media content part; None when the part is not a media part."""
    if not isinstance(part, dict) or part.get("type") not in _KINDS:
        return None
    t = part["type"]
    kind = _KINDS[t]
    for key in (t, "image_url" if kind == "image" else "input_audio", "url", "path"):
        if part.get(key) is not None:
            return kind, reference(part[key], kind)
    return kind, None


def media_list(value, kind: str) -> list[str]:
    """A row's media field: nothing, one reference, or a list of them."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    refs = [reference(v, kind) for v in items]
    if any(r is None for r in refs):
        raise RecordError("bad_media", f"a null entry in the row's {kind} list")
    return refs


_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def is_url(ref: str) -> bool:
    return bool(_SCHEME.match(ref))


def load_reference(ref: str, root: Path, *, missing: str = "missing_media") -> bytes:
    """The bytes `ref` names (see the module docstring); RecordError `missing` (not there, a URL),
    `path_outside_input` / `link_outside_input` / `not_a_file` (a name or link leaving `root`, judged by
    `curation.core.contain`) or `bad_media` (a `data:` URL that does not decode)."""
    if ref.startswith("data:"):
        head, sep, payload = ref.partition(",")
        if not sep or not head.endswith(";base64"):
            raise RecordError("bad_media", f"{ref[:60]!r}: only base64 data: URLs are read")
        try:
            return base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError) as e:
            raise RecordError("bad_media", f"{ref[:60]!r}: {e}") from None
    if is_url(ref):
        raise RecordError(missing, f"{ref[:200]}: a URL; curate never downloads media at run time: fetch the file "
                          f"into the media folder and reference it by path")
    from curation.core.contain import InputTree, Refusal
    tree = InputTree(Path(root))
    try:
        got = tree.open_name(ref)
    except (OSError, ValueError):
        raise RecordError(missing, f"{ref[:200]}: no such file under {tree.root}") from None
    if isinstance(got, Refusal):   # a name or link out of the media folder, a hard link from outside, a fifo
        raise RecordError(got.reason, f"{ref[:200]}: {got.detail}")
    with got:
        return got.read()
