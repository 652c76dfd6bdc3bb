"""Conversations through the text steps: read (OpenAI and ShareGPT layouts, JSON lines and Parquet), normalised
and PII-redacted like any text, tokenized in the chat template, and copied without their reasoning."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.record import Record
from curation.recipe.schema import Conversations, Input
from curation.steps.conversation.reasoning import ReasoningStripper
from curation.steps.conversation.turns import SEPARATOR
from curation.steps.text.normalize import Normalize
from curation.steps.text.pii import PIIRedactor
from curation.steps.text.readers.read import JsonlReader, TableReader
from curation.steps.text.tokenize import TextTokenizer
from tests.chats import decoded, vocab
from tests.conftest import write_jsonl

OPENAI = {"id": "o1", "messages": [
    {"role": "user", "content": [{"type": "text", "text": "Mail bob@example.org about this"}, {"type": "image"}]},
    {"role": "assistant", "content": "<think>Use the mail tool.</think>Sending.",
     "tool_calls": [{"id": "m", "type": "function",
                     "function": {"name": "mail", "arguments": "{\"to\": \"bob@example.org\"}"}}]},
    {"role": "tool", "tool_call_id": "m", "content": "sent"},
    {"role": "assistant", "content": "Done."}],
    "images": ["shot.png"], "tools": [{"type": "function", "function": {"name": "mail", "parameters": {}}}]}
SHAREGPT = {"id": "s1", "conversations": [{"from": "human", "value": "<image>\nWhat is this?"},
                                          {"from": "gpt", "value": "A cat."}], "image": "cat.jpg"}


def _read(reader):
    records = list(reader.run())
    st = reader.stats
    assert st.records_in == st.records_out + sum(st.quarantined.values())
    return records, dict(st.quarantined)


def test_openai_rows_from_json_lines_and_parquet_give_the_same_records(tmp_path):
    bad = {"id": "o2", "messages": [{"role": "user", "content": "<image> and <image>"},
                                    {"role": "assistant", "content": "?"}], "images": ["only-one.png"]}
    path = write_jsonl(tmp_path / "chat.jsonl", [OPENAI, bad])
    form = Conversations()
    got, quarantined = _read(JsonlReader(path, text_field="text", id_field="id", metadata_fields=[],
                                         shard_label="chat", conversations=form))
    assert quarantined == {"placeholder_mismatch": 1}
    (rec,) = got
    assert rec.text.split(SEPARATOR) == ["Mail bob@example.org about this", "Use the mail tool.", "Sending.",
                                         '[{"mail": {"to": "bob@example.org"}}]', "sent", "Done."]
    assert rec.meta["media"] == [{"kind": "image", "ref": "shot.png"}]
    # Parquet (a Hugging Face snapshot): one type per column, messages as structs (absent keys read as null),
    # tools as a JSON string
    row = {"id": "o3", "tools": json.dumps(OPENAI["tools"]), "images": ["shot.png"], "messages": [
        {"role": "user", "content": "Mail bob@example.org about this <image>", "tool_calls": None},
        {"role": "assistant", "content": None, "tool_calls": OPENAI["messages"][1]["tool_calls"]},
        {"role": "tool", "content": "sent", "tool_calls": None},
        {"role": "assistant", "content": "Done.", "tool_calls": None}]}
    write_jsonl(path, [row])
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "chat.parquet")
    (from_jsonl,), _ = _read(JsonlReader(path, text_field="text", id_field="id", metadata_fields=[],
                                         shard_label="chat", conversations=form))
    (from_table,), _ = _read(TableReader(tmp_path / "chat.parquet", text_field="text", id_field="id",
                                         metadata_fields=[], shard_label="chat", conversations=form))
    assert (from_table.text, from_table.meta) == (from_jsonl.text, from_jsonl.meta)
    assert from_table.meta["chat"]["tools"] == [{"name": "mail", "description": "", "parameters": {}}]


def test_sharegpt_rows_with_a_single_image_field(tmp_path):
    path = write_jsonl(tmp_path / "llava.jsonl", [SHAREGPT])
    (rec,), _ = _read(JsonlReader(path, text_field="text", id_field="id", metadata_fields=[], shard_label="l",
                                  conversations=Conversations(messages_field="conversations", images_field="image")))
    assert rec.meta["media"] == [{"kind": "image", "ref": "cat.jpg"}]
    tokens = TextTokenizer(vocab()).conversation_tokens(rec)
    assert "<|user_start|><|image|>\nWhat is this?<|user_end|><|assistant_start|>A cat.<|assistant_end|>" \
        in decoded(tokens)


def test_text_steps_rewrite_segments_and_the_template_keeps_its_structure(tmp_path):
    path = write_jsonl(tmp_path / "chat.jsonl", [OPENAI])
    reader = JsonlReader(path, text_field="text", id_field="id", metadata_fields=[], shard_label="c",
                         conversations=Conversations())
    stream = PIIRedactor(kinds=("email",)).run(Normalize().run(reader.run()))
    tok = TextTokenizer(vocab())
    (rec,) = list(tok.run(stream))
    text = decoded(rec.shards[""][0])
    assert "bob@example.org" not in text and text.count("<|tools_prefix|>") == 1
    assert "\ue000" not in text and "<|tool_output_start|>sent<|tool_output_end|>Done.<|assistant_end|>" in text


def test_tokenizer_quarantines_a_conversation_whose_segments_were_lost():
    good = Record("a", "s", "Hi" + SEPARATOR + "Hello.", {"chat": {"system": None, "developer": None, "tools": [],
                  "turns": [["user", [["text", 0]]], ["assistant", [["text", 1]]]]}})
    lost = Record("b", "s", "Hi Hello.", dict(good.meta))
    media = Record("c", "s", good.text, {**good.meta, "media": [{"kind": "image", "ref": "x.png"}]})
    legacy = Record("d", "s", "Hi" + SEPARATOR + "Hello.", {"roles": ["user", "assistant"]})
    tok = TextTokenizer(vocab())
    out = list(tok.run([good, lost, media, legacy]))
    assert [r.id for r in out] == ["a", "d"] and dict(tok.stats.quarantined) == {"turns_lost": 1,
                                                                                 "placeholder_mismatch": 1}
    assert out[0].shards[""][0].tolist() == out[1].shards[""][0].tolist()   # earlier versions' records render alike


def test_the_copy_without_reasoning_keeps_every_marker_and_no_private_use_character(tmp_path):
    path = write_jsonl(tmp_path / "chat.jsonl", [OPENAI, {"id": "p", "messages": [
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}])
    tok = TextTokenizer(vocab())
    reader = JsonlReader(path, text_field="text", id_field="id", metadata_fields=[], shard_label="c",
                         conversations=Conversations())
    thinking, plain = list(tok.run(reader.run()))
    stripper = ReasoningStripper(tok, start="<think>", end="</think>")

    def strip(record):
        return stripper(record, record.shards[""][0])
    full, stripped = decoded(thinking.shards[""][0]), decoded(strip(thinking))
    assert stripped == full.replace("<|inner_prefix|>Use the mail tool.<|inner_suffix|>", "") \
        .replace("Deliberation: enabled", "Deliberation: disabled")
    assert "\ue000" not in stripped and not any(0xE000 <= ord(ch) <= 0xF8FF for ch in stripped)
    names = {vocab().marker(n): n for n in vocab().reserved}
    kept = [names[t] for t in strip(thinking).tolist() if t in names]
    assert kept == [names[t] for t in thinking.shards[""][0].tolist() if t in names and names[t] not in
                    ("inner_prefix", "inner_suffix")]
    assert strip(plain) is plain.shards[""][0]                 # nothing to strip: the same tokens
    doc = Record("d", "s", "Q? <think>hmm</think> A.")
    doc.shards = {"": [TextTokenizer(vocab()).tokenizer.encode(doc.text).ids]}
    assert vocab().tokenizer.decode(strip(doc).tolist()[:-1]) == "Q?  A."


def test_turn_roles_is_the_conversation_form_over_the_text_field():
    assert Input(paths=["x"], text_field="msgs", turn_roles=True).conversation_form() == \
        Conversations(messages_field="msgs")
    assert Input(paths=["x"]).conversation_form() is None
