"""Conversation loss masks from markers alone, as the trainer applies them: independent of packing, thinking by
the stage's setting, the assistant's markers trained in text-only stages, the output head covering them."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.chats import render, runs, vocab, vocab_dict
from tests.steps.conversation.test_chat import FULL

SECOND = {"messages": [{"role": "user", "content": "And tomorrow?"},
                       {"role": "assistant", "content": "<think>No forecast tool.</think>I cannot tell."}]}


def _stream():
    """Two conversations around a plain document, as a shard would hold them."""
    v = vocab()
    plain = np.asarray([*v.tokenizer.encode("A plain document.").ids, v.eod_id], dtype=np.int32)
    return [render(FULL).tokens, plain, render(SECOND).tokens]


@pytest.mark.parametrize("width", [7, 16, 33, 64])
def test_rows_cut_anywhere_get_the_masks_of_their_whole_documents(width):
    from curation.train.chat_mask import ConversationMask
    cm = ConversationMask(vocab_dict(), "mask")
    docs = _stream()
    expected = np.concatenate([cm.row(d)[0] for d in docs])
    tokens = np.concatenate(docs)
    number = np.concatenate([np.full(d.size, i) for i, d in enumerate(docs)])
    starts = np.cumsum([0] + [d.size for d in docs])
    rows = range(0, tokens.size - width + 1, width)
    batch, doc, leads = [], [], []
    for lo in rows:
        first = int(number[lo])
        batch.append(tokens[lo:lo + width])
        doc.append(number[lo:lo + width] - first)
        leads.append(docs[first][:lo - starts[first]])
    got = cm.batch(np.stack(batch), np.stack(doc), leads)
    assert (got == np.stack([expected[lo:lo + width] for lo in rows])).all()
    without = cm.batch(np.stack(batch), np.stack(doc))           # the lead is what makes it exact
    assert (without != got).any()


def test_plain_documents_and_legacy_tool_turns():
    from curation.train.targets import TargetRules
    v = vocab()
    U, A, T, E = (v.marker(m) for m in ("turn_user", "turn_assistant", "turn_tool", "end_of_turn"))
    #                 plain doc     | user turn     | assistant turn | tool output | assistant     | next doc
    labels = torch.tensor([[50, 51, v.eod_id, U, 60, E, A, 70, 71, E, T, 80, E, A, 90, E, v.eod_id, 99]])
    mask = TargetRules(vocab_dict(), "text").mask(labels, torch.ones_like(labels, dtype=torch.bool))
    assert mask.int().tolist() == [[1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1]]


@pytest.mark.parametrize("targets", ["text", "all"])
def test_stage_rules_keep_exactly_the_conversation_mask(targets):
    """In text-only stages the assistant's markers (end of turn, call and thinking delimiters) stay targets."""
    from curation.train.targets import TargetRules
    rules = TargetRules(vocab_dict(), targets, thinking="train")
    tokens = torch.from_numpy(render(FULL).tokens.astype(np.int64))[None]
    doc = torch.zeros_like(tokens)
    chat = rules.conversation(tokens.numpy(), doc.numpy())
    mask = rules.mask(tokens[:, 1:], torch.ones_like(tokens[:, 1:], dtype=torch.bool), chat[:, 1:])
    assert (mask == chat[:, 1:]).all()
    assert runs(tokens[0, 1:].numpy(), mask[0].numpy())[1][1].startswith("<|inner_prefix|>")


def test_the_output_head_covers_the_markers_conversations_train_on():
    from curation.train.chat_mask import trainable_ids
    from curation.train.loop import head_ids

    class Shards:                       # what `head_ids` reads of ManifestData: the token arrays
        def __init__(self, arrays):
            self.arrays = arrays

        def token_arrays(self):
            return self.arrays
    v = vocab()
    manifest = {"vocabulary": {**vocab_dict(), "text_ids": v.tokenizer.get_vocab_size()},
                "training": {"targets": "text"}}
    plain = head_ids(manifest, Shards([np.asarray(v.tokenizer.encode("plain text").ids, dtype=np.int32)]))
    assert plain.size == v.tokenizer.get_vocab_size()
    chat = head_ids(manifest, Shards([render(FULL).tokens]))
    assert sorted(chat[plain.size:].tolist()) == sorted(trainable_ids(manifest["vocabulary"]))
    assert np.unique(chat).size == chat.size
