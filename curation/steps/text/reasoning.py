"""The copy of SFT-style documents without reasoning spans (`reasoning:` on a text source).

Each span from the `start` marker to the next `end` marker (both included; an unclosed span runs to
the end of the document) is cut from the normalised text, which is tokenized again and ends with
end-of-document; a document without spans keeps its tokens. Both copies hold the same documents in
the same order, so the trainer can pick either per stage.
"""
from __future__ import annotations

import re

import numpy as np

from curation.core.record import Record


class ReasoningStripper:
    def __init__(self, tokenizer, *, start: str, end: str):
        self.encode, self.eod = tokenizer.tokenizer.encode, tokenizer.eod
        self.span = re.compile(re.escape(start) + r".*?(?:" + re.escape(end) + r"|\Z)", re.DOTALL)

    def __call__(self, record: Record) -> np.ndarray:
        text = self.span.sub("", record.text)
        if text == record.text:
            return record.tokens
        ids = self.encode(text, add_special_tokens=False).ids
        return np.asarray([*ids, self.eod], dtype=np.int32)
