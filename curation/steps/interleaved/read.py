"""Interleaved image-text documents from Parquet rows (OBELICS, MINT-1T HTML) or WebDataset tars (MINT-1T
PDF and ArXiv), read into the record form of `curation.steps.interleaved.document`.

Both publish a document as two parallel lists in reading order, `texts` and `images` (names in the
recipe's `interleaved:`), where at every position exactly one of the two is non-null: the page
`<image_1>text<image_2>` is `images: [image_1, null, image_2]`, `texts: [null, text, null]`.

Parquet (one row = one document): an `images` entry is encoded bytes, a Hugging Face `{bytes, path}`
struct, or a string: a path, resolved under `interleaved.image_root` (relative to the input file's
folder, never outside it), or a URL, as OBELICS and MINT-1T HTML publish them: nothing is downloaded at
run time, so such an image is `image_not_acquired` (fetch the images first, e.g. with img2dataset, and
put their bytes or local paths in the rows). The page URL is the row's `url_field`, else the `url` of
the JSON object in `document_field` (OBELICS `general_metadata`, a JSON string).

WebDataset (consecutive members sharing a key = one document): `key.json` holds the lists, the page
`url` and the metadata fields. The images are members of the sample: for the entry `name`, the member
`key.name.<ext>` (or `key.name` when the entry carries its extension); else frame j of a multi-page
`key.tiff` holds the document's j-th image, the MINT-1T PDF/ArXiv layout, where entries such as
`page_0_image_85` name the image and the TIFF holds them all. An entry with neither is `missing_image`.

Whole documents are quarantined as `missing_texts` (a list field absent or not a list),
`bad_interleaving` (lists of different lengths, a position holding both a text and an image, a text that
is not a string), `too_many_images` (more than `interleaved.max_images`), `empty_document`,
`no_document_json` / `bad_document_json` (WebDataset), and per shard `truncated_tar` / `corrupt_file`.
Single images the reader cannot get keep their place with a `problem` (`image_not_acquired`,
`missing_image`, `corrupt_image`, `decompression_bomb`) for the image check to remove and count.
"""
from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

from curation.core.media import IMAGE_EXTS
from curation.core.record import Record
from curation.errors import RecordError
from curation.steps.base import Reader, Reject
from curation.steps.conversation.media_refs import is_url, load_reference
from curation.steps.image.decode import MAX_PIXELS
from curation.steps.image.read import WebDatasetReader
from curation.steps.interleaved.document import join_texts

TIFF = ("tiff", "tif")


def interleave(texts, images, max_images: int) -> tuple[list[str], list, list]:
    """(text segments, image entries, layout) of one document's parallel lists; RecordError when they are
    not a faithful reading order. Empty text entries hold nothing and take no place."""
    if not isinstance(texts, list) or not isinstance(images, list):
        missing = "texts" if not isinstance(texts, list) else "images"
        raise RecordError("missing_texts", f"the {missing} list is missing or not a list")
    if len(texts) != len(images):
        raise RecordError("bad_interleaving", f"{len(texts)} text entries but {len(images)} image entries; the "
                          f"lists must be parallel (one of the two non-null at each position)")
    segs, entries, layout = [], [], []
    for pos, (t, im) in enumerate(zip(texts, images)):
        if t is not None and im is not None:
            raise RecordError("bad_interleaving", f"position {pos} holds both a text and an image")
        if im is not None:
            layout.append(["image", len(entries)])
            entries.append(im)
        elif t is not None:
            if not isinstance(t, str):
                raise RecordError("bad_interleaving", f"position {pos}: the text is a {type(t).__name__}")
            if t.strip():
                layout.append(["text", len(segs)])
                segs.append(t)
    if len(entries) > max_images:
        raise RecordError("too_many_images", f"{len(entries)} images, more than interleaved.max_images "
                          f"({max_images})")
    if not layout:
        raise RecordError("empty_document", "no text and no image")
    return segs, entries, layout


def _image_ref(value, root: Path) -> tuple[bytes | None, dict]:
    """One Parquet image entry -> (bytes or None, its metadata: `ref`, and `problem` when unavailable)."""
    if isinstance(value, dict):
        if isinstance(value.get("bytes"), (bytes, bytearray)) and value["bytes"]:
            return bytes(value["bytes"]), {"ref": value.get("path")}
        value = value.get("path") or value.get("url") or value.get("src")
    if isinstance(value, (bytes, bytearray)) and value:
        return bytes(value), {"ref": None}
    if not isinstance(value, str) or not value.strip():
        return None, {"ref": None, "problem": "missing_image"}
    ref = value[:300]
    try:
        return load_reference(value, root, missing="missing_image"), {"ref": ref}
    except RecordError as e:
        problem = "image_not_acquired" if is_url(value) else "corrupt_image" if e.reason == "bad_media" \
            else e.reason   # missing_image, or a containment reason (path/link outside the image root)
        return None, {"ref": ref, "problem": problem}


def _url(obj: dict, url_field: str, document_field: str | None):
    if isinstance(obj.get(url_field), str):
        return obj[url_field]
    doc = obj.get(document_field) if document_field else None
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except json.JSONDecodeError:
            return None
    return doc.get("url") if isinstance(doc, dict) and isinstance(doc.get("url"), str) else None


class _Documents:
    """What both readers share: one document's record from its parallel lists and resolved images."""

    def _init(self, settings, url_field: str, metadata_fields: list[str]):
        self.settings, self.url_field, self.metadata_fields = settings, url_field, metadata_fields

    def _record(self, rid: str, obj: dict, images) -> Record:
        """`images(entries) -> [(bytes | None, meta)]` resolves the document's image entries."""
        s = self.settings
        segs, entries, layout = interleave(obj.get(s.texts_field), obj.get(s.images_field), s.max_images)
        resolved = images(entries)
        meta = {k: obj[k] for k in self.metadata_fields if k in obj}
        url = _url(obj, self.url_field, s.document_field)
        if url is not None:
            meta[self.url_field] = url
        meta.update(layout=layout, images=[m for _, m in resolved], images_listed=len(entries))
        return Record(id=rid, source=self.source, text=join_texts(segs), meta=meta,
                      payload={"media": [b for b, _ in resolved]})


class ParquetInterleavedReader(_Documents, Reader):
    def __init__(self, path: Path, *, settings, id_field: str | None, url_field: str, metadata_fields: list[str],
                 shard_label: str, **kw):
        super().__init__(path, shard_label=shard_label, **kw)
        self._init(settings, url_field, metadata_fields)
        self.id_field = id_field
        self.root = Path(path).parent / settings.image_root

    def parse(self) -> Iterator[Record | Reject]:
        import pyarrow as pa
        import pyarrow.parquet as pq
        row = 0
        try:
            for batch in pq.ParquetFile(self.path).iter_batches(batch_size=64):
                for obj in batch.to_pylist():
                    row += 1
                    loc = f"{self.shard_label}:{row}"
                    rid = str(obj[self.id_field]) if self.id_field and obj.get(self.id_field) is not None else loc
                    try:
                        yield self._record(rid, obj, lambda es: [_image_ref(e, self.root) for e in es])
                    except RecordError as e:
                        yield Reject(loc, e.reason, f"{self.path} row {row}: {e.detail}")
        except (pa.ArrowException, OSError) as e:
            yield Reject(f"{self.shard_label}:{row + 1}", "corrupt_file",
                         f"{self.path}: unreadable after row {row} ({e}); re-fetch the file")


def tiff_frames(data: bytes) -> list[tuple[bytes | None, str | None]]:
    """Every frame of a multi-page TIFF as a single-frame TIFF of its own (lossless, any mode: CMYK and 16-bit
    frames stay as they are for the image check to normalise), or (None, reason) for a frame that cannot be
    read; frames are checked against the decompression-bomb limit before any pixel is decoded."""
    from PIL import Image, UnidentifiedImageError
    try:
        img = Image.open(io.BytesIO(data))
        n = getattr(img, "n_frames", 1)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        return []
    out = []
    for i in range(n):
        try:
            img.seek(i)
            if img.width * img.height > MAX_PIXELS:
                out.append((None, "decompression_bomb"))
                continue
            buf = io.BytesIO()
            img.copy().save(buf, "TIFF", compression="tiff_deflate")
            out.append((buf.getvalue(), None))
        except (OSError, SyntaxError, ValueError, EOFError):
            out.append((None, "corrupt_image"))
    return out


class WebDatasetInterleavedReader(_Documents, WebDatasetReader):
    def __init__(self, path: Path, *, settings, url_field: str, metadata_fields: list[str], shard_label: str, **kw):
        super().__init__(path, metadata_fields=metadata_fields, shard_label=shard_label, **kw)
        self._init(settings, url_field, metadata_fields)

    def _members(self, key: str, members: dict[str, bytes]):
        frames = None

        def images(entries: list) -> list[tuple[bytes | None, dict]]:
            nonlocal frames
            out = []
            for j, entry in enumerate(entries):
                name = str(entry).lower()
                if isinstance(entry, str) and is_url(entry):
                    out.append((None, {"ref": entry[:300], "problem": "image_not_acquired"}))
                    continue
                named = [m for m in sorted(members) if (m == name or m.startswith(name + "."))
                         and f".{m.rsplit('.', 1)[-1]}" in IMAGE_EXTS]
                if named:
                    out.append((members[named[0]], {"ref": f"{key}.{named[0]}"}))
                    continue
                tiff = next((members[t] for t in TIFF if t in members), None)
                if tiff is not None:
                    frames = tiff_frames(tiff) if frames is None else frames
                    data, problem = frames[j] if j < len(frames) else \
                        (None, "missing_image" if frames else "corrupt_image")   # fewer frames, or no TIFF at all
                    out.append((data, {"ref": f"{key}.tiff#{j}", **({"problem": problem} if problem else {})}))
                    continue
                out.append((None, {"ref": f"{key}.{name}", "problem": "missing_image"}))
            return out
        return images

    def parse(self) -> Iterator[Record | Reject]:
        for item in self._samples():
            if isinstance(item, Reject):
                yield item
                continue
            key, members = item
            loc = f"{self.shard_label}:{key}"
            if "json" not in members:
                yield Reject(loc, "no_document_json", f"{self.path}: sample {key!r} has no .json member with its "
                             f"texts and images lists ({sorted(members)})")
                continue
            try:
                obj = json.loads(members["json"].decode("utf-8"))
                if not isinstance(obj, dict):
                    raise ValueError(f"a JSON {type(obj).__name__}, not an object")
            except (UnicodeDecodeError, ValueError) as e:
                yield Reject(loc, "bad_document_json", f"{self.path}: sample {key!r}: {e}")
                continue
            try:
                yield self._record(key, obj, self._members(key, members))
            except RecordError as e:
                yield Reject(loc, e.reason, f"{self.path}: sample {key!r}: {e.detail}")
