"""The interleaved image-text modality as a recipe sees it (`curation.recipe.registry`): Parquet rows or
WebDataset tars of parallel texts/images lists, with `interleaved:` settings (and `images:` for its images)."""
from __future__ import annotations

from curation.recipe.registry import SourceModality

_FORMATS = ("an interleaved source reads Parquet rows (`input.format: parquet`) or WebDataset "
            "tars (`input.format: webdataset`) with parallel texts/images lists")


def _interleaved(src) -> None:
    if src.modality == "interleaved":
        if src.input.format not in ("parquet", "webdataset"):
            raise ValueError(_FORMATS)
        if src.images is not None and src.images.caption != "after":   # (the default: a task's spec dumps it)
            raise ValueError("`images.caption` does not apply to interleaved documents: their text segments "
                             "stand where the document puts them")
    elif src.interleaved is not None:
        raise ValueError("`interleaved:` settings apply to `modality: interleaved` sources")


INTERLEAVED = SourceModality(
    name="interleaved",
    formats=("parquet", "webdataset"),
    steps="curation.steps.interleaved.modality:INTERLEAVED",
    rules=(_interleaved,),
    format_help=_FORMATS,
    minhash=True,   # its text segments, as one document
)
