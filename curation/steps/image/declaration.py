"""The image modality as a recipe sees it (`curation.recipe.registry`): WebDataset tars or Parquet with image
bytes, the `image_folder` acquisition, and `images:` settings instead of text filters."""
from __future__ import annotations

from typing import Literal, cast

from pydantic import Field, model_validator

from curation.recipe.modalities import OnDevice
from curation.recipe.registry import SourceModality

_FORMATS = ("an image source reads WebDataset tars (`input.format: webdataset`) or Parquet with image bytes "
            "(`input.format: parquet` and `image_field`)")


class Images(OnDevice):
    """Image samples: validation, the dedup domain, and how they are tokenized."""
    min_side: int = Field(default=32, ge=1, le=65536)  # shorter images are dropped (`image_too_small`)
    domain: str = "natural"                         # selects the pHash dedup radius (`image_dedup`)
    # pHash input size; null: the domain's (16 for satellite, 32 otherwise; curation.steps.image.phash)
    phash_reduce: int | None = Field(default=None, ge=8, le=512, multiple_of=8)
    # pixels after resizing (tokens ≈ area / 256); at most 4096 × 4096, 65,536 codes per image
    area: int = Field(default=256 * 256, ge=256, le=2**24)
    caption: Literal["before", "after", "none"] = "after"
    # regenerated captions to use on this run (Parquet or JSONL: `id`, `caption`, optional `source`), e.g.
    # a vision-language model's answers to OUT/review/captions_to_regenerate.parquet; re-checked like any
    # caption (curation.steps.image.recaption). Relative to the recipe.
    recaptions: str | None = Field(default=None, min_length=1)
    # codes per encoder batch (one image shape per batch); a checkpoint is written after each batch
    batch_tokens: int = Field(default=16384, ge=1, le=2**22)

    @model_validator(mode="after")
    def _batch_holds_an_image(self):
        if self.batch_tokens < 2 * self.area // 256:
            raise ValueError(f"batch_tokens {self.batch_tokens} cannot hold one image of area {self.area} "
                             f"(about {self.area // 256} codes; allow at least {2 * self.area // 256})")
        return self


def _webdataset(src) -> None:
    if src.input.format == "webdataset" and src.modality not in ("image", "interleaved"):
        raise ValueError("`input.format: webdataset` holds image samples or interleaved documents: set "
                         "`modality: image` or `modality: interleaved`")


def _image_inputs(src) -> None:
    if src.modality == "image" and not (src.input.format == "webdataset" or
                                        (src.input.format == "parquet" and src.input.image_field)):
        raise ValueError(_FORMATS)


def _image_folder(src) -> None:
    if src.acquire is not None and src.acquire.kind == "image_folder" and (
            src.modality != "image" or src.input.format != "webdataset"):
        raise ValueError("`acquire.kind: image_folder` packs images into WebDataset tars: set "
                         "`modality: image` and `input: {format: webdataset, paths: [images-*.tar]}`")


def _no_text_filters(src) -> None:
    if src.modality == "image" and src.filters:
        raise ValueError("image sources take `images:` settings, not text `filters`")


IMAGE = SourceModality(
    name="image",
    formats=("webdataset", "parquet"),
    steps="curation.steps.image.modality:IMAGE",
    settings={"images": Images},
    rules=(_webdataset, _image_inputs, _image_folder, _no_text_filters),
    format_help=_FORMATS,
)


def image_settings(src) -> Images:
    """The `images:` settings of an image or interleaved source, or a text source's conversation images: the recipe's, or the defaults."""
    return cast(Images, src.settings_for("images"))
