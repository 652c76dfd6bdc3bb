"""How a recipe source is read and acquired: the `input:` block (formats, fields, conversations, bounds
on records and decompression, web extraction) and the `acquire:` block (part of the recipe schema)."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

import curation.recipe.registry as registry
from curation.recipe.base import Strict
from curation.recipe.modalities import Conversations
from curation.recipe.reading import Decompression, Extract, Pages


class Input(Strict):
    # `parquet` reads .parquet and .arrow files (Hugging Face dataset snapshots); `webdataset` reads
    # tars of image samples (key.jpg + key.txt/key.json), for `modality: image`, or of interleaved documents
    # (key.json with texts/images lists + image members), for `modality: interleaved`; `audio` reads a JSONL
    # manifest of clips (see `Audio`), for `modality: audio`; `warc` reads WARC/WET files (.warc,
    # .warc.gz; HTML responses reduced to main text, WET conversions as they are) and `html` reads
    # pages (.html, .html.gz, tars of them; see `Pages`), both with `extract` settings
    # (the formats of the registered modalities, `curation.recipe.registry`; a source's modality says which it reads)
    format: str = "jsonl"
    # globs relative to the recipe, or to `<out>/raw/<source>/` when the source has `acquire:`
    paths: list[str] = Field(min_length=1)
    text_field: str = "text"          # for image sources: the caption field (optional)
    id_field: str | None = None       # html: a sidecar/index field; warc: none (WARC-Record-ID is the id)
    metadata_fields: list[str] = []   # warc: extra WARC header names to keep; html: sidecar/index fields
    image_field: str | None = None    # Parquet image sources: bytes, or a {bytes, path} struct (Hugging Face)
    # folders (relative to the recipe, or absolute) beyond the source's input tree that its files may
    # resolve into: links in an image/audio folder, `..` or absolute clip-manifest paths
    # (curation.core.contain); anything else outside is refused as link_/path_outside_input
    allow_roots: list[str] = []
    # SFT conversations in the chat template (role, tool and thinking markers, media placeholders), so a
    # trainer can derive its loss mask from the markers; without it a list in `text_field` is joined as plain text
    conversations: Conversations | None = None
    turn_roles: bool = False          # earlier spelling: `conversations` with `messages_field: <text_field>`
    # a longer line, WARC payload or page is quarantined (`record_too_large`) without being held in memory
    max_record_bytes: int = Field(default=32 * 2**20, ge=1024, le=2**31)
    decompression: Decompression = Decompression()
    extract: Extract | None = None    # warc/html only; default `Extract()`
    pages: Pages | None = None        # html only; default `Pages()`

    @field_validator("format")
    @classmethod
    def _registered_format(cls, value: str) -> str:
        if value not in (known := registry.formats()):
            raise ValueError(f"unknown input format {value!r}; the registered modalities read "
                             f"{', '.join(known)}")
        return value

    @model_validator(mode="after")
    def _web_settings(self):
        web = self.format in ("warc", "html")
        for key in ("extract", "pages") if not web else ():
            if getattr(self, key) is not None:
                raise ValueError(f"`input.{key}` applies to `format: warc` or `html`, not {self.format!r}")
        if self.pages is not None and self.format != "html":
            raise ValueError("`input.pages` applies to `format: html` (sidecars and tar indexes of pages)")
        # compared with the defaults (not `model_fields_set`): a plan hands tasks the full dump of a source
        for key, default in (("text_field", "text"), ("turn_roles", False), ("image_field", None)) if web else ():
            if getattr(self, key) != default:
                raise ValueError(f"`input.{key}` does not apply to `format: {self.format}`: the text is the page's "
                                 f"main text")
        if self.format == "warc" and self.id_field is not None:
            raise ValueError("`input.id_field` does not apply to `format: warc`: records keep their WARC-Record-ID")
        if web and self.conversations is not None:
            raise ValueError(f"`input.conversations` does not apply to `format: {self.format}`")
        return self

    def allowed_roots(self, base_dir: Path) -> list[Path]:
        """`allow_roots` as paths (relative ones are relative to the recipe's folder, `base_dir`)."""
        return [Path(r) if Path(r).is_absolute() else Path(base_dir) / r for r in self.allow_roots]

    def conversation_form(self) -> Conversations | None:
        if self.conversations is None and self.turn_roles:
            return Conversations(messages_field=self.text_field)
        return self.conversations

    @model_validator(mode="after")
    def _conversations(self):
        if self.conversations is not None and (self.turn_roles or self.format not in ("jsonl", "parquet")):
            raise ValueError("`conversations` reads jsonl or parquet rows and replaces `turn_roles`; keep one")
        return self


class Acquire(Strict):
    """Bring a source into `<out>/raw/<source>/` before it is read (see `curation.acquire.sources`).

    `archive`: a tar/zip file, extracted safely. `fsspec`: files matching an fsspec URL glob
    (`file://`, `memory://`, `s3://...` with its package installed), copied. `urls`: a URL list
    (`.txt`, one per line, or `.jsonl` with `url_field` and metadata), downloaded behind the network
    guard; text sources get `documents.jsonl` (HTML reduced to text with trafilatura), image sources
    WebDataset tars `images-NNNNN.tar`. `image_folder`: a local folder of images (sidecar `.txt`
    captions, `.json` fields) packed into those tars. `audio_folder`: a local folder of audio files
    (sidecar `.txt` transcripts) copied with a clip manifest `clips.jsonl`."""
    kind: Literal["archive", "fsspec", "urls", "image_folder", "audio_folder"]
    path: str
    url_field: str = "url"
    timeout_s: float = Field(default=10.0, gt=0, le=3600)
    max_retries: int = Field(default=3, ge=0, le=10)
    per_host: int = Field(default=2, ge=1, le=64)
    host_interval_s: float = Field(default=0.0, ge=0, le=3600)
    workers: int = Field(default=8, ge=1, le=256)
    # one download is read into memory whole, so it is bounded by what one process may hold
    max_bytes: int = Field(default=64 * 2**20, ge=1, le=2**32)
    max_archive_bytes: int = Field(default=20 * 2**30, ge=1, le=2**44)
