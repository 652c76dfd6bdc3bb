"""The two matching stages of decontamination (`curation.corpus.decont.phase` plans and resolves them):

    decont_index           benchmark items → n-gram index shards          → index/shard-*.npz, items.parquet
    decont(source, shard)  every processed document matched against the
                           index, one index shard at a time; a document
                           is flagged by its best item if that reaches
                           the threshold; images are matched by pHash
                           (every image of an interleaved document)    → flags/<source>/<shard>.parquet
"""
from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.atomic import atomic_write_parquet
from curation.core.layout import decont_dir, flags_path, processed_path
from curation.core.node import Node
from curation.corpus.decont.benchmarks import load_items
from curation.corpus.decont.images import match_images
from curation.corpus.decont.index import build_index, match
from curation.corpus.stream import column_batches
from curation.errors import CurateError, RecordError
from curation.steps.image.phash import DEFAULT_REDUCE, default_reductions, phash64
from curation.steps.interleaved.document import image_hashes
from curation.steps.registry import MODALITIES
from curation.steps.text.minhash import Shingler

FLAG_SCHEMA = pa.schema([("source", pa.string()), ("shard", pa.string()), ("id", pa.string()),
                         ("benchmark", pa.string()), ("item", pa.int64()), ("item_id", pa.string()),
                         ("overlap", pa.int64()), ("item_ngrams", pa.int64()), ("ratio", pa.float64())])


PHASHES = pa.map_(pa.int64(), pa.string())   # pHash input size -> hash, one per reduction in use


def _image_items(bench: dict, reductions: list[int]) -> tuple[list[dict], int]:
    """(items with their pHash at every reduction in use, unreadable files) of one image benchmark: a
    folder or a tar. A benchmark image is compared with training images of several domains, each only
    with the hash made at that domain's reduction (`curation.steps.image.phash`)."""
    from curation.steps.image.decode import (
        decode,  # Pillow ([images] extra): only image benchmarks need it
    )
    path = Path(bench["path"])
    if path.is_dir():
        blobs = [(str(f.relative_to(path)), f.read_bytes()) for f in sorted(path.rglob("*")) if f.is_file()]
    else:
        with tarfile.open(path, "r:*") as tar:
            blobs = [(m.name, tar.extractfile(m).read()) for m in tar if m.isfile()]
    items, bad = [], 0
    for name, data in blobs:
        try:
            img = decode(data)
        except RecordError:
            bad += 1  # not an image (a README, a label file): nothing to match
            continue
        hashes = [(r, f"{phash64(img, r):016x}") for r in sorted({DEFAULT_REDUCE, *reductions})]
        items.append({"benchmark": bench["name"], "item_id": name, "text": name, "ngrams": 0,
                      "phash": dict(hashes)[DEFAULT_REDUCE], "phashes": hashes})
    return items, bad


def run_decont_index(out: Path, node: Node) -> dict:
    out_dir, spec = out, node.spec
    items = [it for b in spec["benchmarks"]
             for it in load_items(b["name"], Path(b["path"]), b["fields"], b["id_field"])]
    table = build_index(items, spec["ngram"], spec["shards"], decont_dir(out_dir) / "index")
    table = table.append_column("phash", pa.nulls(table.num_rows, pa.string()))
    table = table.append_column("phashes", pa.nulls(table.num_rows, PHASHES))
    reductions = spec.get("phash_reductions") or default_reductions()
    per = {}
    for b, n in zip(table.column("benchmark").to_pylist(), table.column("ngrams").to_pylist()):
        p = per.setdefault(b, {"items": 0, "unindexable": 0})
        p["items"] += 1
        p["unindexable"] += n == 0
    for b in spec.get("image_benchmarks", []):  # after the text items: their indices stay the index's
        images, bad = _image_items(b, reductions)
        per[b["name"]] = {"items": len(images), "unindexable": bad}
        if images:
            table = pa.concat_tables([table, pa.Table.from_pylist(images, schema=table.schema)])
    atomic_write_parquet(decont_dir(out_dir) / "items.parquet", table)
    return {
        "benchmarks": [{"name": b["name"], "sha256": b["sha256"], "fields": b.get("fields", ["image"]),
                        **per.get(b["name"], {})} for b in spec["benchmarks"] + spec.get("image_benchmarks", [])],
        "outputs": ["work/decont/items.parquet"] + [f"work/decont/index/shard-{k:03d}.npz"
                                                   for k in range(spec["shards"])]}


def decont_text_batches(out: Path, source: str, shard: str, modality: str) -> Iterator[tuple[list[str], list[str]]]:
    """(ids, texts) of a processed shard as decontamination sees them, in bounded batches
    (`curation.corpus.stream`): the processed text, or what the modality declares (`Modality.decont_text`:
    an audio clip's transcript and translation)."""
    m = MODALITIES[modality]
    cols = ("id", "text") if m.decont_text is None else ("id", "text", "meta")
    for batch in column_batches(processed_path(out, source, shard), cols):
        texts = batch["text"]
        if m.decont_text is not None:
            texts = [m.decontaminated_text(x, meta) for x, meta in zip(texts, batch["meta"])]
        yield batch["id"], texts


def run_decont(out: Path, node: Node) -> dict:
    """Flags of one shard. Its documents are matched in batches (`curation.corpus.stream`), each batch
    against every index shard in turn, so the task holds one batch of text and n-gram hashes, one index
    shard and the flags, never the shard's text."""
    out_dir, spec = out, node.spec
    items = pq.read_table(decont_dir(out_dir) / "items.parquet", columns=["benchmark", "item_id", "ngrams"])
    bench, item_ids, ngrams = (items.column(c).to_pylist() for c in ("benchmark", "item_id", "ngrams"))
    modality = spec.get("modality", "text")
    shingler = Shingler.cached(spec["ngram"], "eng")
    rows, documents = [], 0
    for ids, texts in decont_text_batches(out_dir, node.source, node.shard, modality):
        documents += len(ids)
        hashes = [shingler(t) for t in texts]
        for rid, found in zip(ids, match(hashes, decont_dir(out_dir) / "index", spec["shards"])):
            if not found:
                continue
            # the best item: highest share of its n-grams, then most n-grams, then first in the registry
            it, c = max(found.items(), key=lambda kv: (kv[1] / ngrams[kv[0]], kv[1], -kv[0]))
            ratio = c / ngrams[it]
            if ratio >= spec["threshold"]:
                rows.append({"source": node.source, "shard": node.shard, "id": rid, "benchmark": bench[it],
                             "item": it, "item_id": item_ids[it], "overlap": c, "item_ngrams": ngrams[it],
                             "ratio": round(ratio, 6)})
    if spec.get("image"):
        rows = _image_flags(out_dir, node, rows, bench, item_ids)
    path = flags_path(out_dir, node.source, node.shard)
    atomic_write_parquet(path, pa.Table.from_pylist(rows, schema=FLAG_SCHEMA))
    return {"documents": documents, "flagged": len(rows), "outputs": [str(path.relative_to(out_dir))]}


def _image_flags(out: Path, node: Node, rows: list[dict], bench: list, item_ids: list) -> list[dict]:
    """Add (or replace caption flags with) matches of the shard's images against benchmark images: the
    nearest benchmark image within the sample's domain radius, compared at the reduction the training
    image was hashed with; overlap = Hamming distance of 64 bits."""
    phashes = pq.read_table(decont_dir(out) / "items.parquet", columns=["phashes"]).column("phashes").to_pylist()
    image_items = [i for i, h in enumerate(phashes) if h is not None]
    if not image_items:
        return rows
    t = pq.read_table(processed_path(out, node.source, node.shard), columns=["id", "meta"])
    # one entry per training image: (record, pHash, domain); an interleaved document has one per image, and is
    # flagged (whole: its text often quotes the benchmark item) by its nearest image
    entries = [(i, h, domain, reduce) for i, m in enumerate(t.column("meta").to_pylist())
               for _, h, domain, reduce in image_hashes(json.loads(m))]
    found = []
    by_reduce: dict[int, list[int]] = {}
    for e, (_, _, _, reduce) in enumerate(entries):
        by_reduce.setdefault(reduce, []).append(e)
    for reduce, members in sorted(by_reduce.items()):
        at = [dict(phashes[i]).get(reduce) for i in image_items]
        if None in at:
            raise CurateError(f"decontamination of {node.source}/{node.shard}: its images are hashed at a "
                              f"{reduce}x{reduce} reduction, the benchmark images only at "
                              f"{sorted(dict(phashes[image_items[0]]))}; re-run the decont_index phase with "
                              f"{reduce} among its reductions")
        train = np.array([entries[e][1] for e in members], dtype=np.uint64)
        hits = match_images(train, [entries[e][2] for e in members],
                            np.array([int(h, 16) for h in at], dtype=np.uint64), node.spec["image_radii"])
        found += [(entries[members[ti]][0], bi, dist) for ti, bi, dist in hits]
    best: dict[int, tuple[int, int]] = {}
    for ti, bi, dist in found:
        if ti not in best or (dist, bi) < best[ti]:
            best[ti] = (dist, bi)
    by_id = {r["id"]: r for r in rows}
    ids = t.column("id").to_pylist()
    for ti, (dist, bi) in sorted(best.items()):
        item = image_items[bi]
        by_id[ids[ti]] = {"source": node.source, "shard": node.shard, "id": ids[ti], "benchmark": bench[item],
                          "item": item, "item_id": item_ids[item], "overlap": dist, "item_ngrams": 64,
                          "ratio": round(1 - dist / 64, 6)}
    return [by_id[i] for i in ids if i in by_id]
