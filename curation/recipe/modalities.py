"""Settings of image, audio and interleaved image-text sources, and of SFT sources (conversations, reasoning spans)
(part of the recipe schema)."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from curation.recipe.base import Strict

Device = Literal["cpu", "cuda", "auto"]
Precision = Literal["tf32", "float32", "bfloat16"]


class OnDevice(Strict):
    """Where a source's codec runs (`curation.core.resources`): `device` cpu (unset: the default), cuda (a GPU
    per task; a cluster without GPUs is refused), auto (a GPU when the cluster has one, else the CPU); and
    `precision` on CUDA: tf32 (unset: the default), float32 or bfloat16. A CPU always encodes in float32.
    Unset, neither enters any fingerprint: the CPU float32 encoder every earlier version ran."""
    device: Device | None = None
    precision: Precision | None = None

    @model_validator(mode="after")
    def _precision_needs_a_gpu(self):
        if self.precision is not None and self.device in (None, "cpu"):
            raise ValueError(f"precision {self.precision!r} applies on CUDA; with device "
                             f"{self.device or 'cpu (the default)'} the codec encodes in float32: set "
                             f"`device: cuda` or `auto`, or drop `precision`")
        return self

    def codec_device(self) -> str:
        return self.device or "cpu"

    def codec_precision(self) -> str:
        """The precision on CUDA (the contract: TF32 unless the recipe says otherwise)."""
        return self.precision or "tf32"


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


class Reasoning(Strict):
    """SFT-style data with reasoning spans: the merge also writes `<source>.no_reasoning` (same
    documents, each span from `start` to `end` inclusive removed, then re-tokenized)."""
    start: str = "<think>"
    end: str = "</think>"


class SyntheticTasks(Strict):
    """Synthetic verifiable long-context tasks (Apertus 1.5 section 3.3, `curation.steps.text.longtasks`):
    every document of the source becomes one task example (common-word extraction, document-order
    reconstruction or artificial needles, drawn by `weights`) injected as Q&A turns in the chat template.
    Documents shorter than `hard_below_words` words go to the hard bucket (10 CWE questions, 8 sections,
    4 needles), the rest to the easy one (5, 4, 2). `seed` with the document id decides every draw."""
    weights: dict[Literal["cwe", "docorder", "needles"], float] = {"cwe": 0.5, "docorder": 0.3, "needles": 0.2}
    hard_below_words: int = Field(default=1000, ge=1, le=10**9)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)

    @field_validator("weights")
    @classmethod
    def _positive(cls, w: dict) -> dict:
        if any(v < 0 for v in w.values()) or not any(v > 0 for v in w.values()):
            raise ValueError(f"weights must be >= 0 with at least one > 0, got {w}")
        return dict(sorted(w.items()))


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


class Conversations(Strict):
    """Chat/SFT rows rendered in the Apertus 1.5 chat template (`curation.steps.conversation.turns`, `.chat`):
    `messages_field` holds OpenAI (`role`/`content`) or ShareGPT (`from`/`value`) messages; the optional
    row fields hold the tool declarations (OpenAI `tools`, a list or its JSON string), a system prompt,
    and the images/audio clips that bare placeholders (`<image>`, `{"type": "image"}`) refer to, in order."""
    messages_field: str = "messages"
    tools_field: str | None = "tools"
    system_field: str | None = "system"
    images_field: str | None = "images"
    audios_field: str | None = "audios"
    # placeholders of these kinds expand into the media's token blocks at tokenization: the source's tokenize
    # step runs the codecs (`image_tokenizer` / `audio_tokenizer`; the source's `images:` and `audio:` settings
    # apply). A conversation holding media of another kind is quarantined (`unexpanded_media`). Empty: the
    # placeholders stay single tokens (and torch is never imported for the source).
    expand_media: list[Literal["image", "audio"]] = []
    # the folder media paths resolve against, relative to the input file's folder; a path may not leave it
    media_root: str = "."

    @field_validator("expand_media")
    @classmethod
    def _kinds_once(cls, kinds: list[str]) -> list[str]:
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"lists a kind twice: {kinds}")
        return sorted(kinds)


def check_media_settings(src) -> None:
    """A source's interleaved, image and audio settings fit its modality (`Source` validates with it)."""
    if src.modality == "interleaved":
        if src.input.format not in ("parquet", "webdataset"):
            raise ValueError("an interleaved source reads Parquet rows (`input.format: parquet`) or WebDataset "
                             "tars (`input.format: webdataset`) with parallel texts/images lists")
        if src.images is not None and src.images.caption != "after":   # (the default: a task's spec dumps it)
            raise ValueError("`images.caption` does not apply to interleaved documents: their text segments "
                             "stand where the document puts them")
    elif src.interleaved is not None:
        raise ValueError("`interleaved:` settings apply to `modality: interleaved` sources")
    form = src.input.conversation_form()
    for kind, given in (("image", src.images), ("audio", src.audio)):
        if src.modality == "text" and given is not None and kind not in (form.expand_media if form else []):
            raise ValueError(f"`{'images' if kind == 'image' else kind}:` settings of a text source apply only to "
                             f"conversations that expand them (`input.conversations.expand_media: [{kind}]`)")
