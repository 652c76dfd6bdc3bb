"""Which labels are training targets (Apertus 1.5 §3.2), and the Goldfish loss's drop mask.

- Stage targets: `all` (stage 1: text, image and audio codes and their structure markers) or `text`
  (later stages: text ids only). The "H*W" size between `image_start` and `image_size_end` is written in
  text ids but belongs to the image block: under `text` it is not a target either (the model would learn
  an image's size after a marker it does not learn to emit). Task-control markers (speech-to-text,
  text-to-speech continuation, speech translation) and padding are never targets. A label that starts
  another document than its input is not a target either (with cross-document masking nothing before
  it is visible).
- Conversations (SFT, the chat template of `curation.steps.conversation.chat`): the mask of
  `curation.train.chat_mask`, derived from the markers alone: assistant turns and tool calls are targets,
  system/developer/user turns and tool outputs are not, thinking spans by the stage's `thinking`
  setting. The markers an assistant turn trains on are targets in text-only stages too.
- Goldfish: a label is dropped when a hash of the `h` labels ending at it (within the row) falls in
  1/`k` of the hash space, so the same context always drops the same way, wherever it recurs.
  Special tokens (end-of-document, markers) are exempt. The hash multiplies each label by an odd
  64-bit constant after adding one (so id 0 does not zero the product) and mixes with xorshifts.
"""
from __future__ import annotations

import numpy as np
import torch

from curation.train.chat_mask import ConversationMask, trainable_ids

CONTROL_MARKERS = ("speech_to_text", "text_to_speech", "speech_translate", "speech_transcribe")  # as steps.audio.interleave
_MUL = 0x9E3779B97F4A7C15 - 2**64     # odd 64-bit constants as signed int64 (torch wraps on overflow)
_MUL2 = 0xBF58476D1CE4E5B9 - 2**64


class TargetRules:
    def __init__(self, vocabulary: dict, targets: str, goldfish: dict | None = None, thinking: str = "train"):
        blocks = {b["name"]: (b["start"], b["start"] + b["size"]) for b in vocabulary["blocks"]}
        self.text, self.reserved = blocks["text"], blocks["reserved"]
        self.targets, self.goldfish = targets, goldfish
        self.control = [self.reserved[0] + vocabulary["reserved"][m] for m in CONTROL_MARKERS
                        if m in vocabulary["reserved"]]
        self.special = [vocabulary["eod"], vocabulary["pad"]]
        self.pad, self.eod = vocabulary["pad"], vocabulary["eod"]
        marker = vocabulary["reserved"]
        self.image_header = ((self.reserved[0] + marker["image_start"], self.reserved[0] + marker["image_size_end"])
                             if {"image_start", "image_size_end"} <= marker.keys() else None)
        self.chat = ConversationMask(vocabulary, thinking) if ConversationMask.applies(vocabulary) else None
        self.chat_trainable = torch.tensor(trainable_ids(vocabulary), dtype=torch.int64)

    def is_text(self, labels: torch.Tensor) -> torch.Tensor:
        return (labels >= self.text[0]) & (labels < self.text[1]) & (labels != self.pad)

    def in_image_header(self, labels: torch.Tensor) -> torch.Tensor:
        """True for labels after an `image_start` of their row and before its `image_size_end` (the size
        text). A row that begins inside a header (at most a few digits) is not recognised."""
        if self.image_header is None:
            return torch.zeros_like(labels, dtype=torch.bool)
        pos = torch.arange(labels.shape[-1]).expand_as(labels)
        last_start = torch.where(labels == self.image_header[0], pos, -1).cummax(dim=-1).values
        last_end = torch.where(labels == self.image_header[1], pos, -1).cummax(dim=-1).values
        return last_start > last_end

    def conversation(self, tokens: np.ndarray, doc: np.ndarray, leads: list | None = None) -> torch.Tensor | None:
        """The conversation mask of whole (B, T+1) rows (inputs and labels), each row starting in the state its
        document's earlier tokens `leads[b]` leave; slice `[:, 1:]` for the labels."""
        if self.chat is None:
            return None
        return torch.from_numpy(self.chat.batch(np.asarray(tokens), np.asarray(doc), leads))

    def mask(self, labels: torch.Tensor, same_doc: torch.Tensor, chat: torch.Tensor | None = None) -> torch.Tensor:
        """True where the label is a target of this stage. `chat`: the conversation mask of the labels
        (`conversation(...)[:, 1:]`); without it, it is derived from the labels alone (rows that start a document)."""
        keep = self.is_text(labels) & ~self.in_image_header(labels) if self.targets == "text" else labels != self.pad
        keep |= torch.isin(labels, self.chat_trainable)
        for c in self.control:
            keep &= labels != c
        keep &= same_doc
        if chat is None and self.chat is not None:
            lab = labels.numpy()
            chat = torch.from_numpy(np.stack([self.chat.row(r)[0] for r in lab.reshape(-1, lab.shape[-1])])
                                    .reshape(lab.shape))
        if chat is not None:
            keep &= chat
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
