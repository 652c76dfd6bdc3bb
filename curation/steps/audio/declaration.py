"""The audio modality as a recipe sees it (`curation.recipe.registry`): a clip manifest (`input.format: audio`,
local clips only), the `audio_folder` acquisition, and `audio:` settings instead of text filters."""
from __future__ import annotations

from curation.recipe.registry import SourceModality

_MANIFEST = ("an audio source reads a clip manifest: set both `modality: audio` and "
             "`input: {format: audio, paths: [manifest.jsonl]}`")


def _manifest(src) -> None:
    if (src.input.format == "audio") != (src.modality == "audio"):
        raise ValueError(_MANIFEST)


def _audio_folder(src) -> None:
    if src.acquire is not None and src.acquire.kind == "audio_folder" and src.modality != "audio":
        raise ValueError("`acquire.kind: audio_folder` writes a clip manifest: set `modality: audio` and "
                         "`input: {format: audio, paths: [clips.jsonl], id_field: id}`")


def _no_text_filters(src) -> None:
    if src.modality == "audio" and src.filters:
        raise ValueError("audio sources take `audio:` settings, not text `filters`")


AUDIO = SourceModality(
    name="audio",
    formats=("audio",),
    steps="curation.steps.audio.modality:AUDIO",
    rules=(_manifest, _audio_folder, _no_text_filters),
    format_help=_MANIFEST,
    url_inputs=False,   # a manifest names local clip files
)
