"""The text modality as a recipe sees it (`curation.recipe.registry`): the formats it reads, and the rules that
keep text-only settings (web formats, reasoning spans, synthetic tasks, conversation media) on text sources."""
from __future__ import annotations

from curation.recipe.registry import SourceModality


def _web_formats(src) -> None:
    if src.input.format in ("warc", "html") and src.modality != "text":
        raise ValueError(f"`input.format: {src.input.format}` yields text documents: use `modality: text`")


def _synthetic_tasks(src) -> None:
    if src.synthetic_tasks is not None and (src.modality != "text" or src.input.conversation_form()
                                            is not None or src.reasoning is not None):
        raise ValueError("`synthetic_tasks` applies to text sources of plain documents (no `conversations`, "
                         "no `reasoning`): each document becomes one task conversation")


def _reasoning(src) -> None:
    if src.reasoning is not None and src.modality != "text":
        raise ValueError("`reasoning` applies to text sources (SFT conversations with reasoning spans)")


def _media_settings(src) -> None:
    """`images:` and `audio:` on a text source: the settings of the conversation media it expands."""
    form = src.input.conversation_form()
    for kind, key in (("image", "images"), ("audio", "audio")):
        if src.modality == "text" and src.gives(key) and kind not in (form.expand_media if form else []):
            raise ValueError(f"`{key}:` settings of a text source apply only to "
                             f"conversations that expand them (`input.conversations.expand_media: [{kind}]`)")


TEXT = SourceModality(
    name="text",
    formats=("jsonl", "parquet", "warc", "html"),
    steps="curation.steps.text.modality:TEXT",
    borrows=("images", "audio"),   # the settings of the conversation media it expands
    rules=(_web_formats, _synthetic_tasks, _reasoning, _media_settings),
    minhash=True,
)
