"""Loss masks of conversations, derived token by token from the chat template's markers alone, as a
Megatron SFT loader does (Apertus 1.5 section 4.1; the template is `curation.steps.conversation.chat`).

A state machine walks the markers; each token is a target or not by the state it is in:
- Outside a conversation (no role marker since the document began) every token is a target: plain
  documents are left to the stage's rules (`curation.train.targets`).
- Role markers (`turn_system`, `turn_developer`, `turn_user`, `turn_assistant`, legacy `turn_tool`) are
  never targets: the template supplies them.
- System, developer and user turns (and legacy tool turns): nothing is a target, their end_of_turn included.
- An assistant turn: its text and its end_of_turn (the model learns to stop) are targets, and so are its
  tool calls, `tools_prefix` and `tools_suffix` included. Tool outputs, from `tool_output_start` to
  `tool_output_end` inclusive, are not: the model conditions on them without learning to generate them.
- A thinking span, `inner_prefix` to `inner_suffix` inclusive, with whatever it holds (tool calls too),
  is trained or masked by the stage's `thinking` setting (`train` | `mask`).
- Between turns, and the end-of-document that closes a conversation: not targets.
- An end-of-document, or a new document in the row, starts over.

A row cut from the middle of a document starts in the state that document's earlier tokens leave
(`state_after`), so packing never changes a token's mask.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from curation.steps.conversation.chat import ROLE_MARKERS

ROLES = {**{name: role for role, name in ROLE_MARKERS.items()}, "turn_tool": "tool"}
TRAINABLE = ("end_of_turn", "tools_prefix", "tools_suffix", "inner_prefix", "inner_suffix")
_EVENTS = (*ROLES, "end_of_turn", "inner_prefix", "inner_suffix", "tool_output_start", "tool_output_end")


@dataclass(frozen=True)
class State:
    conversation: bool = False
    role: str | None = None
    thinking: bool = False
    output: bool = False


START = State()


class ConversationMask:
    def __init__(self, vocabulary: dict, thinking: str = "train"):
        """`vocabulary`: a manifest's vocabulary section (blocks, reserved offsets, eod)."""
        if thinking not in ("train", "mask"):
            raise ValueError(f"thinking must be 'train' or 'mask', got {thinking!r}")
        start = next(b["start"] for b in vocabulary["blocks"] if b["name"] == "reserved")
        r = vocabulary["reserved"]
        self.ids = {name: start + r[name] for name in _EVENTS if name in r}
        self.names = {i: name for name, i in self.ids.items()}
        self.eod = int(vocabulary["eod"])
        self.events = np.asarray([*self.ids.values(), self.eod], dtype=np.int64)
        self.train_thinking = thinking == "train"

    @staticmethod
    def applies(vocabulary: dict) -> bool:
        return "turn_assistant" in vocabulary["reserved"] and "end_of_turn" in vocabulary["reserved"]

    def content(self, s: State) -> bool:
        """Whether a token that is no event is a target in state `s`."""
        if not s.conversation:
            return True
        return s.role == "assistant" and not s.output and (self.train_thinking or not s.thinking)

    def step(self, s: State, token: int) -> tuple[bool, State]:
        """(is `token` a target, the state after it) for an event token."""
        if token == self.eod:
            return not s.conversation, START
        name = self.names[token]
        assistant = s.role == "assistant"
        if name in ROLES:
            return False, State(True, ROLES[name])
        if name == "end_of_turn":
            return (self.content(s) if s.role else not s.conversation), State(s.conversation)
        if name == "inner_prefix" and assistant and not s.output:
            return self.train_thinking, replace(s, thinking=True)
        if name == "inner_suffix" and assistant and s.thinking and not s.output:
            return self.train_thinking, replace(s, thinking=False)
        if name == "tool_output_start" and assistant:
            return False, replace(s, output=True)
        if name == "tool_output_end" and assistant and s.output:
            return False, replace(s, output=False)
        return self.content(s), s   # a stray marker is content of where it stands

    def state_after(self, tokens: np.ndarray, s: State = START) -> State:
        """The state the tokens leave (only their events are read)."""
        tokens = np.asarray(tokens)
        for t in tokens[np.isin(tokens, self.events)].tolist():
            s = self.step(s, t)[1]
        return s

    def row(self, tokens: np.ndarray, s: State = START, starts: np.ndarray | None = None) -> tuple[np.ndarray, State]:
        """Per-token targets of one row, from state `s`; `starts` marks tokens that begin a new document."""
        tokens = np.asarray(tokens)
        mask = np.empty(tokens.size, dtype=bool)
        new = np.zeros(tokens.size, dtype=bool) if starts is None else np.asarray(starts, dtype=bool)
        event = np.isin(tokens, self.events)
        prev = 0
        for p in np.flatnonzero(event | new).tolist():
            mask[prev:p] = self.content(s)
            if new[p]:
                s = START
            if event[p]:
                mask[p], s = self.step(s, int(tokens[p]))
            else:
                mask[p] = self.content(s)
            prev = p + 1
        mask[prev:] = self.content(s)
        return mask, s

    def batch(self, tokens: np.ndarray, doc: np.ndarray, leads: list | None = None) -> np.ndarray:
        """Targets of a (B, T) batch; `doc`: document number per token; `leads[b]`: the tokens of row b's first
        document before the row (empty when the row starts with a document)."""
        out = np.empty(tokens.shape, dtype=bool)
        starts = np.zeros(tokens.shape, dtype=bool)
        starts[:, 1:] = doc[:, 1:] != doc[:, :-1]
        for b in range(tokens.shape[0]):
            s = self.state_after(leads[b]) if leads is not None and len(leads[b]) else START
            out[b] = self.row(tokens[b], s, starts[b])[0]
        return out


def trainable_ids(vocabulary: dict) -> list[int]:
    """The reserved markers a conversation can train on (assistant end_of_turn, tool-call and thinking
    delimiters): targets even in text-only stages, so the output head needs them."""
    start = next(b["start"] for b in vocabulary["blocks"] if b["name"] == "reserved")
    return [start + vocabulary["reserved"][m] for m in TRAINABLE if m in vocabulary["reserved"]]
