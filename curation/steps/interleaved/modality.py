"""The interleaved modality: image-text documents (OBELICS- and MINT-1T-style parallel lists) read from Parquet
or WebDataset, checked as text and as images, deduplicated and decontaminated in both parts, and tokenized
in reading order (`curation.steps.interleaved.tokenize`).

process chain: read → licence → [robots opt-out by page URL] → normalize → the source's text `filters` on
the joined text → image_check (every image validated and pHashed; `curation.steps.interleaved.check`)
→ [pii]. Processed shards keep the images as a list column `media` beside the joined text; `meta` holds
the layout and per-image metadata. The corpus-wide phases cover the text part (exact dedup of text and
image bytes, MinHash, n-gram decontamination) and every image (pHash dedup, image decontamination);
the ledger table `interleaved` counts documents, images, image and text tokens, and images removed by
reason.
"""
from __future__ import annotations

import hashlib
from functools import partial
from pathlib import Path

import pyarrow as pa

from curation.core.contain import name_digests
from curation.core.hashing import content_hash, fingerprint
from curation.core.vocab import Vocabulary
from curation.steps.base import StepSpec, settings_of
from curation.steps.conversation.media_refs import is_url
from curation.steps.device import device_resources, device_settings, placed
from curation.steps.encode import one_thread
from curation.steps.image.declaration import image_settings
from curation.steps.interleaved.check import LISTED_WITH_DOCUMENT, WITH_DOCUMENT, InterleavedCheck
from curation.steps.interleaved.declaration import interleaved_settings
from curation.steps.interleaved.read import (
    ParquetInterleavedReader,
    WebDatasetInterleavedReader,
)
from curation.steps.modality import LedgerTable, Modality
from curation.steps.text.modality import filter_spec
from curation.steps.text.normalize import Normalize


def _reader(src, path: Path, **kw):
    common = {"settings": interleaved_settings(src), "url_field": src.url_field,
              "metadata_fields": src.input.metadata_fields}
    if src.input.format == "parquet":
        return ParquetInterleavedReader(path, id_field=src.input.id_field, **common, **kw)
    return WebDatasetInterleavedReader(path, **common, **kw)


def _reader_settings(src) -> dict:
    i = src.input
    return {"format": i.format, "id_field": i.id_field, "metadata_fields": i.metadata_fields,
            "url_field": src.url_field, **interleaved_settings(src).model_dump(mode="json")}


def _checks(src, path: Path, base_dir: Path) -> list[StepSpec]:
    n, im, il = src.normalize, image_settings(src), interleaved_settings(src)
    image = {"min_side": im.min_side, "domain": im.domain, "phash_reduce": im.phash_reduce,
             "min_images": il.min_images, "on_bad_image": il.on_bad_image}
    return [StepSpec("normalize", settings_of(n), partial(Normalize, nfc=n.nfc, ftfy=n.ftfy)),
            *[filter_spec(f, base_dir) for f in src.filters],
            StepSpec("image_check", image, partial(InterleavedCheck, **image))]


def image_files(src, path: Path, base_dir: Path | None = None) -> str | None:
    """Content hash of the local image files a Parquet shard's rows refer to by path (for the process node's
    fingerprint; none outside the image root and `input.allow_roots` is read); None for WebDataset shards,
    whose images are inside the tar."""
    if src.input.format != "parquet":
        return None
    import pyarrow.parquet as pq
    il = interleaved_settings(src)
    root = Path(path).parent / il.image_root
    refs = set()
    pf = pq.ParquetFile(path)
    # only the string leaves of the images column (paths, URLs), never the image bytes
    leaves = [c.path for c in (pf.schema.column(i) for i in range(len(pf.schema)))
              if c.path.split(".")[0] == il.images_field and c.physical_type == "BYTE_ARRAY"
              and c.logical_type.type == "STRING"]
    if not leaves:
        return None   # bytes only (or no such column: the reader quarantines every row)
    for batch in pf.iter_batches(batch_size=1024, columns=leaves):
        for entries in batch.column(0).to_pylist():
            for e in entries or []:
                ref = e.get("path") if isinstance(e, dict) else e
                if isinstance(ref, str) and ref.strip() and not is_url(ref) and not ref.startswith("data:"):
                    refs.add(ref)
    return fingerprint(name_digests(refs, root, src.input.allowed_roots(base_dir) if base_dir else ()))


def _encoder(src, run: dict) -> StepSpec:
    im, il = image_settings(src), interleaved_settings(src)
    settings = {"area": im.area, "batch_tokens": im.batch_tokens, "min_images": il.min_images}

    def build(**kw):
        # torch: only runs with image codecs need it
        from curation.steps.codecs import load_codec
        from curation.steps.image.codec import IBQEncoder
        from curation.steps.interleaved.tokenize import InterleavedTokenizer
        one_thread()
        step = InterleavedTokenizer(Vocabulary.cached(run["vocab"]), load_codec(run["image_codec"], IBQEncoder),
                                    **settings, checkpoint=kw.get("checkpoint"), source=kw["source"], sink=kw["sink"])
        return placed(step, {"codec": ("image", im)})
    return StepSpec("tokenize", {"vocab": run["vocab_sha256"], "tokenizer": run["tokenizer_sha256"],
                                 "codec": run["image_codec_sha256"], **settings, **device_settings(im)}, build,
                    device_resources(im))


def document_hash(record) -> bytes:
    """What exact dedup compares: the joined text and every image's bytes, in order."""
    h = hashlib.blake2b(record.text.encode("utf-8"), digest_size=16)
    for m in record.payload.get("media") or []:
        h.update(content_hash(m))
    return h.digest()


DROPPED = "images_dropped:"


def _ledger_row(run: str, src, totals: dict, counts: dict) -> dict:
    """The tokenizer's counts over the documents it wrote, plus the images of the documents the image
    check dropped whole (`curation.steps.interleaved.check`: each image by its own reason), so that
    images_listed = images + images_dropped over every document read."""
    n = totals["tokenize"].notes if "tokenize" in totals else {}
    c = totals["image_check"].notes if "image_check" in totals else {}
    g = lambda k: int(n.get(k, 0))  # noqa: E731
    dropped: dict[str, int] = {}
    for notes, prefix in ((n, DROPPED), (c, WITH_DOCUMENT)):
        for k, v in notes.items():
            if k.startswith(prefix):
                dropped[k[len(prefix):]] = dropped.get(k[len(prefix):], 0) + int(v)
    return {"run": run, "source": src.name, "category": src.category, "domain": image_settings(src).domain,
            "documents": counts["documents"], "images": g("images"),
            "images_listed": g("images_listed") + int(c.get(LISTED_WITH_DOCUMENT, 0)),
            "images_dropped": sum(dropped.values()),
            "images_dropped_by_reason": sorted(dropped.items()),
            "image_tokens": counts["image"], "text_tokens": counts["text"], "image_codes": g("image_codes"),
            "text_runs": g("text_runs"), "area": image_settings(src).area, "batches": g("batches")}


INTERLEAVED_TABLE = pa.schema([
    ("run", pa.string()), ("source", pa.string()), ("category", pa.string()), ("domain", pa.string()),
    ("documents", pa.int64()), ("images", pa.int64()), ("images_listed", pa.int64()), ("images_dropped", pa.int64()),
    ("images_dropped_by_reason", pa.map_(pa.string(), pa.int64())), ("image_tokens", pa.int64()),
    ("text_tokens", pa.int64()), ("image_codes", pa.int64()), ("text_runs", pa.int64()), ("area", pa.int64()),
    ("batches", pa.int64())])

INTERLEAVED = Modality(
    name="interleaved",
    extra_columns=[("media", pa.list_(pa.binary()))],
    content_hash=document_hash,
    extra_row=lambda r: {"media": r.payload.get("media")},
    reader=_reader,
    reader_settings=_reader_settings,
    checks=_checks,
    encoder=_encoder,
    outputs=lambda src: ("",),
    record_columns=("media",),
    codec="image_tokenizer",
    codecs_of=lambda src: {"image": "image_tokenizer"},
    family="image",
    ledger_table=LedgerTable("interleaved", INTERLEAVED_TABLE, _ledger_row),
    input_files=image_files,
)
