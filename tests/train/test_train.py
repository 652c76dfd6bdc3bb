"""The reference trainer: refuses bad manifests, follows the sampling plan, resumes exactly, writes back."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import REPO
from tests.sessions import private_copy

TINY = dict(d_model=32, pattern="M*E", n_heads=2, n_kv_heads=1, mamba_d_state=8, mamba_head_dim=16,
            mamba_chunk_size=32, expert_hidden=32, n_experts=4, top_k=2, mlp_hidden=64)


@pytest.fixture()
def demo_copy(text_run, tmp_path):
    """A private copy of the demo output (training writes into its ledger)."""
    from curation.mixture.handoffs import relocate_handoff
    out = tmp_path / "demo"
    shutil.copytree(text_run.out, out, symlinks=True, ignore=shutil.ignore_patterns("raw", "work", "processed"))
    for manifest in (out / "manifests").glob("*.json"):
        relocate_handoff(manifest)      # the hand-off's absolute paths, for the copy
    return out


def _trainer(manifest, out, steps=6, **kw):
    from curation.train.loop import TrainConfig, Trainer
    from curation.train.model import ModelConfig
    cfg = TrainConfig(max_steps=steps, batch_size=2, seq_length=64, warmup_steps=2, checkpoint_every=3, log_every=100)
    return Trainer(manifest, out, cfg, ModelConfig.tiny(**TINY), **kw)


@pytest.mark.slow
def test_realised_shares_follow_the_plan_and_a_full_pass_is_exact(text_run):
    from curation.train.data import ManifestData
    data = ManifestData(text_run.out / "manifests" / "stage1.json", seq_length=256)
    planned = data.planned_tokens()
    total = sum(planned.values())
    seen = 0
    while seen < total // 3:                       # a third of the stage
        b = data.next_batch(4)
        seen += b.tokens.size
    got = {s: sum(n for (src, _), n in data.consumed.tokens.items() if src == s) for s in planned}
    for s in planned:
        share, want = got[s] / sum(got.values()), planned[s] / total
        # documents are drawn whole: the error is a few mean documents over the tokens seen
        mean_doc = planned[s] / max(1, data.manifest["sources"][data.names.index(s)]["plan"]["samples"])
        assert abs(share - want) < 4 * np.sqrt(want * mean_doc / seen) + 0.01, (s, share, want)
    fresh = ManifestData(text_run.out / "manifests" / "stage1.json", seq_length=256)
    while fresh.passes == 0 and fresh.cursor < fresh.order_doc.size - 1:
        fresh.next_batch(1)
    consumed = {s: sum(n for (src, _), n in fresh.consumed.tokens.items() if src == s) for s in planned}
    last = fresh.names[int(fresh.order_source[-1])]
    for s in planned:                                # every planned occurrence but the last one, exactly
        assert consumed[s] <= planned[s] and (s == last or consumed[s] == planned[s])


@pytest.mark.slow
def test_our_loader_reads_the_stream_megatron_core_draws_from_the_packed_hand_off(text_run):
    """`curate train` and Megatron-LM read one stream: our loader's rows, back to back, are the stage's packed
    prefix as megatron-core's IndexedDataset reads it (`tests/mixture/test_megatron_handoff.py` checks that
    Megatron's samples are that prefix's sequences, each drawn once)."""
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    from curation.mixture.manifests import megatron_blend
    from curation.train.data import ManifestData

    manifest = text_run.out / "manifests" / "stage1.json"
    (prefix,), weights = megatron_blend(manifest)
    assert weights is None
    stage = IndexedDataset(prefix)
    assert len(stage) == 1                                     # one document: the stage's sequences
    stream = np.array(stage[0])                                # a copy: the view dies with the dataset's map
    ours = ManifestData(manifest, seq_length=256)
    rows = np.concatenate([ours.next_batch(4).tokens.reshape(-1) for _ in range(100)])   # 100 x 4 x 257 tokens
    assert rows.size < stream.size and (rows == stream[:rows.size]).all()


@pytest.mark.slow   # the text demo run end to end (`text_run`)
def test_train_refuses_a_tampered_manifest(demo_copy, tmp_path):
    from curation.errors import VerifyError
    shard = demo_copy / "tokenized" / "web_en" / "web_en.bin"
    data = bytearray(shard.read_bytes())
    data[100] ^= 1
    shard.write_bytes(bytes(data))
    with pytest.raises(VerifyError, match="web_en.bin sha256 differs"):
        _trainer(demo_copy / "manifests" / "stage1.json", tmp_path / "t")


@pytest.mark.slow
def test_resume_reproduces_the_uninterrupted_run_and_consumed_reconciles(demo_copy, tmp_path):
    from curation.ledger import query
    from curation.mixture.manifests import verify_manifest
    manifest = demo_copy / "manifests" / "stage1.json"
    torch.set_num_threads(1)
    full = _trainer(manifest, tmp_path / "full", write_back=False).train(log=None)
    first = _trainer(manifest, tmp_path / "split").train(max_steps=3, log=None)
    resumed = _trainer(manifest, tmp_path / "split")
    assert resumed.step == 3
    rest = resumed.train(log=None)
    assert [h["loss"] for h in first + rest] == [h["loss"] for h in full]     # bit-exact continuation
    cols, rows = query(demo_copy / "ledger", "SELECT source, total_tokens, planned_tokens, steps FROM consumed")
    assert {r[3] for r in rows} == {6}
    assert sum(r[1] for r in rows) == 6 * 2 * 65                              # steps x batch x (seq + 1)
    assert all(r[1] <= r[2] for r in rows)
    verify_manifest(manifest)              # the write-back leaves the manifest's frozen tables intact
    from curation.ledger import read_rows
    from curation.report import write_report
    html = write_report(read_rows(demo_copy / "ledger"), demo_copy).read_text()
    assert "Planned vs consumed" in html


def test_targets_follow_the_stage_rules():
    from curation.core.vocab import Vocabulary
    from curation.train.targets import TargetRules
    v = Vocabulary.load(REPO / "tokenizers" / "curate-demo-v1.yaml")
    vocab = {"blocks": [{"name": b.name, "start": b.start, "size": b.size} for b in v.blocks],
             "reserved": v.reserved, "eod": v.eod_id, "pad": v.pad_id}
    audio = v.block("audio").start + 7
    labels = torch.tensor([[50, v.marker("audio_start"), audio, v.marker("audio_end"), v.marker("speech_to_text"),
                            60, v.eod_id, v.pad_id]])
    same = torch.ones_like(labels, dtype=torch.bool)
    text_only = TargetRules(vocab, "text").mask(labels, same)
    everything = TargetRules(vocab, "all").mask(labels, same)
    assert text_only.tolist() == [[True, False, False, False, False, True, True, False]]
    assert everything.tolist() == [[True, True, True, True, False, True, True, False]]   # markers: never S/T
    # an image block: its "H*W" size is text ids, a target only where the image is (stage 1)
    size = v.tokenizer.encode("8*8").ids
    img = v.block("image").start + 3
    block = torch.tensor([[50, v.marker("image_start"), *size, v.marker("image_size_end"), img, img,
                           v.marker("image_end"), 60]])
    ones = torch.ones_like(block, dtype=torch.bool)
    assert TargetRules(vocab, "text").mask(block, ones).tolist() == [[True] + [False] * (len(size) + 5) + [True]]
    assert TargetRules(vocab, "all").mask(block, ones).all()
    same[0, 5] = False                                   # a label that starts another document
    assert not TargetRules(vocab, "all").mask(labels, same)[0, 5]
    rules = TargetRules(vocab, "text", {"k": 10, "h": 8})
    g = torch.randint(2, 16000, (64, 512))
    drop = rules.goldfish_drop(g)
    assert 0.08 < float(drop[:, 7:].float().mean()) < 0.12
    assert not drop[:, :7].any()                          # no whole context yet
    copy = g.clone()
    copy[:, 300] = 5                                      # same context elsewhere -> same decision
    changed = rules.goldfish_drop(copy) != drop
    assert not changed[:, :300].any() and not changed[:, 308:].any()


@pytest.mark.slow
def test_trains_on_audio_shards_with_a_head_over_the_codes_used(audio_run, tmp_path):
    out = private_copy(audio_run.out, tmp_path / "audio", handoff=True)   # training writes into the ledger
    t = _trainer(out / "manifests" / Path(audio_run.manifests[0]).name, tmp_path / "t", steps=2)
    assert t.manifest["training"]["targets"] == "all"
    n_text = t.manifest["vocabulary"]["text_ids"]
    assert len(t.head_ids) > n_text + 200                  # text, markers and the audio codes in use
    hist = t.train(log=None)
    assert np.isfinite([h["loss"] for h in hist]).all()


@pytest.mark.slow
def test_ablate_ranks_the_demo_candidates(text_run, tmp_path, capsys, monkeypatch):
    """`curate ablate` end to end on the text demo: same seed and steps for every candidate, held-out
    documents withheld from all, four suite-level signals (EN/DE bits per byte, lower-better; EN/DE
    normalized rank-choice accuracy, higher-better) at each checkpoint of the learning curve, the
    terminal average rank from the last checkpoint only, the Table 13 table and the rank curve. A short
    curve (4 steps, a checkpoint every 2,048 tokens, 10 items per choice set) keeps it to minutes."""
    from curation.commands import ablate as ablate_module
    from curation.commands.cli import main
    from curation.mixture.ranks import average_ranks
    from curation.train.model import ModelConfig
    out = tmp_path / "demo"
    shutil.copytree(text_run.out, out, symlinks=True)
    real = ablate_module.ablate   # the CLI with the test's tiny model (the recipe's proxy is the default tiny)
    monkeypatch.setattr(ablate_module, "ablate", lambda *a, **k: real(*a, **{**k, "model_cfg": ModelConfig.tiny(**TINY)}))
    assert main(["ablate", str(REPO / "recipes" / "text.yaml"), "--out", str(out), "--steps", "4",
                 "--checkpoint-tokens", "2048", "--choice-limit", "10", "--workers", "1"]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "ablation" / "ablation.json").read_text())
    names = {r["candidate"] for r in summary["candidates"]}
    assert names == {"english_heavy", "german_heavy", "even"}
    sigs = {s["name"]: s for s in summary["signals"]}
    assert list(sigs) == ["de_bpb", "en_bpb", "de_acc", "en_acc"]
    assert [s["higher_is_better"] for s in sigs.values()] == [False, False, True, True]
    assert sigs["en_acc"]["sets"] == ["arc_en", "mmlu_en"] and sigs["de_acc"]["sets"] == ["cloze_de"]
    assert summary["checkpoint_tokens"] == 2048 and all(c["limit"] == 10 for c in summary["choice_sets"])
    assert [cp["step"] for cp in summary["checkpoints"]] == [2, 4]
    assert [cp["tokens"] for cp in summary["checkpoints"]] == [2048, 4096]
    for r in summary["candidates"]:
        assert set(r["bpb"]) == {"english", "german"} and all(0 < v < 20 for v in r["bpb"].values())
        assert {c: v["items"] for c, v in r["choice"].items()} == {"arc_en": 10, "mmlu_en": 10, "cloze_de": 10}
        assert all(v["acc_norm"] * 10 == round(v["acc_norm"] * 10) for v in r["choice"].values())  # k of 10 right
        assert r["signals"]["en_acc"] == pytest.approx((r["choice"]["arc_en"]["acc_norm"]
                                                        + r["choice"]["mmlu_en"]["acc_norm"]) / 2)
        assert r["signals"]["de_acc"] == r["choice"]["cloze_de"]["acc_norm"]
        assert len(r["curve"]) == 4 and [t for t, _ in r["rank_curve"]] == [2048, 4096]
    for cp in summary["checkpoints"]:   # the stored ranks are those of an independent recomputation
        again = average_ranks(cp["signals"], {n: s["higher_is_better"] for n, s in sigs.items()})
        assert cp["average_rank"] == {c: v["average_rank"] for c, v in again.items()}
        for n, s in sigs.items():        # direction: rank 1 holds the lowest bpb, the highest accuracy
            vals = {c: v[n] for c, v in cp["signals"].items()}
            best = (max if s["higher_is_better"] else min)(vals.values())
            first = min(ranks[n] for ranks in cp["ranks"].values())
            assert {c for c, ranks in cp["ranks"].items() if ranks[n] == first} == {c for c, v in vals.items() if v == best}
    by = {r["candidate"]: r for r in summary["candidates"]}
    for c, r in by.items():             # terminal = last checkpoint only; R_all = mean over the curve
        assert r["signals"] == summary["checkpoints"][-1]["signals"][c]
        assert r["average_rank"] == summary["checkpoints"][-1]["average_rank"][c]
        assert r["average_rank_all"] == pytest.approx(sum(cp["average_rank"][c] for cp in summary["checkpoints"]) / 2)
    keys = [(r["average_rank"], r["average_rank_all"], r["candidate"]) for r in summary["candidates"]]
    assert keys == sorted(keys)
    from curation.commands.ablate import _heldout
    from curation.plan.graph import load_plan
    ab = load_plan(REPO / "recipes" / "text.yaml").recipe.recipe.ablation
    withheld = _heldout(json.loads((out / "manifests" / "stage1.json").read_text()), out / "manifests", ab)
    assert set(withheld) == {"web_en", "web_de"} and all(len(v) == 6 for v in withheld.values())
    for r in summary["candidates"]:                        # withheld documents are in no candidate's plan
        plans = {p.stem: np.load(p) for p in (out / "ablation" / r["candidate"]).glob("*.npy")}
        assert plans and all((plans[s][d] == 0).all() for s, d in withheld.items() if s in plans)
    # Table 13: per signal the terminal value (rank), R_T and R_all; the best bold, the second underlined
    md = (out / "ablation" / "ablation.md").read_text()
    head = "| candidate | DE bpb (rank) | EN bpb (rank) | DE acc. (%) (rank) | EN acc. (%) (rank) | R_T | R_all |"
    lines = md.splitlines()
    rows = [ln.strip("|").split(" | ") for ln in lines[lines.index(head) + 2:lines.index(head) + 5]]
    assert [row[0].strip() for row in rows] == [r["candidate"] for r in summary["candidates"]]
    for j, n in enumerate(sigs, start=1):
        cells = {row[0].strip(): row[j].strip() for row in rows}
        vals = {c: by[c]["signals"][n] for c in by}
        ordered = sorted(set(vals.values()), reverse=sigs[n]["higher_is_better"])
        for c, cell in cells.items():
            assert f"({by[c]['ranks'][n]:g})" in cell
            assert cell.startswith("**") == (vals[c] == ordered[0])
            assert cell.startswith("<u>") == (len(ordered) > 1 and vals[c] == ordered[1])
    assert [row[5].strip().strip("*").removeprefix("<u>").removesuffix("</u>") for row in rows] == \
        [f"{r['average_rank']:.2f}" for r in summary["candidates"]]
    assert "| 2,048 |" in md and "| 4,096 |" in md          # the learning curve, one row per checkpoint
    # the terminal prints the same table (* best, + second-best) and the average rank per checkpoint
    assert "DE bpb (rank)" in printed and "EN acc. (%) (rank)" in printed and "R_T" in printed
    assert "Best values *, second-best +." in printed and " *" in printed
    assert "average rank per checkpoint: 2,048 tokens" in printed and "; 4,096 tokens" in printed
    table = printed[printed.index("R_T"):]                   # after the per-candidate progress lines
    assert [table.index(f" {r['candidate']} ") for r in summary["candidates"]] == \
        sorted(table.index(f" {r['candidate']} ") for r in summary["candidates"])   # rows in R_T order
    for name in ("ablation.html", "curves.png", "rank_curve.png"):
        assert (out / "ablation" / name).stat().st_size > 0
    assert (out / "ablation" / "rank_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "rank_curve.png" in (out / "ablation" / "ablation.html").read_text()


@pytest.mark.slow
def test_curate_train_applies_the_conversation_mask_of_whole_documents(tmp_path):
    """Conversations (the `conversations` form and the earlier `turn_roles` spelling) run through `curate run`;
    the trainer's targets on rows cut anywhere are the chat-template mask of the whole documents, with the
    stage's `thinking: mask`, restricted to what the stage and the output head allow."""
    from curation.commands.run import run
    from curation.core.vocab import Vocabulary
    from curation.shards import read_index, read_tokens
    from curation.train.chat_mask import ConversationMask
    from tests.chats import vocab_dict
    from tests.conftest import VOCAB, write_jsonl
    from tests.steps.conversation.test_chat import FULL
    legacy = [{"role": "user", "content": "What is two plus two?"},
              {"role": "assistant", "content": "Let me check with the calculator."},
              {"role": "tool", "content": "4"}, {"role": "assistant", "content": "It is four."}]
    rows = [{**FULL, "id": "full"}] + [{"id": f"t{i}", "messages": [
        {"role": "user", "content": f"Question {i}?"},
        {"role": "assistant", "content": f"<think>Reasoning about {i}.</think>Answer {i}."}]} for i in range(3)]
    chat = write_jsonl(tmp_path / "chat.jsonl", rows)
    old = write_jsonl(tmp_path / "old.jsonl", [{"id": "c1", "messages": legacy},
                                               {"id": "c2", "messages": [{"role": "narrator", "content": "x"}]}])
    (tmp_path / "r.yaml").write_text(f"""name: sft
vocabulary: {VOCAB}
stages: [{{name: sft, seq_length: 64, targets: text, thinking: mask}}]
sources:
  - name: chat
    license: MIT
    input: {{paths: [{chat}], id_field: id, conversations: {{}}}}
  - name: old
    license: MIT
    input: {{paths: [{old}], id_field: id, text_field: messages, turn_roles: true}}
""")
    res = run(tmp_path / "r.yaml", tmp_path / "out", progress=False)
    assert {(q["source"], q["reason"], q["records"]) for q in res.rows["quarantine"]} == {("old", "bad_turns", 1)}
    v = Vocabulary.load(VOCAB)
    names = {v.marker(n): n for n in v.reserved}
    toks = read_tokens(tmp_path / "out" / "tokenized" / "old" / "old").tolist()
    assert [names[t] for t in toks if t in names] == [
        "turn_system", "end_of_turn", "turn_developer", "end_of_turn", "turn_user", "end_of_turn",
        "turn_assistant", "tool_output_start", "tool_output_end", "end_of_turn"]
    manifest = res.manifests[0]
    t = _trainer(manifest, tmp_path / "t", steps=2)
    assert t.manifest["training"]["thinking"] == "mask"
    cm = ConversationMask(vocab_dict(), "mask")
    docs = {}
    for name in t.data.names:
        prefix = tmp_path / "out" / "tokenized" / name / name
        flat, (_, lengths, _, _) = read_tokens(prefix), read_index(prefix.with_name(name + ".idx"))
        docs[name] = np.split(flat, np.cumsum(lengths)[:-1])
    stream = [docs[t.data.names[s]][d] for s, d in zip(t.data.order_source, t.data.order_doc)]
    expected = np.concatenate([cm.row(d)[0] for d in stream] * 3)
    width, seen = 65, 0
    for _ in range(4):
        batch = t.data.next_batch(2)
        targets = t.targets(batch)
        for row in range(2):
            want = torch.from_numpy(expected[seen + 1:seen + width]) & (batch.doc[row, 1:] == batch.doc[row, :-1])
            want &= t.lut[torch.from_numpy(batch.tokens[row, 1:])] >= 0
            assert (targets[row] == want).all()
            seen += width
    assert t.train(log=None)[-1]["targets"] > 0


def test_warmup_stable_decay_schedule():
    from curation.train.loop import TrainConfig, wsd_lr
    cfg = TrainConfig(max_steps=100, lr=1.0, warmup_steps=10, decay_fraction=0.2)
    lrs = [wsd_lr(s, cfg) for s in range(100)]
    assert lrs[:10] == pytest.approx([(s + 1) / 10 for s in range(10)])      # linear warmup
    assert set(lrs[10:80]) == {1.0}                                            # stable
    assert lrs[80:] == pytest.approx([1 - np.sqrt((s - 80 + 1) / 20) for s in range(80, 100)])   # 1 - sqrt
    assert lrs[-1] == 0.0
