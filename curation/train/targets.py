"""Which labels are training targets (Apertus 1.5 §3.2), and the Goldfish loss's drop mask.

- Stage targets: `all` (stage 1: text, image and audio codes and their structure markers) or `text`
  (later stages: text ids only). Task-control markers (speech-to-text, text-to-speech continuation)
  and padding are never targets. A label that starts another document than its input is not a target
  either (with cross-document masking nothing before it is visible).
- Conversations (SFT, `curation.steps.text.turns`): inside a document that has turn markers only the
  assistant turns' tokens and their end-of-turn are targets; system, user and tool turns (tool
  outputs) and the role markers themselves are not.
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
        self.pad, self.eod = vocabulary["pad"], vocabulary["eod"]
        r = vocabulary["reserved"]
        start = self.reserved[0]
        self.turn_markers = {role: start + r[f"turn_{role}"] for role in ("system", "user", "assistant", "tool")
                             if f"turn_{role}" in r}
        self.end_of_turn = start + r["end_of_turn"] if "end_of_turn" in r else None

    def is_text(self, labels: torch.Tensor) -> torch.Tensor:
        return (labels >= self.text[0]) & (labels < self.text[1]) & (labels != self.pad)

    def mask(self, labels: torch.Tensor, same_doc: torch.Tensor) -> torch.Tensor:
        """True where the label is a target of this stage."""
        keep = self.is_text(labels) if self.targets == "text" else labels != self.pad
        if self.end_of_turn is not None:
            keep |= labels == self.end_of_turn
        for c in self.control:
            keep &= labels != c
        keep &= same_doc
        if self.turn_markers:
            keep &= self.assistant_or_plain(labels)
        if self.goldfish:
            keep &= ~self.goldfish_drop(labels)
        return keep

    def assistant_or_plain(self, labels: torch.Tensor) -> torch.Tensor:
        """False on the tokens of non-assistant turns and on role markers; True elsewhere (assistant turns,
        their end-of-turn, and documents without turns). The role of a token is the last role marker at or
        before it, reset at every end-of-document."""
        code = torch.full_like(labels, -1)
        code[labels == self.eod] = 0
        names = sorted(self.turn_markers)
        for i, role in enumerate(names, start=1):
            code[labels == self.turn_markers[role]] = i
        pos = torch.arange(labels.shape[-1], device=labels.device).expand_as(labels)
        last = torch.cummax(torch.where(code >= 0, pos, torch.zeros_like(pos)), dim=-1).values
        role = torch.gather(code, -1, last).clamp(min=0)   # before any marker or eod in the row: plain
        # (a row that starts inside a conversation cut by packing cannot see its role: treated as plain)
        assistant = names.index("assistant") + 1 if "assistant" in names else -2
        marker = torch.zeros_like(labels, dtype=torch.bool)
        for m in self.turn_markers.values():
            marker |= labels == m
        return ((role == 0) | (role == assistant)) & ~marker

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
