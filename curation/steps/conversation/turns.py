"""Conversations (SFT data) read from OpenAI, ShareGPT and Apertus layouts into one normalised form.

`parse_conversation(row, form)` turns one input row into
- `text`: every text segment (system prompt, developer instructions, user and assistant text, thinking,
  tool calls as rendered JSON, tool outputs) joined by `SEPARATOR`, a private-use character that
  normalisation (NFC, ftfy), PII replacement and the filters leave alone, so those steps see and may
  rewrite every word;
- `chat`: the skeleton that `curation.steps.conversation.chat` renders in the Apertus 1.5 template, with text
  items pointing at segment numbers: `{"system": seg|None, "developer": seg|None, "tools": [...],
  "turns": [[role, items]]}`; items are `["text", seg]`, `["image"|"audio", media index]`,
  `["think_open"]`, `["think_close"]`, `["call", seg]`, `["output", [seg, ...]]`;
- `media`: the media references in placeholder order, `{"kind": "image"|"audio", "ref": str}` (a path or
  URL as given, or a `data:` URL for inline bytes/base64).

Accepted: messages `{role, content}` (OpenAI) or `{from, value}` (ShareGPT); content as a string, a list of
parts (`text`, `image_url`, `image`, `input_audio`, `audio`), or the Apertus mappings (`{"text"}`,
`{"parts"}`, `{"blocks"}`); tool declarations (OpenAI `tools`, also as a JSON string); assistant
`tool_calls` (and legacy `function_call`, ShareGPT `function_call` turns); `role: tool`/`function`/
`observation` outputs (`tool_call_id` checked against the calls); reasoning as `reasoning_content`,
`reasoning` or `thinking` fields, or spans in the assistant text (`THINK_TAGS`; an R1-style answer that
starts inside the span and only closes it counts too); media as content parts, or as the literal
placeholders `<image>`/`<audio>` (and `<|image|>`/`<|audio|>`) in user text filled in order from the
row's `images`/`audios` fields. A row that cannot be rendered faithfully raises `RecordError` with the
reason the reader quarantines it under (`placeholder_mismatch`, `unmatched_tool_output`, ...).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from curation.errors import RecordError
from curation.steps.conversation.media_refs import media_list, part_media
from curation.steps.conversation.tool_decl import read_tools

SEPARATOR = "\ue000"
ROLES = {"system": "system", "developer": "developer", "user": "user", "human": "user", "assistant": "assistant",
         "gpt": "assistant", "model": "assistant", "bot": "assistant", "chatgpt": "assistant",
         "function_call": "call", "tool": "tool", "function": "tool", "function_response": "tool",
         "tool_response": "tool", "observation": "tool", "ipython": "tool"}
THINK_TAGS = (("<think>", "</think>"), ("<thinking>", "</thinking>"), ("<reasoning>", "</reasoning>"),
              ("<|begin_of_thought|>", "<|end_of_thought|>"), ("<|inner_prefix|>", "<|inner_suffix|>"))
REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
_ALIASES = re.compile(r"<(\|?)(image|audio)\1>")   # <image>, <|image|>, <audio>, <|audio|>
_TEXT_PARTS = {"text", "input_text", "output_text"}


@dataclass
class Parsed:
    text: str
    chat: dict
    media: list[dict]


class _Conversation:
    def __init__(self, images: list, audios: list):
        self.segments: list[str] = []
        self.turns: list[list] = []
        self.media: list[dict] = []
        self.bare = {"image": [], "audio": []}     # media indices of placeholders to fill from the row
        self.given = {"image": images, "audio": audios}
        self.calls: list[tuple[str | None, str]] = []   # (id, name) of the open assistant message's calls
        self.outputs: list[tuple[str | None, int]] = []

    def seg(self, text: str) -> int:
        """A text segment; media placeholders belong in user messages only (they were split off there)."""
        if m := _ALIASES.search(text):
            raise RecordError("misplaced_media", f"placeholder {m.group(0)!r} outside a user message's text")
        self.segments.append(text.replace(SEPARATOR, ""))
        return len(self.segments) - 1

    def assistant(self) -> list:
        if not self.turns or self.turns[-1][0] != "assistant":
            self.turns.append(["assistant", []])
        return self.turns[-1][1]

    def text_items(self, text: str) -> list:
        """User text: text segments and the media placeholders between them."""
        items, pos = [], 0
        for m in _ALIASES.finditer(text):
            items += [["text", self.seg(text[pos:m.start()])]] if m.start() > pos else []
            items.append(self.add_media(m.group(2), None))
            pos = m.end()
        return items + ([["text", self.seg(text[pos:])]] if pos < len(text) else [])

    def add_media(self, kind: str, ref: str | None) -> list:
        self.media.append({"kind": kind, "ref": ref})
        if ref is None:
            self.bare[kind].append(len(self.media) - 1)
        return [kind, len(self.media) - 1]

    def flush_outputs(self, final: bool = False) -> None:
        """Close a group of tool outputs: as many as the calls before them, matching their ids."""
        if not self.outputs:
            if self.calls and not final:
                raise RecordError("unmatched_tool_output", f"{len(self.calls)} tool call(s) get no tool output")
            self.calls = []
            return
        if self.calls:
            ids, out_ids = [c for c, _ in self.calls], [o for o, _ in self.outputs]
            if len(ids) != len(out_ids) or (None not in ids + out_ids and sorted(ids) != sorted(out_ids)):
                raise RecordError("unmatched_tool_output", f"calls {ids} answered by outputs {out_ids}")
        self.assistant().append(["output", [s for _, s in self.outputs]])
        self.calls, self.outputs = [], []

    def fill_media(self, fields) -> None:
        for kind, bare in self.bare.items():
            given = self.given[kind]
            if len(bare) != len(given):
                raise RecordError("placeholder_mismatch", f"{len(bare)} {kind} placeholder(s) without a reference, "
                                  f"{len(given)} {kind}(s) in field {fields[kind]!r}")
            for i, ref in zip(bare, given):
                self.media[i]["ref"] = ref


def is_conversation(record) -> bool:
    """A record read as a conversation (`meta["chat"]`, or `meta["roles"]` as earlier versions kept it)."""
    return "chat" in record.meta or "roles" in record.meta


def parse_conversation(row: dict, form) -> Parsed:
    """`form`: the recipe's `input.conversations` settings (`curation.recipe.schema.Conversations`)."""
    messages = row.get(form.messages_field)
    if not isinstance(messages, list) or not messages:
        raise RecordError("missing_messages", f"field {form.messages_field!r} is not a non-empty list of messages")
    c = _Conversation(media_list(row.get(form.images_field) if form.images_field else None, "image"),
                      media_list(row.get(form.audios_field) if form.audios_field else None, "audio"))
    roles = [_role(m, n) for n, m in enumerate(messages)]
    lead = next((n for n, r in enumerate(roles) if r not in ("system", "developer")), len(roles))
    top = row.get(form.system_field) if form.system_field else None
    system = [top] if isinstance(top, str) and top.strip() else []
    system += [_plain(_content(messages[n]), n) for n in range(lead) if roles[n] == "system"]
    developer = [_plain(_content(messages[n]), n) for n in range(lead) if roles[n] == "developer"]
    chat = {"system": c.seg("\n\n".join(system)) if system else None,
            "developer": c.seg("\n\n".join(developer)) if developer else None,
            "tools": read_tools(row.get(form.tools_field) if form.tools_field else None), "turns": c.turns}
    declared = {t["name"] for t in chat["tools"]}
    for n in range(lead, len(messages)):
        msg, role, content = messages[n], roles[n], _content(messages[n])
        if role in ("system", "developer"):
            raise RecordError("misplaced_system", f"message {n} ({role}) follows the conversation's first turn")
        if role == "user":
            c.flush_outputs()
            c.turns.append(["user", _user_items(c, content, n)])
        elif role == "tool":
            if not c.turns or c.turns[-1][0] != "assistant":
                raise RecordError("unmatched_tool_output", f"message {n} is a tool output outside an assistant turn")
            text = _plain(content, n, structured=True) if content is not None else ""
            if not text.strip():
                raise RecordError("empty_tool_output", f"message {n} is an empty tool output")
            c.outputs.append((msg.get("tool_call_id"), c.seg(text)))
        else:
            c.flush_outputs()
            if role == "call":   # ShareGPT `function_call` turn: the value is the call (or a list of calls)
                msg, content = {"tool_calls": _json(content, n, "bad_tool_call")}, None
            _assistant(c, msg, content, n, declared)
    c.flush_outputs(final=True)
    if not any(role == "assistant" and items for role, items in c.turns):
        raise RecordError("no_assistant_turn", "the conversation has no assistant message to train on")
    c.fill_media({"image": form.images_field, "audio": form.audios_field})
    return Parsed(SEPARATOR.join(c.segments), chat, c.media)


def from_roles(text: str, roles: list[str]) -> Parsed:
    """A conversation stored by earlier versions (turns joined by `SEPARATOR`, roles in `meta["roles"]`)."""
    from types import SimpleNamespace
    parts = text.split(SEPARATOR)
    if len(parts) != len(roles):
        raise RecordError("turns_lost", "the turn separators did not survive the text steps")
    form = SimpleNamespace(messages_field="m", tools_field=None, system_field=None, images_field=None,
                           audios_field=None)
    return parse_conversation({"m": [{"role": r, "content": t} for r, t in zip(roles, parts)]}, form)


def _role(msg, n: int) -> str:
    if not isinstance(msg, dict):
        raise RecordError("bad_turns", f"message {n} is a {type(msg).__name__}, not an object")
    role = ROLES.get(str(msg.get("role") or msg.get("from") or "").lower())
    if role is None:
        raise RecordError("bad_turns", f"message {n} has role {msg.get('role') or msg.get('from')!r}")
    if msg.get("weight") == 0:
        raise RecordError("turn_weight", f"message {n} has weight 0; marker-derived loss masks train every "
                          f"assistant turn: drop the turn or the conversation upstream")
    return role


def _content(msg: dict):
    return msg.get("content") if msg.get("content") is not None else msg.get("value")   # Parquet: both keys


def _plain(content, n: int, *, structured: bool = False) -> str:
    """Text-only content: a string, `{"text": ...}`, or a list of text parts; with `structured` (tool
    outputs) any other JSON value stands as its JSON text."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") in _TEXT_PARTS for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    if structured and isinstance(content, (dict, list)):
        return json.dumps(content, ensure_ascii=False)
    if isinstance(content, list):
        kinds = sorted({str(p.get("type")) if isinstance(p, dict) else type(p).__name__ for p in content})
        reason = "misplaced_media" if any(part_media(p) for p in content) else "unsupported_content"
        raise RecordError(reason, f"message {n} has content parts {kinds}; only user messages carry media")
    raise RecordError("bad_turns", f"message {n} has content of type {type(content).__name__}")


def _user_items(c: _Conversation, content, n: int) -> list:
    if isinstance(content, str):
        return c.text_items(content)
    parts = content.get("parts") if isinstance(content, dict) else content
    if not isinstance(parts, list):
        raise RecordError("bad_turns", f"message {n} (user) has content of type {type(content).__name__}")
    items = []
    for p in parts:
        kind = p.get("type") if isinstance(p, dict) else None
        if kind in _TEXT_PARTS and isinstance(p.get("text"), str):
            items += c.text_items(p["text"])
        elif (found := part_media(p)) is not None:
            items.append(c.add_media(*found))
        else:
            raise RecordError("unsupported_content", f"message {n} has a content part of type {kind!r}")
    return items


def _assistant(c: _Conversation, msg: dict, content, n: int, declared: set[str]) -> None:
    items = c.assistant()
    for field in REASONING_FIELDS:
        if isinstance(msg.get(field), str) and msg[field].strip():
            items += [["think_open"], ["text", c.seg(msg[field].strip())], ["think_close"]]
            break
    if isinstance(content, dict) and isinstance(content.get("blocks"), list):
        _blocks(c, items, content["blocks"], n, declared)
    elif content is not None:
        items += _think_split(c, content if isinstance(content, str) else _plain(content, n), n)
    calls = msg.get("tool_calls") or ([msg["function_call"]] if isinstance(msg.get("function_call"), dict) else [])
    if calls:
        items.append(_calls(c, calls if isinstance(calls, list) else [calls], n, declared))


def _blocks(c: _Conversation, items: list, blocks: list, n: int, declared: set[str]) -> None:
    """Apertus structured assistant content: thoughts, tool calls and outputs inside the thinking span, then
    the response after it."""
    inner = False
    for b in blocks:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "thoughts" and not inner:
            items.append(["think_open"])
            inner = True
        if kind in ("thoughts", "response"):
            if kind == "response" and inner:
                items.append(["think_close"])
                inner = False
            items.append(["text", c.seg(str(b.get("text", "")))])
        elif kind == "tool_calls":
            items.append(_calls(c, b.get("calls") or [], n, declared))
        elif kind == "tool_outputs":
            outs = [o.get("output") if isinstance(o, dict) else o for o in b.get("outputs") or []]
            if not outs or not all(isinstance(o, str) and o.strip() for o in outs):
                raise RecordError("empty_tool_output", f"message {n} has an empty tool_outputs block")
            c.calls = []
            items.append(["output", [c.seg(o) for o in outs]])
        else:
            raise RecordError("unsupported_content", f"message {n} has an assistant block of type {kind!r}")
    if inner:
        items.append(["think_close"])


def _think_split(c: _Conversation, text: str, n: int) -> list:
    """Assistant text with reasoning spans (`THINK_TAGS`; the first spelling found) as items. Whitespace
    around a span is layout, not content, and is dropped."""
    tags = next(((o, e) for o, e in THINK_TAGS if o in text or e in text), None)
    if tags is None:
        return [["text", c.seg(text)]] if text else []
    open_, close = tags
    pieces, pos = [], 0
    first_open, first_close = text.find(open_), text.find(close)
    if first_close >= 0 and (first_open < 0 or first_close < first_open):   # R1 style: opened in the prompt
        pieces.append((True, text[:first_close]))
        pos = first_close + len(close)
    while (start := text.find(open_, pos)) >= 0:
        end = text.find(close, start + len(open_))
        if end < 0:
            raise RecordError("unclosed_thinking", f"message {n} opens {open_!r} and never closes it")
        pieces += [(False, text[pos:start]), (True, text[start + len(open_):end])]
        pos = end + len(close)
    if close in text[pos:]:
        raise RecordError("unclosed_thinking", f"message {n} closes {close!r} twice")
    pieces.append((False, text[pos:]))
    items = []
    for thinking, piece in pieces:
        if piece.strip():   # an empty span (a template's "thinking off" rendering) is no span
            items += [["think_open"], ["text", c.seg(piece.strip())], ["think_close"]] if thinking \
                else [["text", c.seg(piece.strip())]]
    return items


def _calls(c: _Conversation, calls: list, n: int, declared: set[str]) -> list:
    """Tool calls rendered as the JSON array of `{name: arguments}` objects (Apertus 1.5 section 4.1)."""
    rendered = []
    for call in calls:
        fn = call.get("function", call) if isinstance(call, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str) or not name:
            raise RecordError("bad_tool_call", f"message {n} has a tool call without a name")
        if not declared:   # the template would render "Tool Capabilities: disabled" above a call: a contradiction
            raise RecordError("tool_call_without_tools", f"message {n} calls {name!r} but the conversation declares "
                              f"no tools; add its declarations (input.conversations tools field) or drop the call")
        if name not in declared:
            raise RecordError("undeclared_tool", f"message {n} calls {name!r}; declared: {sorted(declared)}")
        args = fn.get("arguments", fn.get("parameters", {}))
        args = _json(args, n, "bad_tool_call") if isinstance(args, str) else args
        if not isinstance(args, dict):
            raise RecordError("bad_tool_call", f"message {n}: arguments of {name!r} are not a JSON object")
        rendered.append({name: args})
        c.calls.append((call.get("id"), name))
    return ["call", c.seg(json.dumps(rendered, ensure_ascii=False))]


def _json(value, n: int, reason: str):
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise RecordError(reason, f"message {n}: invalid JSON ({e.msg} at column {e.colno})") from None
