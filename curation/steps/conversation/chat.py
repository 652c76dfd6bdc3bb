"""The Apertus 1.5 chat template (section 4.1) rendered into the shared vocabulary, and media expansion.

A conversation (`chat`, the skeleton of `curation.steps.conversation.turns`, plus its text segments) becomes

    turn_system [system prompt] end_of_turn                  an explicit empty block when there is none
    turn_developer "Deliberation: enabled|disabled\n"
        "Tool Capabilities:\n" <TypeScript declarations> | "Tool Capabilities: disabled"
        ["\n\n" developer instructions] end_of_turn
    turn_user text <|image|> text ... end_of_turn              one placeholder per media item
    turn_assistant
        [inner_prefix thinking inner_suffix]                   thinking spans (may hold tool calls)
        text
        tools_prefix [{"name": {arguments}}, ...] tools_suffix  parallel calls: one JSON array
        tool_output_start output ", " output tool_output_end     the calls' outputs, in order
        text ...
    end_of_turn
    end-of-document

Markers are single ids of the reserved block (`MARKERS`; names in `tokenizers/*.yaml`), never text, so a
user cannot spell one: content is encoded as plain text, and text that encodes to end-of-document or
padding is refused (`special_token_in_text`). Consecutive assistant messages and the tool outputs
between them form one assistant turn, as in the Apertus template. With `thinking=False` (the copy
without reasoning, `curation.steps.conversation.reasoning`) every span from inner_prefix to inner_suffix is left
out, with what it holds, and the developer block says `Deliberation: disabled`.

Loss masks follow from these markers alone (`curation.train.chat_mask`). Media placeholders expand
into the image/audio token blocks with `expand_placeholders` once the codecs have encoded the media.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from curation.errors import RecordError
from curation.steps.conversation.tool_decl import declare_tools

ROLE_MARKERS = {"system": "turn_system", "developer": "turn_developer", "user": "turn_user",
                "assistant": "turn_assistant"}
MARKERS = (*ROLE_MARKERS.values(), "end_of_turn", "tools_prefix", "tools_suffix", "tool_output_start",
           "tool_output_end", "inner_prefix", "inner_suffix", "image_placeholder", "audio_placeholder")
PLACEHOLDERS = {"image": "image_placeholder", "audio": "audio_placeholder"}
BLOCK_START = {"image": "image_start", "audio": "audio_start"}   # what an expanded block opens with
# Apertus spellings, for display (`describe`); end_of_turn is spelled after the turn it closes
SURFACE = {"turn_system": "<|system_start|>", "turn_developer": "<|developer_start|>",
           "turn_user": "<|user_start|>", "turn_assistant": "<|assistant_start|>", "turn_tool": "<|tool_start|>",
           "image_placeholder": "<|image|>", "audio_placeholder": "<|audio|>"}


@dataclass(frozen=True)
class ChatMarkers:
    ids: dict[str, int]

    @classmethod
    def from_vocab(cls, vocab) -> ChatMarkers:
        missing = [m for m in (*MARKERS, *BLOCK_START.values()) if m not in vocab.reserved]
        if missing:
            raise RecordError("no_turn_markers", f"vocabulary {vocab.id} has no reserved marker(s) {missing}; "
                              f"name them in free slots of its reserved block ({vocab.path})")
        return cls({m: vocab.marker(m) for m in (*MARKERS, *BLOCK_START.values())})

    def __getitem__(self, name: str) -> int:
        return self.ids[name]


@dataclass
class Rendered:
    tokens: np.ndarray                         # int32, ends with end-of-document
    placeholders: list[tuple[int, str]]        # (position, "image"|"audio"), in media order


def segment_count(chat: dict) -> int:
    n = (chat["system"] is not None) + (chat["developer"] is not None)
    for _, items in chat["turns"]:
        n += sum(len(it[1]) if it[0] == "output" else it[0] in ("text", "call") for it in items)
    return n


def render(chat: dict, segments: Sequence[str], markers: ChatMarkers, encode: Callable[[list[str]], list],
           eod: int, *, thinking: bool = True, special: Sequence[int] = ()) -> Rendered:
    """Token ids of one conversation. `encode(texts) -> list of id lists` is the text tokenizer (without
    special tokens); `special`: ids that text must not produce (end-of-document, padding)."""
    if segment_count(chat) != len(segments):
        raise RecordError("turns_lost", f"the conversation has {segment_count(chat)} text segments, the text "
                          f"{len(segments)}: the segment separators did not survive the text steps")
    m = markers
    deliberate = thinking and any(it[0] == "think_open" for _, items in chat["turns"] for it in items)
    tools = chat["tools"]
    dev = (f"Deliberation: {'enabled' if deliberate else 'disabled'}\n"
           + (f"Tool Capabilities:\n{declare_tools(tools)}" if tools else "Tool Capabilities: disabled")
           + ("\n\n" if chat["developer"] is not None else ""))
    pieces: list = [m["turn_system"], *_seg(segments, chat["system"]), m["end_of_turn"],
                    m["turn_developer"], dev, *_seg(segments, chat["developer"]), m["end_of_turn"]]
    for role, items in chat["turns"]:
        pieces.append(m[ROLE_MARKERS[role]])
        skipping = False
        for it in items:
            kind = it[0]
            if kind == "think_open":
                skipping = not thinking
            if skipping:
                skipping = kind != "think_close"
                continue
            if kind == "text":
                pieces.append(segments[it[1]])
            elif kind in PLACEHOLDERS:
                pieces.append((kind,))
            elif kind in ("think_open", "think_close"):
                pieces.append(m["inner_prefix" if kind == "think_open" else "inner_suffix"])
            elif kind == "call":
                pieces += [m["tools_prefix"], segments[it[1]], m["tools_suffix"]]
            elif kind == "output":
                pieces.append(m["tool_output_start"])
                for j, s in enumerate(it[1]):
                    pieces += [", "] * (j > 0) + [segments[s]]
                pieces.append(m["tool_output_end"])
            else:
                raise RecordError("turns_lost", f"unknown conversation item {kind!r}")
        pieces.append(m["end_of_turn"])
    texts = [p for p in pieces if isinstance(p, str) and p]
    encoded = iter(encode(texts))
    out, placeholders = [], []
    for p in pieces:
        if isinstance(p, int):
            out.append(p)
        elif isinstance(p, tuple):
            placeholders.append((len(out), p[0]))
            out.append(m[PLACEHOLDERS[p[0]]])
        elif p:
            ids = list(next(encoded))
            if special and any(t in special for t in ids):
                raise RecordError("special_token_in_text", f"the text {p[:60]!r} encodes to a special token "
                                  f"(end-of-document or padding); remove it from the conversation")
            out += ids
    out.append(eod)
    return Rendered(np.asarray(out, dtype=np.int32), placeholders)


def _seg(segments: Sequence[str], i: int | None) -> list[str]:
    return [] if i is None else [segments[i]]


def find_placeholders(tokens: np.ndarray, markers: ChatMarkers) -> list[tuple[int, str]]:
    """(position, kind) of every media placeholder in a rendered token sequence, in order."""
    tokens = np.asarray(tokens)
    hits = [(int(p), kind) for kind, name in PLACEHOLDERS.items() for p in np.flatnonzero(tokens == markers[name])]
    return sorted(hits)


def expand_placeholders(tokens: np.ndarray, placeholders: Sequence[tuple[int, str]], blocks: Sequence[np.ndarray],
                        markers: ChatMarkers) -> np.ndarray:
    """Splice the media token blocks into a rendered conversation: block i replaces placeholder i.

    `placeholders`: `Rendered.placeholders` (or `find_placeholders`); `blocks`: one int32 array per media item
    in `meta["media"]` order, e.g. `curation.steps.image.codec.layout(codes, vocab)` for an image and
    `curation.steps.audio.interleave.audio_tokens(codes, vocab)` for a clip. Refuses (`placeholder_mismatch`)
    a count mismatch, a position that holds no placeholder of its kind, or a block that does not open
    with its kind's start marker."""
    tokens = np.asarray(tokens, dtype=np.int32)
    if len(placeholders) != len(blocks):
        raise RecordError("placeholder_mismatch", f"{len(placeholders)} placeholder(s), {len(blocks)} media block(s)")
    out, pos = [], 0
    for (at, kind), block in zip(placeholders, blocks):
        block = np.asarray(block, dtype=np.int32)
        if at < pos or at >= tokens.size or tokens[at] != markers[PLACEHOLDERS[kind]]:
            raise RecordError("placeholder_mismatch", f"position {at} holds no {kind} placeholder")
        if block.size == 0 or block[0] != markers[BLOCK_START[kind]]:
            raise RecordError("placeholder_mismatch", f"the block for the {kind} at {at} does not open with "
                              f"{BLOCK_START[kind]}")
        out += [tokens[pos:at], block]
        pos = at + 1
    out.append(tokens[pos:])
    return np.concatenate(out).astype(np.int32)


def describe(tokens: Sequence[int], vocab) -> list[str]:
    """One display string per token: markers in their Apertus spelling (`<|user_end|>` after a user turn),
    text ids as their decoded text, image/audio codes as `<img:N>`/`<aud:N>`."""
    names = {vocab.marker(n): n for n in vocab.reserved}
    image, audio = vocab.block("image"), vocab.block("audio")
    out, role = [], "turn"
    for t in map(int, tokens):
        name = names.get(t)
        if name is not None:
            if name.startswith("turn_"):
                role = name[5:]
            out.append(f"<|{role}_end|>" if name == "end_of_turn" else SURFACE.get(name, f"<|{name}|>"))
        elif t in image:
            out.append(f"<img:{t - image.start}>")
        elif t in audio:
            out.append(f"<aud:{t - audio.start}>")
        elif t == vocab.eod_id:
            out.append(vocab.eod_token)
        else:
            out.append(vocab.tokenizer.decode([t]))
    return out
