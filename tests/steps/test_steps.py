import gzip
import json

import pytest

from curation.core.hashing import content_hash
from curation.core.record import Drop, QuarantineSink, Record
from curation.corpus.exact import resolve_duplicates
from curation.errors import StepFailed
from curation.recipe import schema
from curation.steps.base import Filter
from curation.steps.droplist import DropListed
from curation.steps.text.filters.document import DatatroveFilter, LanguageFilter, LengthFilter
from curation.steps.text.normalize import Normalize
from curation.steps.text.readers.read import JsonlReader
from tests.conftest import english_doc


def _read(path, **kw):
    sink = QuarantineSink()
    reader = JsonlReader(path, text_field="text", id_field=kw.pop("id_field", "id"), metadata_fields=["url"],
                         shard_label=path.name, source="s", sink=sink)
    records = list(reader.run())
    assert reader.stats.balanced()
    return records, reader.stats, sink


def test_reader_quarantines_each_kind_of_bad_line(tmp_path):
    good = json.dumps({"id": "a", "text": "fine", "url": "http://x"}).encode()
    lines = [good, b"{not json", b'{"id": "b", "text": "caf\xe9"}', b"[1, 2]", b'{"id": "c"}',
             b'{"id": "d", "text": 5}', b'{"text": "no id"}', b'{"id": "a", "text": "again"}', b"", good[:0]]
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n")
    records, stats, sink = _read(p)
    assert [r.id for r in records] == ["a"] and records[0].meta == {"url": "http://x"}
    assert dict(stats.quarantined) == {"malformed_json": 1, "invalid_utf8": 1, "not_an_object": 1,
                                       "missing_text": 2, "missing_id": 1, "duplicate_id": 1}
    assert stats.records_in == 8 and stats.records_out == 1
    utf8 = next(e for e in sink.entries if e["reason"] == "invalid_utf8")
    assert utf8["id"] == "bad.jsonl:3" and "line 3" in utf8["detail"] and "\\xe9" in utf8["raw"]


def test_empty_file_is_a_quarantine_entry(tmp_path):
    p = tmp_path / "empty.jsonl"
    p.write_bytes(b"\n\n")
    records, stats, sink = _read(p)
    assert records == [] and dict(stats.quarantined) == {"empty_file": 1}
    assert "has no records" in sink.entries[0]["detail"]


def test_truncated_gzip_keeps_lines_before_the_damage(tmp_path):
    rows = [json.dumps({"id": str(i), "text": english_doc(i)}) for i in range(200)]
    data = gzip.compress(("\n".join(rows) + "\n").encode(), mtime=0)
    p = tmp_path / "cut.jsonl.gz"
    p.write_bytes(data[: len(data) // 2])
    records, stats, _ = _read(p)
    assert 0 < len(records) < 200
    assert dict(stats.quarantined) == {"truncated_gzip": 1}


def test_ids_default_to_file_and_line(tmp_path):
    p = tmp_path / "n.jsonl"
    p.write_text('{"text": "one"}\n{"text": "two"}\n')
    records, _, _ = _read(p, id_field=None)
    assert [r.id for r in records] == ["n.jsonl:1", "n.jsonl:2"]


def test_normalize_fixes_mojibake_and_composes():
    step = Normalize(source="s")
    recs = [Record("1", "s", "The cafÃ© is open"), Record("2", "s", "Cafe\u0301"), Record("3", "s", " \n ")]
    out = list(step.run(recs))
    assert [r.text for r in out] == ["The café is open", "Café"]
    assert dict(step.stats.dropped) == {"empty_after_normalize": 1} and step.stats.balanced()


def test_length_filter_reasons():
    f = LengthFilter(schema.LengthFilter(type="length", min_words=3, max_chars=30), source="s")
    out = list(f.run([Record("1", "s", "one two"), Record("2", "s", "one two three"),
                      Record("3", "s", "word " * 20)]))
    assert [r.id for r in out] == ["2"]
    assert dict(f.stats.dropped) == {"too_few_words": 1, "too_many_chars": 1}


def test_datatrove_filter_keeps_its_reasons():
    f = DatatroveFilter(schema.GopherQualityFilter(type="gopher_quality"), source="s")
    out = list(f.run([Record("short", "s", "Too short to pass."), Record("ok", "s", english_doc(0, 120))]))
    assert [r.id for r in out] == ["ok"]
    assert dict(f.stats.dropped) == {"gopher_short_doc": 1}


def test_c4_filter_edits_are_kept():
    f = DatatroveFilter(schema.C4QualityFilter(type="c4_quality", min_num_sentences=1), source="s")
    text = english_doc(0) + "\nPlease enable javascript to view this page.\n" + english_doc(1)
    rec = next(iter(f.run([Record("1", "s", text)])))
    assert "javascript" not in rec.text and "Document 1." in rec.text


def test_language_filter_with_bundled_model():
    f = LanguageFilter(schema.LanguageFilter(type="language", languages=["de"]), source="s")
    de = Record("de", "s", "Die Stadtbibliothek öffnet am Montag wieder ihre Türen für alle Besucher.")
    en = Record("en", "s", english_doc(1))
    out = list(f.run([de, en]))
    assert [r.id for r in out] == ["de"] and out[0].meta["language"] == "de"
    assert dict(f.stats.dropped) == {"language_en": 1}


class Explodes(Filter):
    name = "explodes"

    def keep(self, record):
        if record.id == "bad":
            raise ValueError("boom")
        return True


@pytest.mark.parametrize("policy", ["quarantine", "skip"])
def test_on_error_policies_account_for_the_record(policy):
    sink = QuarantineSink()
    f = Explodes(on_error=policy, source="s", sink=sink)
    out = list(f.run([Record("ok", "s", "x"), Record("bad", "s", "y")]))
    assert [r.id for r in out] == ["ok"] and f.stats.balanced()
    counter = f.stats.quarantined if policy == "quarantine" else f.stats.dropped
    assert dict(counter) == {"error:ValueError": 1}
    assert len(sink.entries) == (1 if policy == "quarantine" else 0)


def test_on_error_raise_names_step_record_and_fix():
    f = Explodes(on_error="raise", source="s")
    with pytest.raises(StepFailed, match=r"step 'explodes' failed on record 'bad' of source 's'.*on_error"):
        list(f.run([Record("bad", "s", "y")]))


def test_exact_dedup_keeps_first_in_canonical_order():
    h = [content_hash(t) for t in ("x", "y", "x")]
    shards = [("a", "00000", [h[0], h[1]], ["a1", "a2"], [None, None]), ("b", "00000", [h[2]], ["b1"], [None]),
              ("b", "00001", [h[0]], ["b2"], [None])]
    glob = resolve_duplicates(shards, "global")
    assert [(d["source"], d["id"], d["duplicate_of_id"]) for d in glob] == [("b", "b1", "a1"), ("b", "b2", "a1")]
    per_source = resolve_duplicates(shards, "source")
    assert [(d["id"], d["duplicate_of_id"]) for d in per_source] == [("b2", "b1")]
    f = DropListed("exact_dedup", {"b1": "exact_duplicate"}, source="b")
    assert [r.id for r in f.run([Record("b1", "b", "x"), Record("b9", "b", "z")])] == ["b9"]
    assert dict(f.stats.dropped) == {"exact_duplicate": 1}


def test_url_dedup_drops_recrawls_of_the_same_page():
    from curation.core.urls import normalize_url

    assert normalize_url("HTTPS://Example.COM:443/a?b=1#frag") == "https://example.com/a?b=1"
    assert normalize_url("http://example.com") == "http://example.com/"
    assert normalize_url("http://example.com:8080/x") == "http://example.com:8080/x"
    assert normalize_url("ftp://example.com/x") is None and normalize_url("not a url") is None
    assert normalize_url("http://[::1/x") is None  # malformed: no URL, no crash
    assert normalize_url("http://[::1]:8080/x") == "http://[::1]:8080/x" != normalize_url("http://[::1:8080]/x")
    assert normalize_url("http://Bücher.DE/x") == normalize_url("http://xn--bcher-kva.de/x")
    u = normalize_url("https://example.com/page")
    shards = [("a", "0", [content_hash("v1"), content_hash("v2"), content_hash("v1")], ["a1", "a2", "a3"],
               [u, u, None])]
    rows = resolve_duplicates(shards, "global")
    assert [(d["id"], d["reason"], d["duplicate_of_id"]) for d in rows] == [
        ("a2", "url_duplicate", "a1"), ("a3", "exact_duplicate", "a1")]


def test_drop_from_keep_uses_given_reason():
    class Odd(Filter):
        name = "odd"

        def keep(self, record):
            return Drop("odd_id") if int(record.id) % 2 else True

    f = Odd(source="s")
    assert [r.id for r in f.run([Record(str(i), "s", "t") for i in range(4)])] == ["0", "2"]
    assert dict(f.stats.dropped) == {"odd_id": 2}


def test_language_filter_takes_a_model_file_from_the_recipe(tmp_path):
    import shutil

    from curation.errors import RecipeError
    from curation.steps.text.filters.document import bundled_lid_model

    shutil.copy(bundled_lid_model(), tmp_path / "lid.ftz")
    cfg = schema.LanguageFilter(type="language", languages=["en"], model="lid.ftz")
    f = LanguageFilter(cfg, source="s", base_dir=tmp_path)
    assert [r.id for r in f.run([Record("en", "s", english_doc(1))])] == ["en"]
    missing = schema.LanguageFilter(type="language", languages=["en"], model="nope.bin")
    with pytest.raises(RecipeError, match=r"model file .*nope.bin not found"):
        LanguageFilter(missing, source="s", base_dir=tmp_path)


def test_conversations_are_read_with_all_turns(tmp_path):
    from curation.steps.text.readers.read import JsonlReader
    path = tmp_path / "chat.jsonl"
    rows = [{"id": "a", "messages": [{"role": "user", "content": "Question?"}, {"role": "assistant", "content": "Answer."}]},
            {"id": "b", "messages": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}]},
            {"id": "c", "messages": [{"role": "user", "content": None}]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    reader = JsonlReader(path, text_field="messages", id_field="id", metadata_fields=[], shard_label="chat",
                         source="s", sink=QuarantineSink())
    assert [(r.id, r.text) for r in reader.run()] == [("a", "Question?\n\nAnswer."), ("b", "Hi\n\nHello")]
    assert dict(reader.stats.quarantined) == {"missing_text": 1}


def test_reader_evidence_names_the_input_as_the_recipe_does(tmp_path):
    """Quarantine and drop details name the shard label, not this checkout's absolute path, so the same
    recipe run from another folder writes the same decisions."""
    p = tmp_path / "deep" / "bad.jsonl"
    p.parent.mkdir()
    p.write_bytes(b'{not json\n{"id": "a", "text": "fine"}\n{"id": "a", "text": "again"}\n')
    sink = QuarantineSink()
    reader = JsonlReader(p, text_field="text", id_field="id", metadata_fields=[], shard_label="src/deep/bad.jsonl", source="s", sink=sink)
    assert [r.id for r in reader.run()] == ["a"]
    details = [e["detail"] for e in sink.entries]
    assert len(details) == 2 and all(str(tmp_path) not in d for d in details)
    assert all(d.startswith("src/deep/bad.jsonl") for d in details)
