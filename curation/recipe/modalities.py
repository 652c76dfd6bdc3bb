"""Settings that more than one modality's declaration builds on (`OnDevice`: where a codec runs), and the
`input.conversations` form of the input block (`curation.recipe.inputs`). A modality's own settings (text's
`reasoning:` and `synthetic_tasks:`, `images:`, `audio:`, `interleaved:`) live with it, in
`curation.steps.<name>.declaration`."""
from __future__ import annotations

from typing import Literal

from pydantic import field_validator, model_validator

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

