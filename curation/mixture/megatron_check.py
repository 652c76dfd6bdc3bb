"""Verification of a stage's Megatron hand-off (`curation.mixture.megatron`), recomputed from the plan.

Every prefix is rebuilt in memory from the stage's sampling plans (or packing) and the shards, and must
be what is on disk: stage indices byte for byte, each `.bin` link the source's `.bin` (same file, or the
same bytes where the link was copied), packed sequences token for token (`megatron_packed.expected_digests`),
and `draws` (planned and drawn tokens per source) what the hand-off gives Megatron. The weights, sample counts
and tokenizer settings must follow from the plan and the vocabulary, and `data_args.txt`,
`per_split_data_args.json` and `args.txt` must be exactly the files for this output folder.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from curation.core.hashing import sha256_file
from curation.mixture.megatron import (
    FILES,
    blend_of,
    draws,
    file_texts,
    packed_sizes,
    prefix_limit,
    source_parts,
    tokenizer_settings,
)
from curation.mixture.megatron_packed import chunk_sizes, expected_digests, prefix_names
from curation.mixture.sequences import stage_sequences
from curation.shards.formats import check_texts


def _expected_prefixes(m: dict, base: Path, s: dict) -> list[tuple[dict, str | None, str]]:
    """Per part of the source's shard set: (the prefix entry's numbers, sha256 of its stage index or None when
    it is the part itself, the part's prefix)."""
    out = []
    for entry, index, rel in source_parts(base, s, m["seq_length"], os.path.relpath(base.parent / m["megatron"]["dir"],
                                                                                   base)):
        if index is None:
            out.append((entry, None, rel))
            continue
        h = hashlib.sha256()
        for part in index:
            h.update(part)
        out.append((entry, h.hexdigest(), rel))
    return out


def _check_files(name: str, p: dict, base: Path, problems: list[str]) -> dict[str, Path]:
    found = {}
    for f in p["files"]:
        fp = Path(os.path.normpath(base / f["path"]))
        if not fp.is_file():
            problems.append(f"megatron prefix {name}: {fp} is missing; re-run `curate run` to write the hand-off")
        elif fp.stat().st_size != f["bytes"]:
            problems.append(f"megatron prefix {name}: {fp} has {fp.stat().st_size} bytes, manifest says {f['bytes']}")
        else:
            found[fp.suffix] = fp
    return found


def _check_stage_index(m: dict, base: Path, s: dict, got: list[dict], problems: list[str]) -> None:
    """The source's prefixes in the manifest (`got`, in order) are those its plan gives, one per part of its
    shard set that yields a sample."""
    name = s["name"]
    try:
        want = [w for w in _expected_prefixes(m, base, s) if w[0]["sequences"] > 0]
    except (OSError, ValueError) as e:
        problems.append(f"megatron prefix {name}: cannot recompute it from the plan ({e})")
        return
    if len(want) != len(got):
        problems.append(f"megatron: source {name} has {len(got)} prefix(es) in the hand-off, its plan gives {len(want)}")
        return
    for p, (numbers, idx_sha, rel) in zip(got, want):
        for k, v in numbers.items():
            if p.get(k) != v:
                problems.append(f"megatron prefix {name}: {k} = {p.get(k)!r}, the plan gives {v!r}")
        found = _check_files(name, p, base, problems)
        if idx_sha is None:
            if p["files"]:
                problems.append(f"megatron prefix {name}: the plan takes the source once, but the manifest lists files")
            continue
        if ".idx" in found and sha256_file(found[".idx"]) != idx_sha:
            problems.append(f"megatron prefix {name}: {found['.idx']} is not the index of the stage's plan")
        if ".bin" in found:
            src_bin = base / f"{rel}.bin"
            same = src_bin.is_file() and os.path.samefile(found[".bin"], src_bin)
            if not same and sha256_file(found[".bin"]) != next(f["sha256"] for f in s["files"]
                                                               if f["path"] == f"{rel}.bin"):
                problems.append(f"megatron prefix {name}: {found['.bin']} is not {src_bin} (the index points into it)")


def _check_packed(m: dict, base: Path, problems: list[str]) -> dict[int, int] | None:
    """The packed prefixes must be the stage's sequences (recomputed from its plans or packing) in the
    layout of `curation.mixture.megatron_packed`; returns the planned tokens per source they hold."""
    mg, seq = m["megatron"], m["seq_length"]
    limit = mg.get("max_prefix_tokens")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        problems.append(f"manifest field `megatron.max_prefix_tokens` is {limit!r}, not a positive int")
        return None
    packing = None
    if m.get("long_context"):
        try:
            packing = np.load(base / m["long_context"]["packing"]["path"], allow_pickle=False)
        except (OSError, ValueError) as e:
            problems.append(f"megatron: cannot read the long-context packing ({e})")
            return None
    try:
        sizes = packed_sizes(m["sources"], packing, seq, mg.get("max_prefix_tokens"))
        want, held = expected_digests(stage_sequences(base, m["sources"], m["stage_fingerprint"], seq,
                                                      mg["tokenizer"]["pad"], packing), sizes, seq,
                                      mg["tokenizer"]["pad"])
    except (OSError, ValueError, IndexError, KeyError) as e:
        problems.append(f"megatron: cannot rebuild the stage's packed sequences ({e})")
        return None
    names = prefix_names(len(sizes))
    got = [p["name"] for p in mg["prefixes"]]
    if got != names:
        problems.append(f"megatron: packed prefixes {got}, the plan gives {names}")
        return held
    if sizes != chunk_sizes(sum(sizes), seq, prefix_limit(seq, mg.get("max_prefix_tokens"))):
        problems.append("megatron: the packed prefixes are not split as megatron_packed.chunk_sizes splits them")
    for p, name, k in zip(mg["prefixes"], names, sizes):
        if (p["sequences"], p["tokens"]) != (k, k * seq + 1):
            problems.append(f"megatron prefix {name}: {p['sequences']} sequences / {p['tokens']} tokens in the "
                            f"manifest, the plan gives {k} sequences of {seq} and one token")
        found = _check_files(name, p, base, problems)
        for ext, sha in zip((".bin", ".idx"), want[name]):
            if ext in found and sha256_file(found[ext]) != sha:
                problems.append(f"megatron prefix {name}: {found[ext]} does not hold the packed sequences of the plan")
    return held


def _check_texts(m: dict, base: Path, problems: list[str], check_location: bool) -> None:
    want = file_texts(m["megatron"], "{out}", base, m["seq_length"])
    problems += check_texts("megatron", m["megatron"], {name: want[name] for name in FILES}, base, check_location,
                            "the stage's blend")


def check_handoff(m: dict, base: Path, check_location: bool = True) -> list[str]:
    """Every problem of the stage's hand-off, as messages naming the prefix or file. `check_location`: the
    path-holding files must name this output folder (a trainer that reads only the manifest passes False)."""
    problems: list[str] = []
    mg = m["megatron"]
    if mg["tokenizer"] != tokenizer_settings(m["vocabulary"]):
        problems.append("megatron.tokenizer does not follow from the manifest's vocabulary")
    by_name: dict[str, list[dict]] = {}
    for p in mg["prefixes"]:
        by_name.setdefault(p["name"], []).append(p)
    skipped = {d.get("name") for d in mg["not_drawable"] if isinstance(d, dict)}
    held = None
    if mg["packed"] != (mg.get("mode") == "packed"):
        problems.append(f"megatron: mode {mg.get('mode')!r} and packed = {mg['packed']} disagree")
    if m.get("long_context") and not mg["packed"]:
        problems.append("megatron: a long-context stage must be handed off packed")
    if mg["packed"]:
        if skipped:
            problems.append(f"megatron: a packed stage lists not_drawable sources {sorted(skipped)}")
        held = _check_packed(m, base, problems)
    else:
        planned = [s for s in m["sources"] if "plan" in s and s["effective_tokens"] > 0]
        for s in planned:
            if s["name"] in by_name:
                _check_stage_index(m, base, s, by_name[s["name"]], problems)
            elif s["name"] not in skipped:
                problems.append(f"megatron: planned source {s['name']} has no prefix in the hand-off")
        extra = set(by_name) - {s["name"] for s in planned}
        if extra:
            problems.append(f"megatron: prefixes {sorted(extra)} are no planned source of the stage")
    if not mg["packed"] or held is not None:
        want = draws(m["sources"], mg["prefixes"], held, m["seq_length"])
        if mg.get("draws") != want:
            problems.append(f"megatron.draws {mg.get('draws')} is not what the hand-off gives Megatron: {want}")
    total = sum(p["sequences"] for p in mg["prefixes"])
    if mg["train_samples"] != total or m["samples"] != total:
        problems.append(f"samples = {m['samples']}, megatron.train_samples = {mg['train_samples']}: the hand-off's "
                        f"prefixes yield {total}")
    if m["blend"] != blend_of(mg):
        problems.append(f"blend {m['blend']} is not the hand-off's prefixes and sample counts {blend_of(mg)}")
    _check_texts(m, base, problems, check_location)
    return problems
