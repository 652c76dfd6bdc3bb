"""The image modality: WebDataset tars or Parquet rows of images with optional captions, validated,
pHashed and encoded with the IBQ codec (`curation.steps.image.tokenize`). Flagged captions go to a work
list and regenerated ones come back through `images.recaptions` (`curation.steps.image.recaption`)."""
from __future__ import annotations

from functools import partial
from pathlib import Path

import pyarrow as pa

from curation.core.hashing import content_hash
from curation.core.vocab import Vocabulary
from curation.steps.base import StepSpec
from curation.steps.device import device_resources, device_settings, placed
from curation.steps.encode import one_thread
from curation.steps.image.declaration import image_settings
from curation.steps.image.read import ImageCheck, ParquetImageReader, WebDatasetReader
from curation.steps.image.recaption import check_file
from curation.steps.modality import LedgerTable, Modality


def _reader(src, path: Path, **kw):
    if src.input.format == "parquet":
        return ParquetImageReader(path, image_field=src.input.image_field, caption_field=src.input.text_field,
                                  id_field=src.input.id_field, metadata_fields=src.input.metadata_fields, **kw)
    return WebDatasetReader(path, metadata_fields=src.input.metadata_fields, **kw)


def _reader_settings(src) -> dict:
    i = src.input
    return {"format": i.format, "text_field": i.text_field, "id_field": i.id_field,
            "metadata_fields": i.metadata_fields, "image_field": i.image_field}


def _checks(src, path: Path, base_dir: Path) -> list[StepSpec]:
    im = image_settings(src)
    settings = {"min_side": im.min_side, "domain": im.domain, "phash_reduce": im.phash_reduce}
    if im.recaptions is None:
        return [StepSpec("image_check", settings, partial(ImageCheck, **settings))]
    # the file's content, not its path, is what the step reads: a new file re-runs the check, a moved one does not
    recaptions = Path(im.recaptions) if Path(im.recaptions).is_absolute() else (base_dir / im.recaptions).resolve()
    digest = check_file(recaptions, src.name)
    return [StepSpec("image_check", {**settings, "recaptions_sha256": digest},
                     partial(ImageCheck, **settings, recaptions=str(recaptions), recaptions_sha256=digest))]


def _encoder(src, run: dict) -> StepSpec:
    im = image_settings(src)
    settings = {"area": im.area, "caption": im.caption, "batch_tokens": im.batch_tokens}

    def build(**kw):
        # torch: only image runs need it
        from curation.steps.codecs import load_codec
        from curation.steps.image.codec import IBQEncoder
        from curation.steps.image.tokenize import ImageTokenizer
        one_thread()
        step = ImageTokenizer(Vocabulary.cached(run["vocab"]), load_codec(run["image_codec"], IBQEncoder), **settings,
                              checkpoint=kw.get("checkpoint"), source=kw["source"], sink=kw["sink"])
        return placed(step, {"codec": ("image", im)})
    return StepSpec("tokenize", {"vocab": run["vocab_sha256"], "tokenizer": run["tokenizer_sha256"],
                                 "codec": run["image_codec_sha256"], **settings, **device_settings(im)}, build,
                    device_resources(im))


def _ledger_row(run: str, src, totals: dict, counts: dict) -> dict:
    im = image_settings(src)
    return {"run": run, "source": src.name, "category": src.category, "domain": im.domain,
            "samples": counts["documents"], "image_tokens": counts["image"], "paired_text_tokens": counts["text"],
            "caption": im.caption, "area": im.area, "batches": int(totals["tokenize"].notes.get("batches", 0)) if "tokenize" in totals else 0}


IMAGES_TABLE = pa.schema([("run", pa.string()), ("source", pa.string()), ("category", pa.string()),
                          ("domain", pa.string()), ("samples", pa.int64()), ("image_tokens", pa.int64()),
                          ("paired_text_tokens", pa.int64()), ("caption", pa.string()), ("area", pa.int64()),
                          ("batches", pa.int64())])

IMAGE = Modality(
    name="image",
    extra_columns=[("image", pa.binary())],
    content_hash=lambda r: content_hash(r.payload["image"]),
    extra_row=lambda r: {"image": r.payload["image"]},
    reader=_reader,
    reader_settings=_reader_settings,
    checks=_checks,
    encoder=_encoder,
    outputs=lambda src: ("",),
    record_columns=("image",),
    codec="image_tokenizer",
    ledger_table=LedgerTable("images", IMAGES_TABLE, _ledger_row),
)
