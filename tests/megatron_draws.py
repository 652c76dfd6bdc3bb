"""What stock Megatron-LM draws from a stage's hand-off, counted with megatron-core itself.

`BlendedMegatronDatasetBuilder(GPTDataset)` is configured from `OUT/megatron/<stage>/args.txt` (tokenizer,
sequence length, `--data-args-path`, `--split`, `--train-samples`, `--eod-mask-loss`) as Megatron-LM's
`pretrain_gpt.py` would, every one of the `--train-samples` samples is drawn, and its input tokens
(all but the last of its `seq_length + 1`) are counted per source:
- packed: the sample's position in the stage's stream (megatron-core's sample index), attributed to
  sources by rebuilding the stream from the source shards and the plans (occurrences in the stage's
  seeded order, or the long-context packing); the sample's tokens must be the stream's there;
- blend: the prefix the blended dataset draws it from (each prefix holds one source's planned occurrences),
  its documents never more often than the plan lists them.
Used by `tests/mixture/test_megatron_handoff.py` and `tests/benchmarks/bench_handoff.py`."""
from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path

import numpy as np

from curation.mixture.sequences import plan_order
from curation.shards.shardset import ShardSet


def args_of(path: Path) -> dict[str, str | bool]:
    """`args.txt` as {flag: value} (a flag with no value: True)."""
    words = path.read_text().split()
    out, i = {}, 0
    while i < len(words):
        if i + 1 < len(words) and not words[i + 1].startswith("--"):
            out[words[i]], i = words[i + 1], i + 2
        else:
            out[words[i]], i = True, i + 1
    return out


def _stream_map(m: dict, base: Path) -> tuple[np.ndarray, np.ndarray]:
    """(token, source index or -1 for padding) per position of the stage's packed stream, from the shards."""
    seq, pad = m["seq_length"], m["megatron"]["tokenizer"]["pad"]
    shards = {}

    def doc(i, d):
        if i not in shards:   # one prefix, or the parts of a split shard set
            s = ShardSet.of_entry(base, m["sources"][i])
            shards[i] = (s.reader(), s.lengths(), s.starts())
        read, lengths, starts = shards[i]
        return np.asarray(read(int(starts[d]), int(lengths[d])))

    toks, srcs = [], []
    if m.get("long_context"):
        packing = np.load(base / m["long_context"]["packing"]["path"])
        for b in range(int(packing[:, 2].max()) + 1 if len(packing) else 0):
            at = 0
            for s, d, _ in packing[packing[:, 2] == b]:
                x = doc(int(s), int(d))
                toks.append(x)
                srcs.append(np.full(x.size, int(s)))
                at += x.size
            toks.append(np.full(seq - at, pad))
            srcs.append(np.full(seq - at, -1))
    else:
        which = [i for i, s in enumerate(m["sources"]) if "plan" in s and s["effective_tokens"] > 0]
        counts = [np.load(base / m["sources"][i]["plan"]["path"]) for i in which]
        for k, d in zip(*plan_order(m["stage_fingerprint"], counts)):
            x = doc(which[int(k)], int(d))
            toks.append(x)
            srcs.append(np.full(x.size, which[int(k)]))
        n = sum(t.size for t in toks)
        toks.append(np.full(-(-n // seq) * seq - n, pad))
        srcs.append(np.full(-(-n // seq) * seq - n, -1))
    toks.append(np.full(1, pad))
    srcs.append(np.full(1, -1))
    return np.concatenate(toks).astype(np.int64), np.concatenate(srcs).astype(np.int64)


def megatron_draws(manifest: Path, cache: Path) -> dict:
    """{"mode", "train_samples", "planned": {source: tokens}, "drawn": {source: tokens}, "pad": padding
    tokens drawn}. Needs a torch.distributed process group (gloo, world size 1)."""
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.utils import get_blend_from_list
    from megatron.core.tokenizers.text.utils.build_tokenizer import build_tokenizer

    m = json.loads(manifest.read_text())
    base = manifest.resolve().parent
    mg = m["megatron"]
    args = args_of(base.parent / mg["dir"] / "args.txt")
    tok = build_tokenizer(Namespace(tokenizer_type=args["--tokenizer-type"], vocab_size=int(args["--vocab-size"])))
    seq, n = int(args["--seq-length"]), int(args["--train-samples"])
    blend = get_blend_from_list(Path(args["--data-args-path"]).read_text().split())
    config = GPTDatasetConfig(random_seed=1234, sequence_length=seq, tokenizer=tok, reset_position_ids=False,
                              reset_attention_mask=False, eod_mask_loss=bool(args.get("--eod-mask-loss")),
                              path_to_cache=str(cache), mid_level_dataset_surplus=0.005, blend=blend,
                              split=args["--split"])
    train = BlendedMegatronDatasetBuilder(GPTDataset, [n, 0, 0], lambda: True, config).build()[0]
    if hasattr(train, "dataset_index"):
        which = [(int(train.dataset_index[i]), int(train.dataset_sample_index[i])) for i in range(n)]
        datasets = list(train.datasets)
    else:
        which, datasets = [(0, i) for i in range(n)], [train]
    names = [s["name"] for s in m["sources"]]
    planned = {s["name"]: s["plan"]["tokens"] for s in m["sources"] if "plan" in s and s["effective_tokens"] > 0}
    drawn, pad = dict.fromkeys(planned, 0), 0
    if mg["packed"]:
        tokens, source = _stream_map(m, base)
        start_of = np.cumsum([0] + [p["sequences"] * seq for p in mg["prefixes"]])
        seen = np.zeros(tokens.size, dtype=bool)
        for d, k in which:
            ds = datasets[d]
            text, docs = ds._query_document_sample_shuffle_indices(k)
            assert len(docs) == 1 and text.size == seq + 1, "a packed sample spans one packed document"
            doc_at, offset = ds.sample_index[ds.shuffle_index[k]]
            assert doc_at == 0
            at = int(start_of[d] + offset)
            assert (text == tokens[at:at + seq + 1]).all(), "megatron-core reads the stage's stream"
            assert not seen[at:at + seq].any(), "no position is drawn twice"
            seen[at:at + seq] = True
            got = source[at:at + seq]
            pad += int((got < 0).sum())
            for i, c in zip(*np.unique(got[got >= 0], return_counts=True)):
                drawn[names[int(i)]] += int(c)
    else:
        prefix_source = [p["name"] for p in mg["prefixes"]]
        for i, name in enumerate(prefix_source):
            got = [k for d, k in which if d == i]
            drawn[name] += len(got) * seq
            s = next(s for s in m["sources"] if s["name"] == name)
            counts = np.load(base / s["plan"]["path"])
            occ = np.repeat(np.arange(counts.size), counts)
            used = set()
            for k in got:
                used.update(int(x) for x in datasets[i]._query_document_sample_shuffle_indices(k)[1])
            assert (np.bincount(occ[sorted(used)], minlength=counts.size) <= counts).all(), \
                "never more occurrences of a document than planned"
    return {"mode": mg["mode"], "train_samples": n, "planned": planned, "drawn": drawn, "pad": pad}
