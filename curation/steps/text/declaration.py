"""The text modality as a recipe sees it (`curation.recipe.registry`): the formats it reads, its own source
settings (`reasoning:` spans, `synthetic_tasks:`), and the rules that keep web formats and conversation media
settings on text sources."""
from __future__ import annotations

from typing import Literal, cast

from pydantic import Field, field_validator

from curation.recipe.base import Strict
from curation.recipe.registry import SourceModality


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


def reasoning_settings(src) -> Reasoning | None:
    """A source's `reasoning:` settings, or None: without them it has no reasoning spans (and no
    `.no_reasoning` copy)."""
    return cast(Reasoning, src.settings_for("reasoning")) if src.gives("reasoning") else None


def synthetic_tasks(src) -> SyntheticTasks | None:
    """A source's `synthetic_tasks:` settings, or None: its documents stay documents."""
    return cast(SyntheticTasks, src.settings_for("synthetic_tasks")) if src.gives("synthetic_tasks") else None


def _web_formats(src) -> None:
    if src.input.format in ("warc", "html") and src.modality != "text":
        raise ValueError(f"`input.format: {src.input.format}` yields text documents: use `modality: text`")


def _synthetic_tasks(src) -> None:
    if src.gives("synthetic_tasks") and (src.input.conversation_form() is not None or src.gives("reasoning")):
        raise ValueError("`synthetic_tasks` applies to text sources of plain documents (no `conversations`, "
                         "no `reasoning`): each document becomes one task conversation")


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
    settings={"reasoning": Reasoning, "synthetic_tasks": SyntheticTasks},
    borrows=("images", "audio"),   # the settings of the conversation media it expands
    rules=(_web_formats, _synthetic_tasks, _media_settings),
    minhash=True,
)
