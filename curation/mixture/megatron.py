"""The Megatron-LM hand-off of a stage: data-args files and indexed datasets that hold exactly its plan.

Weights over the source shards cannot say which documents a stage uses, how often, or how a
long-context stage packs them; Megatron-LM would draw whole sources in its own epochs. So each stage
gets `<out>/megatron/<stage>/` where the plan *is* the data, in one of two modes (recipe `handoff:`,
per stage or recipe-wide; a long-context stage is always packed):

- `packed` (the default): the stage's sequences (`curation.mixture.sequences`: the plan's occurrences in
  its seeded order, cut into sequences of `seq_length`; a long-context stage's best-fit-decreasing bins),
  written by `curation.mixture.megatron_packed` so that `--train-samples` = the number of sequences
  draws each one once: every planned token of every source exactly once, under one sequence of
  padding (Megatron's eod, out of the loss with `--eod-mask-loss`). This copies the stage's tokens once.
- `blend`: Megatron's own sampling over one prefix per source. A source planned at exactly one epoch is
  its own shards (`tokenized/<source>/<source>`); any other plan gets a stage index `<source>.idx`
  listing every planned occurrence of every document (its `.bin` a link to the source's `.bin`:
  megatron-core opens `PREFIX.idx` and `PREFIX.bin` only; 20 bytes per occurrence, no tokens copied).
  The weights are the samples of `seq_length` one pass over each prefix yields (`(tokens - 1) //
  seq_length`, megatron-core's count), `train_samples` their sum, so each source loses under one
  sequence, and a source of fewer than `seq_length + 1` planned tokens cannot be drawn at all: it is
  listed in `not_drawable`, a `not_drawable` flag in the ledger and a warning at the end of `curate run`.

Either way `draws` says, per planned source, the planned tokens and the input tokens Megatron draws
(`tests/mixture/test_megatron_handoff.py` counts them with megatron-core's own builder); the ledger's
`handoff` table holds them.

Files, written again by every `curate run` (`cache/`, megatron-core's index cache, is left alone):
`data_args.txt` (`--data-args-path`), `per_split_data_args.json` (`--per-split-data-args-path`), `args.txt`
(the data and tokenizer arguments, one per line). They hold absolute paths, so they work from any
working directory; the manifest records their digests with the output folder written as `{out}`.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from curation.core.atomic import atomic_write_bytes
from curation.core.hashing import sha256_file
from curation.core.layout import megatron_dir
from curation.mixture.megatron_packed import MAX_DOCUMENT_TOKENS, chunk_sizes, prefix_names, write_chunk, write_packed
from curation.mixture.sampling import read_plan
from curation.mixture.sequences import chunk_plans, chunk_sequences, planned, stage_sequences
from curation.shards.formats import text_digest
from curation.shards.indexed import index_parts
from curation.shards.merging import PART
from curation.shards.shardset import ShardSet

SPLIT = "100,0,0"   # the whole hand-off trains; a validation set is a separate blend
MODES = ("packed", "blend")
FILES = ("data_args.txt", "per_split_data_args.json", "args.txt")


def tokenizer_settings(vocab: dict) -> dict:
    """Megatron-LM's NullTokenizer over our ids. It has `vocab_size = --vocab-size + 1` and calls id
    `--vocab-size` its eod. With `--vocab-size padded_size - 1` its embedding has exactly our padded rows
    and its eod is the last padding row, an id no tokenizer emits: our documents end with `document_end`
    (the text tokenizer's end-of-text, id 0), an ordinary token to Megatron, and packed long-context
    sequences are padded with Megatron's eod, so `--eod-mask-loss` leaves padding out of the loss."""
    size, padded = int(vocab["size"]), int(vocab["padded_size"])
    vocab_arg = max(size, padded - 1)
    divisible = next(d for d in (128, 64, 32, 16, 8, 4, 2, 1) if padded % d == 0)
    return {"tokenizer_type": "NullTokenizer", "vocab_size": vocab_arg, "make_vocab_size_divisible_by": divisible,
            "padded_vocab_size": -(-(vocab_arg + 1) // divisible) * divisible,   # at tensor parallel size 1
            "eod": vocab_arg, "pad": vocab_arg, "document_end": int(vocab["eod"])}


def _link(target: Path, link: Path) -> None:
    """`link` -> `target` as a relative symlink (moves with the output folder), else a hard link."""
    tmp = link.with_name(link.name + ".tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.symlink(os.path.relpath(target, link.parent), tmp)
    except OSError:
        os.link(target, tmp)
    os.replace(tmp, link)


def occurrences(counts: np.ndarray) -> np.ndarray:
    """Document index of every planned occurrence, in shard order (a document's repeats adjacent)."""
    return np.repeat(np.arange(counts.size, dtype=np.int64), np.asarray(counts, dtype=np.int64))


def _file(path: Path, mdir: Path, sha: str | None = None) -> dict:
    return {"path": os.path.relpath(path, mdir).replace(os.sep, "/"), "bytes": path.stat().st_size,
            "sha256": sha or sha256_file(path)}


def source_parts(mdir: Path, s: dict, seq_length: int, stage_dir: str) -> list[tuple[dict, list | None, str]]:
    """A planned source's prefixes in the blend hand-off, one per part of its shard set (`ShardSet`): (the
    entry's numbers and prefix, the blocks of its stage index or None where the plan takes the part once, the
    part's prefix). A part's stage index is `<stage_dir>/<source>` (a split set's: `<source>.part-NNNNN`)."""
    shards = ShardSet.of_entry(mdir, s)
    counts = read_plan(mdir / s["plan"]["path"])
    offsets, single = shards.offsets(), len(shards.prefixes) == 1
    rels = [s["prefix"]] if single else s["parts"]
    out = []
    for k, ((lengths, pointers), rel) in enumerate(zip(shards.part_lengths(), rels)):
        c = counts[int(offsets[k]):int(offsets[k + 1])]
        tokens = int((c.astype(np.int64) * lengths).sum())
        entry = {"name": s["name"], "tokens": tokens, "documents": int(np.count_nonzero(c)),
                 "occurrences": int(c.sum()), "sequences": max(tokens - 1, 0) // seq_length}
        if c.size and (c == 1).all():      # the plan is the part, once
            out.append(({**entry, "prefix": rel}, None, rel))
            continue
        occ = occurrences(c)
        name = s["name"] if single else f"{s['name']}{PART}{k:05d}"
        prefix = os.path.relpath(os.path.normpath(mdir / stage_dir / name), mdir).replace(os.sep, "/")
        out.append(({**entry, "prefix": prefix}, index_parts(lengths[occ], shards.dtype, pointers[occ]), rel))
    return out


def _source_prefixes(hdir: Path, mdir: Path, s: dict, seq_length: int) -> list[dict]:
    written = []
    for entry, index, rel in source_parts(mdir, s, seq_length, os.path.relpath(hdir, mdir)):
        if index is None:
            written.append({**entry, "files": []})
            continue
        prefix = mdir / entry["prefix"]
        tmp = Path(f"{prefix}.idx.tmp")
        with open(tmp, "wb") as f:
            f.writelines(index)
        os.replace(tmp, f"{prefix}.idx")
        _link(mdir / f"{rel}.bin", Path(f"{prefix}.bin"))
        bin_sha = next(f["sha256"] for f in s["files"] if f["path"] == f"{rel}.bin")
        written.append({**entry, "bin_of": f"{rel}.bin",
                        "files": [_file(Path(f"{prefix}.bin"), mdir, bin_sha), _file(Path(f"{prefix}.idx"), mdir)]})
    return written


def packed_sizes(sources: list[dict], packing: np.ndarray | None, seq_length: int,
                 max_tokens: int | None = None) -> list[int]:
    """Sequences per packed prefix: the long-context bins, or the plan's tokens in sequences of `seq_length`;
    prefixes of at most `max_tokens` (`shards.max_handoff_bytes` / 4; at least one sequence each, at most
    megatron-core's int32 document length)."""
    if packing is not None:
        total = int(packing[:, 2].max()) + 1 if len(packing) else 0
    else:
        total = -(-sum(sources[i]["plan"]["tokens"] for i in planned(sources)) // seq_length)
    return chunk_sizes(total, seq_length, prefix_limit(seq_length, max_tokens))


def prefix_limit(seq_length: int, max_tokens: int | None) -> int:
    """The most tokens of one packed prefix: `max_tokens`, at least one sequence and its extra token, at most
    megatron-core's int32 document length (also the default)."""
    return MAX_DOCUMENT_TOKENS if max_tokens is None else max(seq_length + 1, min(max_tokens, MAX_DOCUMENT_TOKENS))


def packed_prefix(hdir: Path, mdir: Path, sources: list[dict], seq_length: int, pad: int, name: str, size: int,
                  last: bool, plan: dict) -> dict:
    """A task: one packed prefix of a stage, from its `chunk_plans` entry (what it reads of the plan)."""
    return write_chunk(hdir, name, chunk_sequences(mdir, sources, seq_length, pad, plan), size, seq_length, pad, last)


def _packed_prefixes(hdir: Path, mdir: Path, sources: list[dict], stage_fp: str, packing: np.ndarray | None,
                     seq_length: int, pad: int, max_tokens: int | None = None,
                     tasks: Callable | None = None) -> tuple[list[dict], dict[int, int]]:
    sizes = packed_sizes(sources, packing, seq_length, max_tokens)
    if tasks is None or len(sizes) < 2:
        seqs = stage_sequences(mdir, sources, stage_fp, seq_length, pad, packing)
        written, held = write_packed(hdir, seqs, sizes, seq_length, pad)
    else:   # a task per prefix: the driver slices the plan, the tasks copy and hash the tokens
        plans = chunk_plans(mdir, sources, stage_fp, seq_length, packing, sizes)
        names = prefix_names(len(sizes))
        keys = [f"handoff/{hdir.name}/{n}" for n in names]
        done = tasks(packed_prefix, [(key, (hdir, mdir, sources, seq_length, pad, name, k, j == len(sizes) - 1, plan))
                                     for j, (key, name, k, plan) in enumerate(zip(keys, names, sizes, plans))],
                     "handoff")
        written, held = [], {}
        for key in keys:
            w = dict(done[key])
            for i, n in w.pop("held").items():
                held[int(i)] = held.get(int(i), 0) + n
            written.append(w)
    prefixes = []
    for w in written:
        prefix, sha = hdir / w["name"], w.pop("bin_sha256")
        prefixes.append({**w, "prefix": os.path.relpath(prefix, mdir).replace(os.sep, "/"),
                         "files": [_file(Path(f"{prefix}.bin"), mdir, sha), _file(Path(f"{prefix}.idx"), mdir)]})
    return prefixes, held


def blend_list(section: dict, root: Path | str, mdir: Path) -> list[str]:
    """`--data-path`-style list: `weight prefix ...`, or a single packed prefix alone (no weight)."""
    def where(p):
        return f"{root}/{os.path.relpath(os.path.normpath(mdir / p['prefix']), mdir.parent)}".replace(os.sep, "/")
    prefixes = section["prefixes"]
    if section["packed"] and len(prefixes) == 1:
        return [where(prefixes[0])]
    return [x for p in prefixes for x in (str(p["sequences"]), where(p))]


def file_texts(section: dict, root: Path | str, mdir: Path, seq_length: int) -> dict[str, str]:
    """The contents of the hand-off's path-holding files, for the output folder at `root`."""
    blend = blend_list(section, root, mdir)
    tok = section["tokenizer"]
    args = ["--tokenizer-type", tok["tokenizer_type"], "--vocab-size", str(tok["vocab_size"]),
            "--make-vocab-size-divisible-by", str(tok["make_vocab_size_divisible_by"]),
            "--seq-length", str(seq_length), "--data-args-path", f"{root}/{section['dir']}/data_args.txt",
            "--split", SPLIT, "--train-samples", str(section["train_samples"]),
            "--data-cache-path", f"{root}/{section['dir']}/cache"]
    if section["packed"]:
        args.append("--eod-mask-loss")   # no loss where the input is padding
    return {"data_args.txt": " ".join(blend) + "\n",
            "per_split_data_args.json": json.dumps({"train": blend, "valid": None, "test": None}, indent=1) + "\n",
            "args.txt": "\n".join(args) + "\n"}


def blend_of(megatron: dict) -> list:
    """The hand-off's blend, Megatron-shaped and relative to the manifest's folder: `[weight, prefix, ...]`
    (weight = samples per pass), or `[prefix]` for a stage packed into one prefix."""
    ps = megatron["prefixes"]
    if megatron["packed"] and len(ps) == 1:
        return [p["prefix"] for p in ps]
    return [x for p in ps for x in (p["sequences"], p["prefix"])]


def not_drawable(prefixes: list[dict], seq_length: int) -> list[dict]:
    """The planned sources none of whose prefixes yields a sample (a split set's parts each lose under one)."""
    tokens: dict[str, int] = {}
    for p in prefixes:
        tokens[p["name"]] = tokens.get(p["name"], 0) + p["tokens"]
    drawn = {p["name"] for p in prefixes if p["sequences"] > 0}
    return [{"name": n, "tokens": t,
             "reason": f"fewer than {seq_length + 1} planned tokens: not one sample of seq_length + 1"}
            for n, t in tokens.items() if n not in drawn]


def draws(sources: list[dict], prefixes: list[dict], held: dict[int, int] | None, seq_length: int) -> list[dict]:
    """Per planned source: planned tokens and the input tokens Megatron draws with `--train-samples`.
    Packed: every sequence is drawn once, so a source's drawn tokens are what the sequences hold of it
    (`held`). Blend: a prefix's `sequences` samples of `seq_length` inputs; a source without a prefix, 0."""
    samples: dict[str, int] = {}
    for p in prefixes:
        samples[p["name"]] = samples.get(p["name"], 0) + p["sequences"]
    out = []
    for i in planned(sources):
        s = sources[i]
        got = held.get(i, 0) if held is not None else samples.get(s["name"], 0) * seq_length
        out.append({"name": s["name"], "planned_tokens": int(s["plan"]["tokens"]), "drawn_tokens": int(got)})
    return out


def write_handoff(out: Path, mdir: Path, stage: str, seq_length: int, sources: list[dict],
                  packing: np.ndarray | None, vocab: dict, root: Path | str | None = None, mode: str = "packed",
                  stage_fp: str = "", max_tokens: int | None = None, tasks: Callable | None = None) -> dict:
    """Write a stage's hand-off; returns the manifest's `megatron` section (paths relative to `mdir`).
    `root`: where the files name the output folder (default `out`; an output URL for a run that publishes).
    `mode`: `packed` or `blend` (a long-context stage, given `packing`, is always packed); `stage_fp`: the
    stage fingerprint that seeds the plan's order (`curation.mixture.sequences.plan_order`); `max_tokens`:
    the most tokens of one packed prefix (recorded in the section as `max_prefix_tokens`); `tasks`: runs
    independent calls (an executor's `map`): each packed prefix of a stage of several is written by a task."""
    if mode not in MODES:
        raise ValueError(f"hand-off mode {mode!r}: use one of {', '.join(MODES)}")
    hdir = megatron_dir(out, stage)
    hdir.mkdir(parents=True, exist_ok=True)
    tok = tokenizer_settings(vocab)
    packed = packing is not None or mode == "packed"
    short = []
    if packed:
        prefixes, held = _packed_prefixes(hdir, mdir, sources, stage_fp, packing, seq_length, tok["pad"],
                                          max_tokens, tasks)
    else:
        held = None
        prefixes = [p for i in planned(sources) for p in _source_prefixes(hdir, mdir, sources[i], seq_length)]
        short = not_drawable(prefixes, seq_length)
        prefixes = [p for p in prefixes if p["sequences"] > 0]
    section = {"dir": os.path.relpath(hdir, out).replace(os.sep, "/"), "tokenizer": tok, "split": SPLIT,
               "mode": "packed" if packed else "blend", "packed": packed, "prefixes": prefixes,
               "not_drawable": short, "train_samples": sum(p["sequences"] for p in prefixes),
               "draws": draws(sources, prefixes, held, seq_length)}
    if packed and max_tokens is not None:   # only where the recipe sets it: every other manifest stays as it was
        section["max_prefix_tokens"] = max_tokens
    texts = file_texts(section, root or out, mdir, seq_length)
    for name, text in texts.items():
        atomic_write_bytes(hdir / name, text.encode())
    section["files"] = {name: {"path": os.path.relpath(hdir / name, mdir).replace(os.sep, "/"),
                               "sha256": text_digest(text, root or out)} for name, text in texts.items()}
    keep = set(texts) | {n for p in prefixes for f in p["files"] for n in [Path(f["path"]).name]} | {"cache"}
    for old in hdir.iterdir():        # prefixes of an earlier plan of this stage (folders: Megatron's caches)
        if old.name not in keep and (old.is_symlink() or old.is_file()):
            old.unlink()
    return section
