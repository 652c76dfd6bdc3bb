"""Shared pieces of the chat-template tests: parse a row, render it, split the decoded tokens into
alternating masked / trained runs."""
from __future__ import annotations

from functools import lru_cache

from tests.conftest import VOCAB


@lru_cache(maxsize=1)
def vocab():
    from curation.core.vocab import Vocabulary
    return Vocabulary.load(VOCAB)


def vocab_dict() -> dict:
    v = vocab()
    return {"blocks": [{"name": b.name, "start": b.start, "size": b.size} for b in v.blocks],
            "reserved": v.reserved, "eod": v.eod_id, "pad": v.pad_id}


def markers():
    from curation.steps.conversation.chat import ChatMarkers
    return ChatMarkers.from_vocab(vocab())


def encode(texts):
    return [e.ids for e in vocab().tokenizer.encode_batch(texts, add_special_tokens=False)]


def parse(row: dict, **form):
    from curation.recipe.schema import Conversations
    from curation.steps.conversation.turns import parse_conversation
    return parse_conversation(row, Conversations(**form))


def render(row: dict, *, thinking: bool = True, **form):
    from curation.steps.conversation import chat
    from curation.steps.conversation.turns import SEPARATOR
    p = parse(row, **form)
    v = vocab()
    return chat.render(p.chat, p.text.split(SEPARATOR), markers(), encode, v.eod_id, thinking=thinking,
                       special=(v.eod_id, v.pad_id))


def decoded(tokens) -> str:
    from curation.steps.conversation.chat import describe
    return "".join(describe(tokens, vocab()))


def runs(tokens, mask) -> list[tuple[bool, str]]:
    """The decoded tokens as maximal runs of equal mask: [(trained, text), ...]; every token is in one run."""
    from curation.steps.conversation.chat import describe
    out: list[tuple[bool, str]] = []
    for piece, m in zip(describe(tokens, vocab()), mask):
        if out and out[-1][0] == bool(m):
            out[-1] = (bool(m), out[-1][1] + piece)
        else:
            out.append((bool(m), piece))
    return out
