"""The copy of SFT-style documents without reasoning spans (`reasoning:` on a text source).

- A conversation (`input.conversations`) is rendered again in the chat template without its thinking
  spans (`TextTokenizer.conversation_tokens(record, thinking=False)`): every marker stays a marker, the
  developer block says `Deliberation: disabled`, and no segment separator reaches the tokens. One without
  thinking spans keeps its tokens.
- A plain document: each span from the `start` marker to the next `end` marker (both included; an
  unclosed span runs to the end of the document) is cut from the normalised text, which is tokenized
  again and ends with end-of-document; a document without spans keeps its tokens.

Both copies hold the same documents in the same order, so the trainer can pick either per stage.
"""
from __future__ import annotations

import re

import numpy as np

from curation.core.record import Record
from curation.steps.conversation.turns import is_conversation


class ReasoningStripper:
    def __init__(self, tokenizer, *, start: str, end: str):
        """`tokenizer`: the `TextTokenizer` that tokenized the records (it renders conversations)."""
        self.tokenizer = tokenizer
        self.encode, self.eod = tokenizer.tokenizer.encode, tokenizer.eod
        self.span = re.compile(re.escape(start) + r".*?(?:" + re.escape(end) + r"|\Z)", re.DOTALL)

    def __call__(self, record: Record, tokens: np.ndarray) -> np.ndarray:
        """The tokens of `record` (`tokens`, as the tokenizer wrote them) without its reasoning spans."""
        if is_conversation(record):
            chat = record.meta.get("chat")
            if chat is not None and not any(it[0] == "think_open" for _, items in chat["turns"] for it in items):
                return tokens
            return self.tokenizer.conversation_tokens(record, thinking=False)
        text = self.span.sub("", record.text)
        if text == record.text:
            return tokens
        ids = self.encode(text, add_special_tokens=False).ids
        return np.asarray([*ids, self.eod], dtype=np.int32)
