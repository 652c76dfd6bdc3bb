"""The merge task: a source's tokenize parts concatenated in shard order, per output, into parts of at most
`max_part_bytes` of `.bin` (`shards.merging`; a set that fits one part keeps the source's prefix).

Its marker carries what the ledger and manifests need of every merged shard set (`shards`: suffix ->
documents, tokens by modality, bytes and sha256 of its files; a split set lists them per part under `parts`,
with `unsplit_sha256`), computed as the bytes are written, so the driver never reads the shards again; and
(`domains`) the file of the source's documents and tokens per web domain, summed from its tokenize tasks'
files.

A set of several parts is written by a task per part where the run can spread work (`runtime.fanout`: Ray
on a shared output folder), while this task streams the inputs once more for the set's `unsplit_sha256`:
that digest is one sha256 over every byte, the one piece that stays in one process. Elsewhere the parts are
written here in turn, and the same pass feeds the digest. Either way the files and the marker's `shards` are
the same.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from curation.core.layout import domains_path, part_prefix, source_domains_path, source_prefix
from curation.core.node import Node
from curation.core.parts import sum_parts
from curation.core.vocab import Block
from curation.recipe.output import MAX_PART_BYTES
from curation.runtime.fanout import Spread, can_spread
from curation.shards.counting import TokenCounter
from curation.shards.merging import PART, PartJob, plan_split, unsplit_digests, write_part, write_parts


def _counter(layout: dict, target: Path) -> TokenCounter:
    return TokenCounter([Block(*b) for b in layout["blocks"]], layout["reserved"], f"{target}.bin")


def _result(job: PartJob, counter: TokenCounter, hashes: dict) -> dict:
    return {"documents": job.docs[1] - job.docs[0], "counted": counter.result(job.target), "hashes": hashes}


def merge_part(inputs: list[Path], counts: list[int], dtype: str, job: PartJob, layout: dict) -> dict:
    """Write one part and count its tokens by modality (a task of its own): documents, counts, sha256 of its files."""
    counter = _counter(layout, job.target)
    return _result(job, counter, write_part(inputs, counts, np.dtype(dtype), job, tokens=counter.add))


def _merge_set(inputs: list[Path], target: Path, limit: int, layout: dict) -> tuple[list[tuple[PartJob, dict]],
                                                                                     tuple[str, str], bool]:
    """The parts of one shard set, each with `merge_part`'s result; the set's unsplit digests; whether the
    parts were written by tasks of their own."""
    dtype, counts, jobs = plan_split(inputs, target, limit)
    if len(jobs) > 1 and can_spread():
        spread = Spread(merge_part, [(inputs, counts, dtype.str, job, layout) for job in jobs])
        whole = unsplit_digests(inputs)           # this task reads the set once more while the parts are written
        return list(zip(jobs, spread.results())), whole, True
    counters: dict[Path, TokenCounter] = {}

    def counter(p: Path):
        counters[p] = _counter(layout, p)
        return counters[p].add

    hashes, whole = write_parts(inputs, counts, dtype, jobs, tokens=counter)
    return [(job, _result(job, counters[job.target], h)) for job, h in zip(jobs, hashes)], whole, False


def run_merge(out: Path, node: Node) -> dict:
    prefix = source_prefix(out, node.source)
    layout = node.spec["vocab"]
    outputs: list[str] = []
    extra: dict = {}
    counted = [domains_path(out, node.source, s) for s in node.spec["shards"]]
    if all(p.is_file() for p in counted):   # tokenize tasks of an older curate wrote none: the driver counts
        summed = source_domains_path(out, node.source)
        sum_parts(counted, ("web_domain",), ("documents", "tokens"), summed, {"source": node.source})
        outputs.append(str(summed.relative_to(out)))
        extra["domains"] = str(summed.relative_to(out))
    limit = node.spec.get("max_part_bytes", MAX_PART_BYTES)
    shards, spread = {}, 0
    for suffix in node.spec["outputs"]:   # the source's shards, and its other outputs (.no_reasoning, ...) alike
        target = Path(f"{prefix}{suffix}")
        inputs = [Path(f"{part_prefix(out, node.source, s)}{suffix}") for s in node.spec["shards"]]
        done, whole, by_tasks = _merge_set(inputs, target, limit, layout)
        spread += len(done) if by_tasks else 0
        _remove_other_parts(target, [job.target for job, _ in done])
        parts = []
        for job, r in done:
            exts = (".bin", ".idx") if r["documents"] else (".idx",)
            parts.append({"prefix": job.target.name, **r["counted"],
                          "files": {ext: {"bytes": Path(f"{job.target}{ext}").stat().st_size, "sha256": r["hashes"][ext]}
                                    for ext in exts}})
            outputs += [f"{job.target.relative_to(out)}{ext}" for ext in exts]
        if len(parts) == 1:
            shards[suffix] = {k: v for k, v in parts[0].items() if k != "prefix"}
        else:
            shards[suffix] = {**{k: sum(p[k] for p in parts) for k in ("text", "image", "audio", "documents", "total")},
                              "parts": parts, "unsplit_sha256": list(whole)}
    # parts written by tasks of their own (`runtime.fanout`); nothing the ledger or manifests read
    return {"outputs": outputs, "shards": shards, **extra, **({"part_tasks": spread} if spread else {})}


def _remove_other_parts(target: Path, written: list[Path]) -> None:
    """An earlier run's files of this shard set under the other names (one prefix, or more parts)."""
    keep = {p.name for p in written}
    for old in [target, *(Path(str(f)[:-len(".idx")]) for f in target.parent.glob(f"{target.name}{PART}*.idx"))]:
        if old.name not in keep:
            for ext in (".bin", ".idx"):
                Path(f"{old}{ext}").unlink(missing_ok=True)
