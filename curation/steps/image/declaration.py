"""The image modality as a recipe sees it (`curation.recipe.registry`): WebDataset tars or Parquet with image
bytes, the `image_folder` acquisition, and `images:` settings instead of text filters."""
from __future__ import annotations

from curation.recipe.registry import SourceModality

_FORMATS = ("an image source reads WebDataset tars (`input.format: webdataset`) or Parquet with image bytes "
            "(`input.format: parquet` and `image_field`)")


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
    rules=(_webdataset, _image_inputs, _image_folder, _no_text_filters),
    format_help=_FORMATS,
)
