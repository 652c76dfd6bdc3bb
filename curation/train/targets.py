"""Which labels are training targets (Apertus 1.5 §3.2), and the Goldfish loss's drop mask.

- Stage targets: `all` (stage 1: text, image and audio codes and their structure markers) or `text`
  (later stages: text ids only). Task-control markers (speech-to-text, text-to-speech continuation)
  and padding are never targets. A label that starts another document than its input is not a target
  either (with cross-document masking nothing before it is visible).
- Goldfish: a label is dropped when a hash of the `h` labels ending at it (within the row) falls in
  1/`k` of the hash space, so the same context always drops the same way, wherever it recurs.
  Special tokens (end-of-document, markers) are exempt. The hash multiplies each label by an odd
  64-bit constant after adding one (so id 0 does not zero the product) and mixes with xorshifts.
"""
from __future__ import annotations

import torch

CONTROL_MARKERS = ("speech_to_text", "text_to_speech")
_MUL = 0x9E3779B97F4A7C15 - 2**64     # odd 64-bit constants as signed int64 (torch wraps on overflow)
_MUL2 = 0xBF58476D1CE4E5B9 - 2**64


class TargetRules:
    def __init__(self, vocabulary: dict, targets: str, goldfish: dict | None = None):
        blocks = {b["name"]: (b["start"], b["start"] + b["size"]) for b in vocabulary["blocks"]}
        self.text, self.reserved = blocks["text"], blocks["reserved"]
        self.targets, self.goldfish = targets, goldfish
        self.control = [self.reserved[0] + vocabulary["reserved"][m] for m in CONTROL_MARKERS
                        if m in vocabulary["reserved"]]
        self.special = [vocabulary["eod"], vocabulary["pad"]]
        self.pad = vocabulary["pad"]

    def is_text(self, labels: torch.Tensor) -> torch.Tensor:
        return (labels >= self.text[0]) & (labels < self.text[1]) & (labels != self.pad)

    def mask(self, labels: torch.Tensor, same_doc: torch.Tensor) -> torch.Tensor:
        """True where the label is a target of this stage."""
        keep = self.is_text(labels) if self.targets == "text" else labels != self.pad
        for c in self.control:
            keep &= labels != c
        keep &= same_doc
        if self.goldfish:
            keep &= ~self.goldfish_drop(labels)
        return keep

    def goldfish_drop(self, labels: torch.Tensor) -> torch.Tensor:
        k, h = self.goldfish["k"], self.goldfish["h"]
        x = (labels.to(torch.int64) + 1) * _MUL
        acc = torch.zeros_like(x)
        for j in range(h):                       # the h labels ending at each position (rolled)
            shifted = torch.roll(x, shifts=j, dims=-1)
            acc = (acc ^ shifted) * _MUL2 + j
        acc ^= acc >> 31
        full = torch.arange(labels.shape[-1], device=labels.device) >= h - 1   # a whole context only
        special = (labels >= self.reserved[0]) & (labels < self.reserved[1])
        for t in self.special:
            special |= labels == t
        return full & ~special & (torch.remainder(acc, k) == 0)
