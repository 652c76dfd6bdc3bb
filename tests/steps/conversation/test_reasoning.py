"""SFT-style sources with `reasoning:` also get a merged copy without the reasoning spans: plain documents lose
the spans' text, conversations are rendered again without their thinking spans, every other marker kept and no
segment separator (a private-use character) leaking into the tokens."""
from __future__ import annotations

import pytest

from tests.conftest import VOCAB, write_jsonl


@pytest.mark.slow
def test_merge_writes_a_copy_without_reasoning_spans(tmp_path):
    from curation.commands.run import run
    from curation.core.vocab import Vocabulary
    from curation.shards import read_index, read_tokens
    rows = [{"id": "a", "text": "Question: two plus two? <think>2 + 2 is 4, check: yes.</think> Answer: four."},
            {"id": "b", "text": "No reasoning here, just an answer."},
            {"id": "c", "text": "Start <think>first</think> middle <think>second</think> end <think>unclosed"}]
    path = write_jsonl(tmp_path / "sft.jsonl", rows)
    chats = write_jsonl(tmp_path / "chat.jsonl", [
        {"id": "t", "messages": [{"role": "user", "content": "Two plus two?"},
                                 {"role": "assistant", "content": "<think>2 + 2 = 4.</think>Four."}]},
        {"id": "n", "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}])
    (tmp_path / "r.yaml").write_text(f"""name: sft
vocabulary: {VOCAB}
sources:
  - name: sft
    license: MIT
    category: SFT
    input: {{paths: [{path}], id_field: id}}
    reasoning: {{start: "<think>", end: "</think>"}}
  - name: chat
    license: MIT
    category: SFT
    input: {{paths: [{chats}], id_field: id, conversations: {{}}}}
    reasoning: {{start: "<think>", end: "</think>"}}
""")
    res = run(tmp_path / "r.yaml", tmp_path / "out", progress=False)
    tok = Vocabulary.load(VOCAB).tokenizer
    prefix = tmp_path / "out" / "tokenized" / "sft" / "sft"

    def docs(p):
        _, lengths, _, _ = read_index(p.with_name(p.name + ".idx"))
        flat, out, i = read_tokens(p).tolist(), [], 0
        for n in lengths:
            out.append(tok.decode(flat[i:i + n - 1]))
            i += n
        return out

    full, stripped = docs(prefix), docs(prefix.with_name("sft.no_reasoning"))
    assert [d.count("<think>") for d in full] == [1, 0, 3]
    assert stripped == ["Question: two plus two?  Answer: four.", "No reasoning here, just an answer.",
                        "Start  middle  end "]
    assert {r["source"]: r["documents"] for r in res.rows["tokens"]} == {"sft": 3, "chat": 2}   # default shards

    from curation.steps.conversation.chat import describe
    v = Vocabulary.load(VOCAB)
    chat = tmp_path / "out" / "tokenized" / "chat" / "chat"
    full, stripped = read_tokens(chat).tolist(), read_tokens(chat.with_name("chat.no_reasoning")).tolist()
    text = "".join(describe(stripped, v))
    assert text == "".join(describe(full, v)).replace("<|inner_prefix|>2 + 2 = 4.<|inner_suffix|>", "") \
        .replace("Deliberation: enabled", "Deliberation: disabled")
    assert not any(0xE000 <= ord(ch) <= 0xF8FF for ch in v.tokenizer.decode(stripped))
    markers = [t for t in stripped if t in v.block("reserved")]
    assert len(markers) == 2 * 8 and v.marker("inner_prefix") not in markers   # four turns' markers each
