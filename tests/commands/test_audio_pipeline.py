"""recipes/audio.yaml end to end: checks with reasons, audio dedup, interleaved sequences in the shards
(verified against the rules by parsing the tokens back), determinism, megatron-core, resume after kill."""
from __future__ import annotations

import json
import shutil
import signal

import numpy as np
import pytest

from tests.conftest import REPO
from tests.killing import killed_worker, tokenize_shard
from tests.sessions import private_copy

RECIPE = REPO / "recipes" / "audio.yaml"
CODEC = "curation.steps.audio.codec:WavTokenizerEncoder"


def _segments(tokens: list[int], vocab) -> list[tuple[str, int]]:
    """A sequence as (kind, length) segments: audio / text / S (speech-to-text) / T (text-to-speech) /
    R (transcribe: a transcription pair's own task marker)."""
    s2t, t2s, tr, a0, a1 = (vocab.marker(m) for m in ("speech_to_text", "text_to_speech", "speech_transcribe",
                                                       "audio_start", "audio_end"))
    out, i = [], 0
    assert tokens[-1] == vocab.eod_id
    body = tokens[:-1]
    while i < len(body):
        t = body[i]
        if t == a0:
            j = body.index(a1, i)
            assert all(x in vocab.block("audio") for x in body[i + 1:j])
            out.append(("audio", j - i - 1))
            i = j + 1
        elif t in (s2t, t2s, tr):
            out.append(({s2t: "S", t2s: "T", tr: "R"}[t], 1))
            i += 1
        else:
            j = i
            while j < len(body) and body[j] in vocab.block("text") and body[j] not in (s2t, t2s, tr, a0):
                j += 1
            assert j > i, f"unexpected token {t}"
            out.append(("text", j - i))
            i = j
    return out


@pytest.mark.slow
def test_audio_recipe_end_to_end(audio_run, tmp_path, ray_local):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    from curation.commands.run import run
    from curation.core.vocab import Vocabulary
    from curation.shards import read_index, read_tokens

    a = audio_run                                                 # the local run, once per session
    reasons = {(d["source"], d["reason"]): d["records"] for d in a.rows["drops"] + a.rows["quarantine"]}
    assert reasons == {("speech", "silent"): 1, ("speech", "transcript_mismatch"): 1,
                       ("speech", "undecodable_audio"): 1, ("unpaired", "audio_near_duplicate"): 1}
    [cluster] = a.rows["audio_clusters"]
    assert cluster["members"] == ["speech/LJ001-0002", "unpaired/lj0002_16k"] and cluster["kind"] == "near"
    audio = {r["source"]: r for r in a.rows["audio"]}
    # two runs of four clips (0005 is missing): per run copies A and B and one transcription pair
    assert (audio["speech"]["clips"], audio["speech"]["interleaved"], audio["speech"]["transcription"]) == (8, 4, 2)
    assert (audio["unpaired"]["clips"], audio["unpaired"]["audio_only"]) == (2, 2)
    assert audio["speech"]["audio_codes"] == pytest.approx(40 * 3600 * audio["speech"]["hours"] - 8 * 5, abs=8)

    vocab = Vocabulary.load(REPO / "tokenizers" / "curate-demo-v1.yaml")
    prefix = a.out / "tokenized" / "speech" / "speech"
    _, lengths, _, _ = read_index(prefix.with_suffix(".idx"))
    tokens = read_tokens(prefix).tolist()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    audio_segments = transcribed = 0
    for k in range(len(lengths)):
        segs = _segments(tokens[starts[k]:starts[k + 1]], vocab)
        kinds = [s for s, _ in segs]
        assert kinds[-1] == "text"                                    # every sequence ends with text
        content = [s for s in kinds if s in ("audio", "text")]
        assert all(x != y for x, y in zip(content, content[1:]))    # modality alternates clip by clip
        for x, marker, _y in zip(kinds[::2], kinds[1::2], kinds[2::2]):
            assert marker in (("S", "R") if x == "audio" else ("T",))   # the right task marker
        assert "R" not in kinds or len(content) == 2                    # "transcribe" only in a pair
        audio_segments += kinds.count("audio")
        transcribed += kinds.count("R")
    assert audio_segments == 8                                         # every clip once as audio
    assert transcribed == audio["speech"]["transcription"]
    ds = IndexedDataset(str(prefix))
    assert len(ds) == len(lengths) and ds[0].tolist() == tokens[:lengths[0]]

    b = run(RECIPE, tmp_path / "w2", workers=2, progress=False, executor="ray")  # Ray = the local executor
    for source in ("speech", "unpaired"):
        for ext in ("bin", "idx"):
            assert (a.out / "tokenized" / source / f"{source}.{ext}").read_bytes() == \
                (tmp_path / "w2" / "tokenized" / source / f"{source}.{ext}").read_bytes()
    assert [dict(r, run=None) for r in b.rows["audio"]] == [dict(r, run=None) for r in a.rows["audio"]]


@pytest.mark.slow
def test_killed_audio_worker_resumes_from_its_saved_batches(audio_run, tmp_path):
    from curation.commands.run import run
    a = audio_run.out                                             # the complete run, shared: resume a copy
    b = private_copy(a, tmp_path / "b")
    for marker in [*(b / "work" / "markers" / "tokenize" / "speech").glob("*.json"),
                   b / "work" / "markers" / "merge" / "speech.json"]:
        marker.unlink()
    shutil.rmtree(b / "tokenized" / "speech")
    assert killed_worker(RECIPE, b, "speech", CODEC, 3) == -signal.SIGKILL
    saved = sorted((b / "tokenized" / "speech" / "parts").glob("*.codes/*.npz"))
    assert len(saved) == 2                                            # batches 1 and 2 were checkpointed
    [marker] = [json.loads(p.read_text()) for p in (a / "work" / "markers" / "tokenize" / "speech").glob("*.json")]
    batches = marker["stats"][-1]["notes"]["batches"]
    assert batches >= 3 and tokenize_shard(RECIPE, b, "speech", CODEC) == batches - 2   # only the rest re-encoded
    assert not list((b / "tokenized" / "speech" / "parts").glob("*.codes"))  # checkpoints gone once complete
    run(RECIPE, b, progress=False)
    for ext in ("bin", "idx"):
        assert (a / "tokenized" / "speech" / f"speech.{ext}").read_bytes() == \
            (b / "tokenized" / "speech" / f"speech.{ext}").read_bytes()


@pytest.mark.slow
def test_transcript_in_a_benchmark_removes_only_that_clip(tmp_path):
    """Decontamination covers audio transcripts: the clip whose transcript is a benchmark item goes,
    by id; its recording's run splits there, and nothing else of the source is removed."""
    from curation.commands.run import run
    lines = (REPO / "recipes" / "audio" / "speech" / "speech.jsonl").read_text().splitlines()
    transcripts = {json.loads(line)["audio"]: json.loads(line)["text"] for line in lines}
    (tmp_path / "bench.jsonl").write_text(json.dumps({"id": "q1", "question": transcripts["LJ001-0003.ogg"]}) + "\n")
    text = RECIPE.read_text().replace("../tokenizers/", f"{REPO}/tokenizers/").replace(
        "audio/speech/", f"{REPO}/recipes/audio/speech/").replace("audio/unpaired/", f"{REPO}/recipes/audio/unpaired/")
    text += f"""
decontamination:
  benchmarks: [{{name: read_aloud, path: {tmp_path / 'bench.jsonl'}, fields: [question], id_field: id}}]
"""
    (tmp_path / "r.yaml").write_text(text)
    result = run(tmp_path / "r.yaml", tmp_path / "out", progress=False)
    [row] = [d for d in result.rows["decontamination"] if d["source"] == "speech" and d["benchmark"] != "(all)"]
    assert (row["benchmark"], row["removed"], row["original"]) == ("read_aloud", 1, 8)
    audio = {r["source"]: r for r in result.rows["audio"]}["speech"]
    # runs 1-2 | 4 and 6-9: copies and pairs of the two longer runs, two pairs for the 2-clip run, one for 4
    assert audio["clips"] == 7 and audio["interleaved"] == 2 and audio["transcription"] == 4


@pytest.mark.slow
def test_audio_folder_with_sidecar_transcripts(tmp_path):
    """A folder of clips (sub-folder = recording, sorted names = order, `.txt` = transcript) is acquired
    into raw/ with a clip manifest and runs like any manifest."""
    from curation.commands.run import run
    lines = [json.loads(x) for x in (REPO / "recipes" / "audio" / "speech" / "speech.jsonl").read_text().splitlines()]
    chapter = tmp_path / "clips" / "LJ001"
    chapter.mkdir(parents=True)
    for n, line in enumerate(lines[:3]):
        shutil.copyfile(REPO / "recipes" / "audio" / "speech" / line["audio"], chapter / f"{n:02d}.ogg")
        (chapter / f"{n:02d}.txt").write_text(line["text"])
    shutil.copyfile(REPO / "recipes" / "audio" / "unpaired" / "humpback.ogg", tmp_path / "clips" / "whale.ogg")
    (tmp_path / "r.yaml").write_text(f"""name: folder
vocabulary: {REPO / 'tokenizers' / 'curate-demo-v1.yaml'}
audio_tokenizer: {REPO / 'tokenizers' / 'curate-demo-wavtokenizer.yaml'}
sources:
  - name: clips
    modality: audio
    license: public-domain
    optout: not_available
    acquire: {{kind: audio_folder, path: clips}}
    input: {{format: audio, paths: [clips.jsonl], id_field: id}}
""")
    res = run(tmp_path / "r.yaml", tmp_path / "out", progress=False)
    [row] = res.rows["audio"]
    # LJ001: one run of three clips (copies A and B, one transcription pair); the whale: audio only
    assert (row["clips"], row["interleaved"], row["transcription"], row["audio_only"]) == (4, 2, 1, 1)


@pytest.mark.slow
def test_long_sequences_go_to_the_long_context_pool_shards(audio_run, tmp_path):
    """Sequences longer than the stage-2 limit are written to `<source>.long_context`, the rest stay."""
    import pyarrow.parquet as pq

    from curation.core.record import Record
    from curation.core.vocab import Vocabulary
    from curation.shards import IndexedWriter, read_index
    from curation.steps.audio.codec import WavTokenizerEncoder
    from curation.steps.audio.tokenize import AudioTokenizer
    from curation.steps.codecs import load_codec
    [table] = (audio_run.out / "processed" / "speech").glob("*.parquet")   # read only
    rows = pq.read_table(table, columns=["id", "text", "meta"]).to_pylist()
    vocab = Vocabulary.load(REPO / "tokenizers" / "curate-demo-v1.yaml")
    tok = AudioTokenizer(vocab, load_codec(str(REPO / "tokenizers" / "curate-demo-wavtokenizer.yaml"), WavTokenizerEncoder),
                         max_batch_seconds=30, max_len=700, shar_dir=table.with_suffix(".shar"))
    writers = {"": IndexedWriter(tmp_path / "p"), ".long_context": IndexedWriter(tmp_path / "p.long_context")}
    for rec in tok.run(Record(id=r["id"], source="speech", text=r["text"], meta=json.loads(r["meta"])) for r in rows):
        for suffix, sequences in rec.shards.items():
            for seq in sequences:
                writers[suffix].add(seq)
    for w in writers.values():
        w.close()
    _, s, _, _ = read_index(tmp_path / "p.idx")
    _, lc, _, _ = read_index(tmp_path / "p.long_context.idx")
    assert s.size and lc.size and s.max() <= 700 < lc.min()
    assert (tok.stats.notes["stage2"], tok.stats.notes["long_context"]) == (s.size, lc.size)
    assert tok.stats.records_in == tok.stats.records_out == len(rows)   # every clip accounted for
