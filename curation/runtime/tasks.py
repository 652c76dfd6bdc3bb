"""The record pipeline's tasks: process and tokenize one shard (merge a source: `runtime.merge`), for any modality.

Each takes the output folder and its node, rebuilds what it needs from the node's plain spec (models,
LID files and vocabularies are cached per worker process), writes its outputs atomically and returns
its marker payload: step counts and the files it wrote. Nothing here knows which modality it runs:
the modality's declaration (`curation.steps.registry.MODALITIES`) reads, checks, keeps and encodes.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from curation.core.atomic import atomic_write_jsonl, atomic_write_parquet
from curation.core.io import as_location
from curation.core.layout import (
    codes_dir,
    decisions_path,
    domains_path,
    drops_path,
    part_prefix,
    processed_path,
    quarantine_path,
)
from curation.core.node import Node
from curation.core.record import QuarantineSink
from curation.plan.pipeline import build_steps, encoder_spec, process_chain
from curation.recipe.schema import Source
from curation.runtime.merge import run_merge
from curation.shards import IndexedWriter
from curation.steps.compliance.domains import web_domain
from curation.steps.droplist import DropListed, read_drops
from curation.steps.encode import BatchCodes
from curation.steps.modality import read_processed
from curation.steps.registry import MODALITIES

DECISIONS = pa.schema([("shard", pa.string()), ("id", pa.string()), ("step", pa.string()), ("outcome", pa.string()),
                       ("reason", pa.string()), ("detail", pa.string())])
DOMAINS = pa.schema([("web_domain", pa.string()), ("documents", pa.int64()), ("tokens", pa.int64())])


def _rel(out: Path, path: Path) -> str:
    return str(Path(path).relative_to(out))


def _write_sink(out: Path, node: Node, sink: QuarantineSink, phase: str) -> list[str]:
    """The task's quarantined records, and (unless the recipe turned them off) its decisions; returns the
    files written (outputs of the task like its shards, so a published output carries them too)."""
    written = []
    quarantine = quarantine_path(out, node.source, node.shard, phase)
    atomic_write_jsonl(quarantine, sink.entries)
    if sink.entries:
        written.append(_rel(out, quarantine))
    path = decisions_path(out, node.source, node.shard, phase)
    if not node.spec.get("decisions") or not sink.decisions:
        path.unlink(missing_ok=True)
        return written
    step, rid, outcome, reason, detail = (list(c) for c in zip(*sink.decisions))
    atomic_write_parquet(path, pa.table({"shard": [node.shard] * len(rid), "id": rid, "step": step,
                                         "outcome": outcome, "reason": reason, "detail": detail}, schema=DECISIONS))
    return [*written, _rel(out, path)]


def run_process(out: Path, node: Node) -> dict:
    spec = node.spec
    src = Source.model_validate(spec["source"])
    modality = MODALITIES[src.modality]
    sink = QuarantineSink()
    common = {"source": src.name, "sink": sink}
    location = as_location(spec["path"])
    reader = modality.reader(src, location, shard_label=spec["rel"], **common)
    steps = build_steps(process_chain(src, spec["compliance"], location, Path(spec["base_dir"])), **common)
    stream = reader.run()
    for step in steps:
        stream = step.run(stream)
    writer = modality.writer(processed_path(out, src.name, node.shard), out=out, source=src.name, shard=node.shard)
    try:
        for record in stream:
            writer.add(record)
    except BaseException:
        writer.abort()
        raise
    files = writer.close()
    sunk = _write_sink(out, node, sink, "process")
    return {"stats": [reader.stats.to_json(), *[s.stats.to_json() for s in steps]],
            "outputs": [*(_rel(out, f) for f in files), *sunk]}


def run_tokenize(out: Path, node: Node) -> dict:
    spec = node.spec
    src = Source.model_validate(spec["source"])
    modality = MODALITIES[src.modality]
    sink = QuarantineSink()
    common = {"source": src.name, "sink": sink}
    steps = []
    for step, phases in spec["drops"]:
        reasons: dict[str, str] = {}
        for phase in phases:
            reasons.update(read_drops(drops_path(out, phase, src.name, node.shard)))
        steps.append(DropListed(step, reasons, **common))
    checkpoint = BatchCodes(codes_dir(out, src.name, node.shard), node.fingerprint)
    steps += build_steps([encoder_spec(src, spec["run"])], out=out, shard=node.shard, checkpoint=checkpoint, **common)
    stream = read_processed(processed_path(out, src.name, node.shard), src.name, modality.record_columns)
    for step in steps:
        stream = step.run(stream)
    prefix = part_prefix(out, src.name, node.shard)
    writers = {suffix: IndexedWriter(Path(f"{prefix}{suffix}")) for suffix in spec["outputs"]}
    records = documents = tokens = 0
    # documents and tokens of the main shards per web domain of the page URL ("" without one): the
    # ledger's `domain_tokens`, counted here where the tokens are and written as a part file that the
    # merge task sums (a shard can hold thousands of domains: in the marker, the driver would hold them all)
    domains: dict[str, list[int]] = {}
    try:
        for record in stream:
            records += 1
            for suffix, sequences in record.shards.items():
                for seq in sequences:
                    writers[suffix].add(seq)
                    if suffix == "":
                        documents += 1
                        tokens += int(seq.size)
                        acc = domains.setdefault(web_domain(record.meta.get(src.url_field)) or "", [0, 0])
                        acc[0] += 1
                        acc[1] += int(seq.size)
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    for w in writers.values():
        w.close()
    checkpoint.clear()
    domain_file = domains_path(out, src.name, node.shard)
    counted = sorted(domains.items())   # "" (no URL) first, as NULL
    atomic_write_parquet(domain_file, pa.table({"web_domain": [d or None for d, _ in counted],
                                                "documents": [c[0] for _, c in counted],
                                                "tokens": [c[1] for _, c in counted]}, schema=DOMAINS))
    sunk = [*_write_sink(out, node, sink, "tokenize"), _rel(out, domain_file)]
    return {"stats": [s.stats.to_json() for s in steps], "records": records, "documents": documents,
            # where each codec ran and at which precision (`curation.steps.device`; the ledger's `encoders`)
            "encoders": [p.to_json() for s in steps for p in getattr(s, "placements", [])],
            # [tokens, images] per planned image batch: the run's plan per rank (`curation.ledger.ranks`)
            **({"image_batches": b} if (b := [x for s in steps for x in getattr(s, "planned", [])]) else {}),
            # seconds loading, encoding and in all, of the codec steps (benchmarks: the encoder's busy share)
            **({"timing": t} if (t := [s.timing for s in steps if hasattr(s, "timing")]) else {}),
            "tokens": tokens,
            "outputs": [*(f"{_rel(out, prefix)}{suffix}{ext}" for suffix in spec["outputs"]
                          for ext in (".bin", ".idx")), *sunk]}


RECORD_TASKS = {"process": run_process, "tokenize": run_tokenize, "merge": run_merge}
