"""The audio modality as a recipe sees it (`curation.recipe.registry`): a clip manifest (`input.format: audio`,
local clips only), the `audio_folder` acquisition, and `audio:` settings instead of text filters."""
from __future__ import annotations

from typing import Annotated, cast

from pydantic import Field, model_validator

from curation.recipe.modalities import OnDevice
from curation.recipe.registry import SourceModality

_MANIFEST = ("an audio source reads a clip manifest: set both `modality: audio` and "
             "`input: {format: audio, paths: [manifest.jsonl]}`")



_Rate = Annotated[float, Field(ge=0, le=1000)]


class Audio(OnDevice):
    """Audio clips: the manifest's fields, the checks of ingest, and how clips are tokenized.

    A manifest line names one clip: `audio_field` (a file relative to the manifest), and optionally
    the transcript (`input.text_field`), `recording_field` + `order_field` (clips of one recording in
    order: consecutive transcribed clips are interleaved with their transcripts), `start_field` /
    `end_field` (a segment of the file, in seconds), `speaker_field`, `language_field`, and
    `translation_field` (the speech translated into `translation_language`): each clip with one also
    becomes a translation pair (audio, `speech_translate`, the translation's text;
    `curation.steps.audio.interleave`). The sequence does not name the target language, so a source
    declares its one target language, and a clip whose `translation_language_field` names another is
    quarantined (`translation_language_mismatch`)."""
    audio_field: str = "audio"
    recording_field: str = "recording"
    order_field: str = "order"
    start_field: str = "start"
    end_field: str = "end"
    speaker_field: str = "speaker"
    language_field: str = "language"
    translation_field: str | None = None       # null: the source has no translation pairs
    translation_language: str | None = Field(default=None, min_length=1)   # the target language, e.g. "en"
    translation_language_field: str = "translation_language"
    # a clip (or segment) is decoded whole before these checks, so an hour is the most a setting may allow
    min_seconds: float = Field(default=0.5, gt=0, le=3600)   # shorter clips: quarantined (`too_short`)
    max_seconds: float = Field(default=120.0, gt=0, le=3600)  # longer clips: quarantined (`too_long`)
    silence_dbfs: float = Field(default=-50.0, ge=-200, le=0)  # a clip whose peak is below this is `silent`
    # transcript length per second of audio outside [min, max] characters: `transcript_mismatch`
    chars_per_second: tuple[_Rate, _Rate] = (4.0, 30.0)
    max_batch_seconds: float = Field(default=120.0, gt=0, le=3600)   # total padded audio per encoder batch
    interleave: bool = True           # consecutive transcribed clips → interleaved speech-text sequences
    # sequences up to this many tokens (eod included) form the source's stage-2 pool, longer ones its
    # long-context pool (`<source>.long_context`, which long-context stages draw from); Apertus 1.5: 8,192
    stage2_max_tokens: int = Field(default=8192, ge=16, le=2**20)
    # near duplicates: spectral-fingerprint bit error rate over 1.5 s or more (stricter for shorter
    # overlaps, see curation.steps.audio.fingerprint); null: exact duplicates only
    near_dup_ber: float | None = Field(default=0.35, ge=0, le=0.5)

    @model_validator(mode="after")
    def _ranges(self):
        if self.min_seconds > self.max_seconds:
            raise ValueError(f"min_seconds ({self.min_seconds}) must be <= max_seconds ({self.max_seconds})")
        if self.chars_per_second[0] > self.chars_per_second[1]:
            raise ValueError(f"chars_per_second must be [min, max], got {list(self.chars_per_second)}")
        if self.translation_field is not None and self.translation_language is None:
            raise ValueError("translation_field needs translation_language: the one language this source's "
                             "translations are in (translation pairs do not name it; put each target language "
                             "of a corpus in its own source)")
        return self


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
    settings={"audio": Audio},
    rules=(_manifest, _audio_folder, _no_text_filters),
    format_help=_MANIFEST,
    url_inputs=False,   # a manifest names local clip files
)


def audio_settings(src) -> Audio:
    """The `audio:` settings of an audio source, or a text source's conversation clips: the recipe's, or the defaults."""
    return cast(Audio, src.settings_for("audio"))
