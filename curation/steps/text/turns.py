"""Conversation turns with roles (SFT data), kept through the text pipeline into the shards.

With `input.turn_roles: true`, a conversation (a list of `{role, content}` or ShareGPT
`{from, value}` turns) becomes one text whose turns are joined by `SEPARATOR`, a private-use
character that normalisation (NFC, ftfy), PII replacement and the filters leave alone, and the
roles go to the record's metadata. At tokenization every turn becomes its role's marker, the
turn's tokens and `end_of_turn` (markers from the vocabulary's reserved block), so a trainer can
train on assistant turns only and mask tool outputs (`curation.train.targets`).
"""
from __future__ import annotations

SEPARATOR = "\ue000"
ROLES = {"system": "system", "developer": "system", "user": "user", "human": "user", "assistant": "assistant",
         "gpt": "assistant", "model": "assistant", "bot": "assistant", "tool": "tool", "function": "tool",
         "function_response": "tool", "observation": "tool", "ipython": "tool"}
MARKERS = {"system": "turn_system", "user": "turn_user", "assistant": "turn_assistant", "tool": "turn_tool"}
END = "end_of_turn"


def join_with_roles(turns: list) -> tuple[str, list[str]] | None:
    """(text, roles) of a conversation whose turns all carry a known role and text; else None."""
    texts, roles = [], []
    for turn in turns:
        if not isinstance(turn, dict):
            return None
        role = ROLES.get(str(turn.get("role", turn.get("from", ""))).lower())
        content = turn.get("content", turn.get("value"))
        if role is None or not isinstance(content, str):
            return None
        texts.append(content.replace(SEPARATOR, ""))
        roles.append(role)
    return SEPARATOR.join(texts), roles


def split_turns(text: str, roles: list[str]) -> list[str] | None:
    parts = text.split(SEPARATOR)
    return parts if len(parts) == len(roles) else None
