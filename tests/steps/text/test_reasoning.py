"""SFT-style sources with `reasoning:` also get a merged copy without the reasoning spans."""
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
    (tmp_path / "r.yaml").write_text(f"""name: sft
vocabulary: {VOCAB}
sources:
  - name: sft
    license: MIT
    category: SFT
    input: {{paths: [{path}], id_field: id}}
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
    assert res.rows["tokens"][0]["documents"] == 3     # the ledger counts the shards trainers use by default
