"""Speech translation pairs (curation/steps/audio/interleave.py `translation`): audio in one language,
text in another, as a fourth audio sequence kind.

The unit tests parse the tokens back; the end-to-end test runs a clip manifest with German
translations of LJ Speech clips (public domain; the translations are written for this test) through
reading, checks, decontamination and tokenization, and parses the merged shards back.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from curation.core.vocab import Vocabulary
from curation.steps.audio.interleave import CONTROL_MARKERS, Clip, translation
from tests.conftest import REPO, VOCAB

SPEECH = REPO / "recipes" / "audio" / "speech"
# English transcript (LJ Speech) -> German translation, written for these tests
GERMAN = {
    "LJ001-0001": "Der Buchdruck, in dem einzigen Sinne, der uns hier beschäftigt, unterscheidet sich von den "
                  "meisten, wenn nicht von allen Künsten und Handwerken, die in der Ausstellung vertreten sind,",
    "LJ001-0002": "dadurch, dass er vergleichsweise modern ist.",
    "LJ001-0003": "Denn obwohl die Chinesen jahrhundertelang vor den Holzschneidern der Niederlande Abdrücke von "
                  "erhaben geschnittenen Holzstöcken nahmen, brachten diese durch ein ähnliches Verfahren",
    "LJ001-0004": "die Blockbücher hervor, die unmittelbaren Vorläufer des eigentlichen gedruckten Buches,",
    "LJ001-0006": "Und es ist nebenbei erwähnenswert, dass als Beispiel feiner Typografie",
}


@pytest.fixture(scope="module")
def vocab():
    return Vocabulary.load(VOCAB)


def split(tokens: list[int], vocab) -> list[tuple[str, list[int]]]:
    """A sequence as ("audio" codes | marker name | "text" ids) segments; the last token must be eod."""
    assert tokens[-1] == vocab.eod_id and vocab.eod_id not in tokens[:-1]
    names = {vocab.marker(m): m for m in vocab.reserved}
    a0, a1 = vocab.marker("audio_start"), vocab.marker("audio_end")
    out, i, body = [], 0, tokens[:-1]
    while i < len(body):
        if body[i] == a0:
            j = body.index(a1, i)
            codes = body[i + 1:j]
            assert all(c in vocab.block("audio") for c in codes)
            out.append(("audio", [c - vocab.block("audio").start for c in codes]))
            i = j + 1
        elif body[i] in names:
            out.append((names[body[i]], []))
            i += 1
        else:
            j = i
            while j < len(body) and body[j] in vocab.block("text"):
                j += 1
            assert j > i, f"unexpected token {body[i]}"
            out.append(("text", body[i:j]))
            i = j
    return out


def test_the_marker_is_new_and_no_existing_id_moved(vocab):
    # the ids the vocabulary had before speech_translate; changing any would invalidate existing shards
    before = {"image_start": 0, "image_size_end": 1, "end_of_row": 2, "image_end": 3, "audio_start": 4,
              "audio_end": 5, "speech_to_text": 6, "text_to_speech": 7, "end_of_frame": 8}
    assert {k: vocab.reserved[k] for k in before} == before
    assert vocab.marker("speech_translate") == vocab.block("reserved").start + vocab.reserved["speech_translate"]
    assert list(vocab.reserved.values()).count(vocab.reserved["speech_translate"]) == 1


def test_every_list_of_control_markers_agrees():
    from curation.shards.counting import AUDIO_MARKERS
    from curation.train.targets import CONTROL_MARKERS as TRAIN_CONTROL
    assert TRAIN_CONTROL == CONTROL_MARKERS and set(CONTROL_MARKERS) <= AUDIO_MARKERS


def test_translation_pair_layout(vocab):
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 4096, size=57)
    ids = np.array(vocab.tokenizer.encode(GERMAN["LJ001-0002"], add_special_tokens=False).ids, dtype=np.int64)
    clip = Clip("c", "rec", 0, 0.0, 1.5, codes, np.array([5, 6]), translation=ids)
    seq = translation(clip, vocab)
    assert seq.kind == "translation" and seq.clip_ids == ("c",) and seq.pool == "stage2"
    assert seq.layout == (("c", "audio"), ("c", "translation"))
    segs = split(seq.tokens.tolist(), vocab)
    assert [k for k, _ in segs] == ["audio", "speech_translate", "text"]
    assert segs[0][1] == codes.tolist() and segs[2][1] == ids.tolist()
    assert vocab.tokenizer.decode(segs[2][1]) == GERMAN["LJ001-0002"]
    assert seq.control_positions.tolist() == [59] and seq.tokens[59] == vocab.marker("speech_translate")
    assert seq.control_mask.sum() == 1
    assert translation(clip, vocab, max_len=50).pool == "long_context"


def test_translation_refuses_what_it_cannot_lay_out(vocab):
    codes = np.arange(10)
    with pytest.raises(ValueError, match="no translation"):
        translation(Clip("c", "r", 0, 0.0, 1.0, codes, np.array([1])), vocab)
    with pytest.raises(ValueError, match="translation contains the end-of-document token"):
        translation(Clip("c", "r", 0, 0.0, 1.0, codes, np.array([]), translation=np.array([7, vocab.eod_id])), vocab)
    with pytest.raises(ValueError, match="non-empty"):
        translation(Clip("c", "r", 0, 0.0, 1.0, codes, np.array([]), translation=np.array([], dtype=np.int64)), vocab)


def test_the_marker_is_never_a_target(vocab):
    import torch

    from curation.train.targets import TargetRules
    rules = TargetRules({"blocks": [{"name": b.name, "start": b.start, "size": b.size} for b in vocab.blocks],
                         "reserved": vocab.reserved, "eod": vocab.eod_id, "pad": vocab.pad_id}, "all")
    seq = translation(Clip("c", "r", 0, 0.0, 1.0, np.arange(8), np.array([]),
                           translation=np.array(vocab.tokenizer.encode("kurz", add_special_tokens=False).ids)), vocab)
    labels = torch.from_numpy(seq.tokens.astype(np.int64))[None]
    keep = rules.mask(labels, torch.ones_like(labels, dtype=torch.bool))[0].numpy()
    assert not keep[seq.control_mask].any() and keep[~seq.control_mask].all()


def test_reader_keeps_translations_and_quarantines_one_that_is_no_text(tmp_path):
    from curation.steps.audio.declaration import Audio
    from curation.steps.audio.ingest import AudioManifestReader
    lines = [{"audio": "a.ogg", "text": "hello", "translation": "hallo", "translation_language": "de"},
             {"audio": "b.ogg", "text": "world", "translation": ["welt"]},
             {"audio": "c.ogg", "text": "no translation"}, {"audio": "d.ogg", "translation": "  "},
             {"audio": "e.ogg", "translation": "bonjour", "translation_language": "fr"},
             {"audio": "f.ogg", "translation": "tschüss"}]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    reader = AudioManifestReader(path, settings=Audio(translation_field="translation", translation_language="de"),
                                 text_field="text", id_field=None, metadata_fields=[], shard_label="m.jsonl", source="s")
    records = list(reader.run())
    assert [r.id for r in records] == ["a", "c", "d", "f"]
    assert (records[0].meta["translation"], records[0].meta["translation_language"]) == ("hallo", "de")
    assert "translation" not in records[1].meta and "translation" not in records[2].meta   # blank: none
    assert records[3].meta["translation_language"] == "de"                # no language given: the source's
    assert dict(reader.stats.quarantined) == {"bad_translation": 1, "translation_language_mismatch": 1}
    plain = AudioManifestReader(path, settings=Audio(), text_field="text", id_field=None, metadata_fields=[],
                                shard_label="m.jsonl", source="s")
    assert all("translation" not in r.meta for r in plain.run())   # no translation_field: no translations


def test_a_translation_source_declares_its_target_language():
    from pydantic import ValidationError

    from curation.steps.audio.declaration import Audio
    with pytest.raises(ValidationError, match="translation_field needs translation_language"):
        Audio(translation_field="translation")


def _manifest(tmp_path: Path) -> Path:
    """Clips next to the manifest (clip files outside its folder are refused unless `input.allow_roots`)."""
    import shutil
    for f in SPEECH.glob("LJ*.ogg"):
        shutil.copyfile(f, tmp_path / f.name)
    transcripts = {json.loads(x)["audio"][:-4]: json.loads(x)["text"]
                   for x in (SPEECH / "speech.jsonl").read_text().splitlines()}
    rows = [{"audio": f"{cid}.ogg", "text": transcripts[cid], "recording": "LJ001",
             "order": int(cid[-4:]), "translation": GERMAN[cid], "translation_language": "de"}
            for cid in ("LJ001-0001", "LJ001-0002", "LJ001-0003", "LJ001-0004")]
    rows.append({"audio": "LJ001-0006.ogg", "recording": "LJ001", "order": 6,       # no transcript
                 "translation": GERMAN["LJ001-0006"], "translation_language": "de"})
    rows.append({"audio": "LJ001-0007.ogg", "recording": "LJ001", "order": 7})      # nothing: audio only
    rows.append({"audio": "LJ001-0008.ogg", "recording": "LJ001", "order": 8, "translation": 42})
    rows.append({"audio": "LJ001-0009.ogg", "recording": "LJ001", "order": 9,
                 "translation": " ".join([GERMAN["LJ001-0001"]] * 5)})                         # far too long
    path = tmp_path / "clips.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


@pytest.mark.slow
def test_translation_pairs_end_to_end_with_decontamination(tmp_path):
    """Translation pairs in the merged shards, parsed back; counted in the ledger; a benchmark item equal to
    one clip's translation removes that clip only."""
    from curation.commands.run import run
    from curation.ledger import query
    from curation.shards import read_index, read_tokens
    manifest = _manifest(tmp_path)
    (tmp_path / "bench.jsonl").write_text(json.dumps({"id": "q7", "text": GERMAN["LJ001-0003"]}) + "\n")
    (tmp_path / "r.yaml").write_text(f"""name: translation
vocabulary: {VOCAB}
audio_tokenizer: {REPO / 'tokenizers' / 'curate-demo-wavtokenizer.yaml'}
stages: [{{name: pretrain, seq_length: 2048}}]
decontamination:
  benchmarks: [{{name: translated_qa, path: {tmp_path / 'bench.jsonl'}, fields: [text], id_field: id}}]
sources:
  - name: speech_de
    modality: audio
    license: public-domain
    optout: not_available
    max_quarantine_share: 0.9
    input: {{format: audio, paths: [{manifest}]}}
    audio: {{max_batch_seconds: 30, translation_field: translation, translation_language: de}}
""")
    res = run(tmp_path / "r.yaml", tmp_path / "out", progress=False)
    reasons = {d["reason"]: d["records"] for d in res.rows["drops"] + res.rows["quarantine"]}
    assert reasons == {"bad_translation": 1, "translation_mismatch": 1, "contaminated:translated_qa": 1}
    _, got = query(tmp_path / "out" / "ledger", "SELECT id FROM decisions WHERE reason LIKE 'contaminated:%'")
    assert got == [("LJ001-0003",)]                    # the clip whose translation is the item, nothing else
    [audio] = res.rows["audio"]
    # runs 1-2 | 4 after the removal: three transcription pairs; translations of 1, 2, 4 and 6; 7 audio only
    assert (audio["clips"], audio["transcription"], audio["interleaved"], audio["translation"],
            audio["audio_only"]) == (5, 3, 0, 4, 1)

    vocab = Vocabulary.load(VOCAB)
    prefix = tmp_path / "out" / "tokenized" / "speech_de" / "speech_de"
    _, lengths, _, _ = read_index(prefix.with_suffix(".idx"))
    tokens = read_tokens(prefix).tolist()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    translated, kinds = {}, []
    for k in range(len(lengths)):
        segs = split(tokens[starts[k]:starts[k + 1]], vocab)
        kinds.append(tuple(name for name, _ in segs))
        if "speech_translate" in kinds[-1]:
            assert kinds[-1] == ("audio", "speech_translate", "text")
            translated[vocab.tokenizer.decode(segs[2][1])] = len(segs[0][1])
    assert sorted(translated) == sorted(GERMAN[c] for c in ("LJ001-0001", "LJ001-0002", "LJ001-0004", "LJ001-0006"))
    assert kinds.count(("audio", "speech_transcribe", "text")) == 3 and kinds.count(("audio",)) == 1
    translation_ids = sum(len(vocab.tokenizer.encode(t, add_special_tokens=False).ids) for t in translated)
    assert audio["translation_text_tokens"] == translation_ids
