"""recipes/interleaved.yaml end to end: interleaved documents (OBELICS Parquet, MINT-1T WebDataset) counted per
document and per image, deduplicated and decontaminated in both parts, opted out by page URL, tokenized in
reading order into shards megatron-core reads; conversations with their media expanded."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import REPO, VOCAB

RECIPE = REPO / "recipes" / "interleaved.yaml"


def _kinds(seq, vocab) -> str:
    """A sequence as its run of parts: T (text run), I (image block), E (end of document)."""
    out, inside = [], False
    start, end = vocab.marker("image_start"), vocab.marker("image_end")
    for t in seq.tolist():
        if t == start:
            out.append("I")
            inside = True
        elif t == end:
            inside = False
        elif t == vocab.eod_id:
            out.append("E")
        elif not inside and (not out or out[-1] != "T"):
            out.append("T")
    return "".join(out)


@pytest.fixture(scope="module")
def demo(interleaved_run):
    """(output folder, run result) of recipes/interleaved.yaml, run once per session (`tests/sessions.py`)."""
    return interleaved_run.out, interleaved_run


@pytest.mark.slow
def test_every_check_counts_documents_and_images_by_reason(demo):
    _, res = demo
    rows = res.rows
    reasons = sorted((d["source"], d["step"], d["reason"], d["records"]) for d in rows["drops"] + rows["quarantine"])
    assert reasons == [("mint", "decontaminate", "contaminated:lunar_vqa", 1),        # its photo is a benchmark image
                       ("obelics", "decontaminate", "contaminated:reading", 1),       # its text quotes the passage
                       ("obelics", "near_dedup", "near_duplicate", 1),                # a near-copy of the space page
                       ("obelics", "robots_optout", "robots_opt_out", 1),             # its domain opts out
                       ("sft_media", "conversation_media", "missing_media", 1)]       # an image by URL
    table = {r["source"]: r for r in rows["interleaved"]}
    ob, mint = table["obelics"], table["mint"]
    assert (ob["documents"], ob["images"], ob["images_listed"], ob["images_dropped"]) == (5, 7, 10, 3)
    assert dict(ob["images_dropped_by_reason"]) == {"image_near_duplicate": 1, "image_not_acquired": 1,
                                                    "truncated_image": 1}
    assert (mint["documents"], mint["images"], mint["images_listed"], mint["images_dropped"]) == (2, 3, 3, 0)
    for r in (ob, mint):
        assert r["images_listed"] == r["images"] + r["images_dropped"]              # images conserved
    clusters = {tuple(c["members"]) for c in rows["image_clusters"]}
    assert clusters == {("obelics/space-history#1", "obelics/space-history-copy#0"),  # the rocket, twice
                        ("obelics/tabby#0", "obelics/tabby-repost#0")}                  # the cat, re-encoded
    tokens = {t["source"]: t for t in rows["tokens"]}
    assert tokens["obelics"]["image_tokens"] == ob["image_tokens"] and tokens["obelics"]["text_tokens"] == ob["text_tokens"]
    decont = {(d["source"], d["benchmark"]): d["removed"] for d in rows["decontamination"]}
    assert decont[("obelics", "reading")] == 1 and decont[("mint", "lunar_vqa")] == 1


@pytest.mark.slow
def test_documents_are_in_reading_order_and_megatron_core_reads_the_shards(demo):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    from curation.core.vocab import Vocabulary
    from curation.mixture.manifests import verify_manifest
    from curation.shards import read_index, read_tokens
    out, res = demo
    vocab = Vocabulary.load(VOCAB)
    kinds = {}
    for source in ("obelics", "mint"):
        prefix = out / "tokenized" / source / source
        ds = IndexedDataset(str(prefix))
        _, lengths, _, _ = read_index(prefix.with_suffix(".idx"))
        flat = read_tokens(prefix)
        assert len(ds) == lengths.size and np.concatenate([ds[i] for i in range(len(ds))]).tolist() == flat.tolist()
        kinds[source] = [_kinds(ds[i], vocab) for i in range(len(ds))]
    # space-history, kitchen (its URL image gone: two text runs meet), tabby, tabby-repost (its cat gone), coins
    assert kinds["obelics"] == ["TITITIE", "TITE", "TITE", "TIE", "TITE"]
    assert kinds["mint"] == ["TITE", "ITIE"]                   # camera manual; clock repair starts with its image
    checked = verify_manifest(out / "manifests" / "pretrain.json")   # raises VerifyError on any mismatch
    assert [c.split(":")[0] for c in checked[:3]] == ["obelics", "mint", "sft_media"]


@pytest.mark.slow
def test_conversations_carry_their_expanded_media(demo):
    from curation.core.vocab import Vocabulary
    from curation.shards import read_index, read_tokens
    from curation.steps.conversation.chat import describe
    out, _ = demo
    vocab = Vocabulary.load(VOCAB)
    prefix = out / "tokenized" / "sft_media" / "sft_media"
    _, lengths, _, _ = read_index(prefix.with_suffix(".idx"))
    flat = read_tokens(prefix)
    docs = np.split(flat, np.cumsum(lengths)[:-1])
    photo, speech, plain = ("".join(describe(d, vocab)) for d in docs)
    assert "<|user_start|><|image_start|>" in photo and "<|image_end|>What kind of cat" in photo
    assert '<|tools_prefix|>[{"lookup_breed": {"breed": "tabby"}}]<|tools_suffix|>' in photo
    from curation.steps.audio.ingest import load_clip
    samples = load_clip(REPO / "recipes" / "interleaved" / "chat" / "media" / "LJ001-0002.ogg").size
    assert speech.count("<aud:") == -(-samples // 600)   # every code of the clip: 40 per second at 24 kHz
    assert "<|image|>" not in photo + speech and "<|audio|>" not in speech and "<img:" not in plain


@pytest.mark.slow
def test_ray_writes_the_same_bytes_as_the_local_executor(demo, tmp_path, ray_local):
    from curation.commands.run import run
    out, res = demo
    again = run(RECIPE, tmp_path / "ray", workers=2, progress=False, executor="ray")
    for source in ("obelics", "mint", "sft_media"):
        for ext in ("bin", "idx"):
            assert (out / "tokenized" / source / f"{source}.{ext}").read_bytes() == \
                (tmp_path / "ray" / "tokenized" / source / f"{source}.{ext}").read_bytes()
    strip = lambda rows: [{k: v for k, v in r.items() if k != "run"} for r in rows]  # noqa: E731
    assert strip(again.rows["interleaved"]) == strip(res.rows["interleaved"])
