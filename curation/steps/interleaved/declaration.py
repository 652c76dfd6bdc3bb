"""The interleaved image-text modality as a recipe sees it (`curation.recipe.registry`): Parquet rows or
WebDataset tars of parallel texts/images lists, with `interleaved:` settings (and `images:` for its images)."""
from __future__ import annotations

from typing import Literal, cast

from pydantic import Field, model_validator

from curation.recipe.base import Strict
from curation.recipe.registry import SourceModality

_FORMATS = ("an interleaved source reads Parquet rows (`input.format: parquet`) or WebDataset "
            "tars (`input.format: webdataset`) with parallel texts/images lists")


class Interleaved(Strict):
    """Interleaved image-text documents (`modality: interleaved`): each row or sample holds the parallel lists
    `texts_field` and `images_field` in reading order, with exactly one of the two non-null at every position
    (the OBELICS and MINT-1T layout; see `curation.steps.interleaved.read`). Image checks, the dedup domain and
    tokenization come from the source's `images:` settings (`caption` does not apply).

    A bad image (undecodable, too small, not acquired, missing) is removed from its document and counted by
    reason (`on_bad_image: drop_image`), or removes the document with the image's reason (`drop_document`); a
    document left with fewer than `min_images` images is dropped (`too_few_images`)."""
    texts_field: str = "texts"
    images_field: str = "images"
    # a JSON object (or its string, as OBELICS' `general_metadata`) whose `url` is the page URL, used when the
    # row has no `url_field` of its own (opt-out and URL dedup read the page URL)
    document_field: str | None = "general_metadata"
    # where image references that are paths resolve, relative to the input file's folder (may not leave it)
    image_root: str = "."
    min_images: int = Field(default=1, ge=0, le=4096)
    max_images: int = Field(default=256, ge=1, le=4096)   # a document listing more is quarantined
    on_bad_image: Literal["drop_image", "drop_document"] = "drop_image"

    @model_validator(mode="after")
    def _bounds(self):
        if self.min_images > self.max_images:
            raise ValueError(f"min_images ({self.min_images}) must be <= max_images ({self.max_images})")
        if self.texts_field == self.images_field:
            raise ValueError("texts_field and images_field must name different fields")
        return self


def _interleaved(src) -> None:
    if src.modality == "interleaved":
        if src.input.format not in ("parquet", "webdataset"):
            raise ValueError(_FORMATS)
        if src.gives("images") and src.settings_for("images").caption != "after":   # (the default: a spec dumps it)
            raise ValueError("`images.caption` does not apply to interleaved documents: their text segments "
                             "stand where the document puts them")


INTERLEAVED = SourceModality(
    name="interleaved",
    formats=("parquet", "webdataset"),
    steps="curation.steps.interleaved.modality:INTERLEAVED",
    settings={"interleaved": Interleaved},
    borrows=("images",),   # its images are checked, deduplicated and tokenized by them
    rules=(_interleaved,),
    format_help=_FORMATS,
    minhash=True,   # its text segments, as one document
)


def interleaved_settings(src) -> Interleaved:
    """The `interleaved:` settings of an interleaved source: the recipe's, or the defaults."""
    return cast(Interleaved, src.settings_for("interleaved"))
