"""The copy of SFT-style documents without reasoning spans (`reasoning:` on a text source).

Each span from the `start` marker to the next `end` marker (both included; an unclosed span runs to
the end of the document) is cut from the normalised text, which is tokenized again and ends with
end-of-document; a document without spans keeps its tokens. Both copies hold the same documents in
the same order, so the trainer can pick either per stage.
"""
from __future__ import annotations

import re

import numpy as np


class ReasoningStripper:
    def __init__(self, tokenizer, eod: int, *, start: str, end: str):
        self.encode, self.eod = tokenizer.encode, eod
        self.span = re.compile(re.escape(start) + r".*?(?:" + re.escape(end) + r"|\Z)", re.DOTALL)

    def __call__(self, text: str, tokens: np.ndarray) -> np.ndarray:
        stripped = self.span.sub("", text)
        if stripped == text:
            return tokens
        ids = self.encode(stripped, add_special_tokens=False).ids
        return np.asarray([*ids, self.eod], dtype=np.int32)
