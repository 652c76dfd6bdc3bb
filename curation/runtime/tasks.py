"""What one task does, for each phase of the plan (see `curation.plan.graph`).

These functions run inside Ray workers. They take plain dicts, rebuild what they need
(models and LID files are cached per worker process), write their outputs atomically and
finish by writing their completion marker.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.atomic import atomic_write_jsonl, atomic_write_parquet
from curation.core.layout import (
    LONG_CONTEXT,
    NO_REASONING,
    part_prefix,
    processed_path,
    shar_dir,
    source_prefix,
)
from curation.core.markers import write_marker
from curation.core.record import QuarantineSink, Record
from curation.core.urls import normalize_url
from curation.core.vocab import Vocabulary
from curation.errors import InputError
from curation.recipe.schema import Source
from curation.shards import IndexedWriter, ResumableWriter, merge
from curation.steps.compliance.licences import ApprovedConstituents, LicencePolicy
from curation.steps.compliance.optout import OptOutIndex, RobotsOptOut
from curation.steps.droplist import (
    DropListed,
    ExactDedup,
    content_hash,
    resolve_duplicates,
)
from curation.steps.image.read import ImageCheck, ParquetImageReader, WebDatasetReader
from curation.steps.registry import build_filter
from curation.steps.text.inputs import limits_for
from curation.steps.text.normalize import Normalize
from curation.steps.text.pii import PIIRedactor
from curation.steps.text.read import JsonlReader, TableReader
from curation.steps.text.tokenize import TextTokenizer

PROCESSED_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("meta", pa.string()),
                              ("content_hash", pa.binary(16))])
# image samples: `text` is the caption, `content_hash` hashes the encoded image, `image` holds it
IMAGE_PROCESSED_SCHEMA = pa.schema([*PROCESSED_SCHEMA, ("image", pa.binary())])
# audio clips: `text` is the transcript, `content_hash` hashes the 16-bit PCM at 24 kHz, `fingerprint`
# is the spectral fingerprint (uint32 little-endian) for near-duplicates; the audio is in the Shar shard
AUDIO_PROCESSED_SCHEMA = pa.schema([*PROCESSED_SCHEMA, ("fingerprint", pa.binary())])


def image_hash(data: bytes) -> bytes:
    import hashlib
    return hashlib.blake2b(data, digest_size=16).digest()




def _unique_names(steps) -> None:
    seen: dict[str, int] = {}
    for s in steps:
        seen[s.name] = seen.get(s.name, 0) + 1
        if seen[s.name] > 1:
            s.name = s.stats.step = f"{s.name}.{seen[s.name]}"


@lru_cache(maxsize=2)
def _optout_index(path: str, agents: tuple[str, ...], fingerprint: str) -> OptOutIndex:
    index = OptOutIndex.load(path, agents=agents)
    if index.fingerprint != fingerprint:
        raise InputError(f"robots.txt snapshots in {path} changed after the run was planned; run again")
    return index


def run_process(out: str, key: str, fingerprint: str, spec: dict) -> dict:
    out_dir = Path(out)
    src = Source.model_validate(spec["source"])
    sink = QuarantineSink()
    common = {"source": src.name, "sink": sink}
    image, audio = src.modality == "image", src.modality == "audio"
    if audio:
        from curation.steps.audio.ingest import AudioManifestReader
        reader = AudioManifestReader(Path(spec["path"]), settings=src.audio_settings(), text_field=src.input.text_field,
                                     id_field=src.input.id_field, metadata_fields=src.input.metadata_fields,
                                     shard_label=spec["rel"], **common)
    elif image and src.input.format == "parquet":
        reader = ParquetImageReader(Path(spec["path"]), image_field=src.input.image_field,
                                    caption_field=src.input.text_field, id_field=src.input.id_field,
                                    metadata_fields=src.input.metadata_fields, shard_label=spec["rel"], **common)
    elif image:
        reader = WebDatasetReader(Path(spec["path"]), metadata_fields=src.input.metadata_fields,
                                  shard_label=spec["rel"], **common)
    elif src.input.format in ("warc", "html"):  # web inputs (issue 15); the lead moves this into the registry
        from curation.steps.text.web_read import HtmlReader, WarcReader
        web = {"extract": src.input.extract, "metadata_fields": src.input.metadata_fields,
               "limits": limits_for(src.input), "shard_label": spec["rel"], **common}
        reader = (WarcReader(Path(spec["path"]), **web) if src.input.format == "warc" else
                  HtmlReader(Path(spec["path"]), pages=src.input.pages, id_field=src.input.id_field, **web))
    else:
        reader_cls = TableReader if src.input.format == "parquet" else JsonlReader
        reader = reader_cls(Path(spec["path"]), text_field=src.input.text_field, id_field=src.input.id_field,
                            metadata_fields=src.input.metadata_fields, shard_label=spec["rel"],
                            turn_roles=src.input.turn_roles, limits=limits_for(src.input), **common)
    comp = spec["compliance"]
    steps = []
    if comp.get("constituents"):
        steps.append(ApprovedConstituents(comp["constituents"]["field"], comp["constituents"]["approved"], **common))
    steps.append(LicencePolicy(comp["licence"]["class"], comp["licence"]["exclude"], comp["licence"]["field"],
                               **common))
    if comp["optout"]:
        o = comp["optout"]
        steps.append(RobotsOptOut(_optout_index(o["snapshots"], tuple(o["agents"]), o["fingerprint"]),
                                  url_field=o["url_field"], **common))
    if audio:
        from curation.steps.audio.ingest import AudioCheck
        steps.append(AudioCheck(settings=src.audio_settings(), base=Path(spec["path"]).parent, **common))
    elif image:
        steps.append(ImageCheck(min_side=src.image_settings().min_side, domain=src.image_settings().domain,
                                phash_reduce=src.image_settings().phash_reduce, **common))
    else:
        steps += [Normalize(nfc=src.normalize.nfc, ftfy=src.normalize.ftfy, **common),
                  *[build_filter(f, base_dir=Path(spec["base_dir"]), **common) for f in src.filters]]
    if comp["pii"]:
        steps.append(PIIRedactor(kinds=tuple(comp["pii"]), **common))
    _unique_names(steps)
    stream = reader.run()
    for step in steps:
        stream = step.run(stream)
    if audio:
        return _write_processed_audio(out_dir, key, fingerprint, spec, src, stream, reader, steps, sink)
    cols: dict[str, list] = {"id": [], "text": [], "meta": [], "content_hash": [], **({"image": []} if image else {})}
    for rec in stream:
        cols["id"].append(rec.id)
        cols["text"].append(rec.text)
        cols["meta"].append(json.dumps(rec.meta, sort_keys=True, ensure_ascii=False, default=str))  # dates, bytes
        cols["content_hash"].append(content_hash(rec.text) if not image else image_hash(rec.image))
        if image:
            cols["image"].append(rec.image)
    atomic_write_parquet(processed_path(out_dir, src.name, spec["shard"]),
                         pa.table(cols, schema=IMAGE_PROCESSED_SCHEMA if image else PROCESSED_SCHEMA))
    atomic_write_jsonl(out_dir / "quarantine" / src.name / f"{spec['shard']}.process.jsonl", sink.entries)
    return write_marker(out_dir, key, fingerprint, {
        "stats": [reader.stats.to_json(), *[s.stats.to_json() for s in steps]],
        "outputs": [str(processed_path(out_dir, src.name, spec["shard"]).relative_to(out_dir))]})


def _write_processed_audio(out_dir: Path, key: str, fingerprint: str, spec: dict, src: Source, stream,
                           reader, steps, sink) -> dict:
    """Audio clips: the Parquet table the other phases read (transcript, metadata, PCM hash, spectral
    fingerprint) and the Lhotse Shar shard the codec reads (`curation.steps.audio.ingest.write_shar`)."""
    from curation.steps.audio.fingerprint import fingerprint as spectral_fingerprint
    from curation.steps.audio.fingerprint import pcm_hash
    from curation.steps.audio.ingest import write_shar
    records = list(stream)
    vocab = _vocab(spec["vocab"])
    text_ids = [e.ids for e in vocab.tokenizer.encode_batch([r.text for r in records], add_special_tokens=False)]
    write_shar(shar_dir(out_dir, src.name, spec["shard"]), records, text_ids)
    table = pa.table({"id": [r.id for r in records], "text": [r.text for r in records],
                      "meta": [json.dumps(r.meta, sort_keys=True, ensure_ascii=False, default=str) for r in records],
                      "content_hash": [pcm_hash(r.audio)[:16] for r in records],
                      "fingerprint": [spectral_fingerprint(r.audio).astype("<u4").tobytes() for r in records]},
                     schema=AUDIO_PROCESSED_SCHEMA)
    atomic_write_parquet(processed_path(out_dir, src.name, spec["shard"]), table)
    atomic_write_jsonl(out_dir / "quarantine" / src.name / f"{spec['shard']}.process.jsonl", sink.entries)
    rel = str(shar_dir(out_dir, src.name, spec["shard"]).relative_to(out_dir))
    return write_marker(out_dir, key, fingerprint, {
        "stats": [reader.stats.to_json(), *[s.stats.to_json() for s in steps]],
        "outputs": [str(processed_path(out_dir, src.name, spec["shard"]).relative_to(out_dir)),
                    f"{rel}/cuts.000000.jsonl.gz"]})


def run_dedup(out: str, key: str, fingerprint: str, spec: dict, shards: list[tuple[str, str]]) -> dict:
    """`shards`: (source, shard) in canonical order (recipe source order, then shard)."""
    out_dir = Path(out)
    rows: list[dict] = []
    if spec["cfg"] is not None:
        url_field = spec["cfg"]["url"]
        columns = []
        for source, shard in shards:
            t = pq.read_table(processed_path(out_dir, source, shard),
                              columns=["id", "content_hash"] + (["meta"] if url_field else []))
            urls = [None] * t.num_rows
            if url_field:
                urls = [normalize_url(u) if isinstance(u := json.loads(m).get(url_field), str) else None
                        for m in t.column("meta").to_pylist()]
            columns.append((source, shard, t.column("content_hash").to_pylist(), t.column("id").to_pylist(), urls))
        rows = resolve_duplicates(columns, spec["cfg"]["scope"])
    if spec.get("images", {}).get("sources"):
        from curation.corpus.image_near import image_duplicates
        image_rows, clusters = image_duplicates(out_dir, shards, spec["images"], rows)
        rows += image_rows
        atomic_write_parquet(out_dir / "work" / "dedup" / "image_clusters.parquet", clusters)
    if spec.get("audio"):
        from curation.corpus.audio_near import audio_duplicates
        audio_rows, clusters = audio_duplicates(out_dir, shards, spec["audio"], rows)
        rows += audio_rows
        atomic_write_parquet(out_dir / "work" / "dedup" / "audio_clusters.parquet", clusters)
    names = ["source", "shard", "id", "reason", "duplicate_of_source", "duplicate_of_id"]
    table = pa.table({n: pa.array([r[n] for r in rows], pa.string()) for n in names})
    atomic_write_parquet(out_dir / "work" / "dedup" / "exact.parquet", table)
    return write_marker(out_dir, key, fingerprint, {"duplicates": len(rows),
                                                    "outputs": ["work/dedup/exact.parquet"]})


@lru_cache(maxsize=2)
def _vocab(path: str) -> Vocabulary:
    return Vocabulary.load(path)


def run_tokenize(out: str, key: str, fingerprint: str, spec: dict) -> dict:
    out_dir = Path(out)
    source, shard = spec["source"], spec["shard"]
    table = pq.read_table(processed_path(out_dir, source, shard))
    sink = QuarantineSink()
    common = {"source": source, "sink": sink}
    steps = []
    if spec["dedup"]:
        dups = pq.read_table(out_dir / "work" / "dedup" / "exact.parquet",
                             filters=[("source", "=", source), ("shard", "=", shard)], columns=["id", "reason"])
        steps.append(ExactDedup(dict(zip(dups.column("id").to_pylist(), dups.column("reason").to_pylist())),
                                **common))
    if spec.get("near_dedup"):
        near = pq.read_table(out_dir / "work" / "minhash" / "duplicates.parquet",
                             filters=[("source", "=", source), ("shard", "=", shard)], columns=["id"])
        steps.append(DropListed("near_dedup", dict.fromkeys(near.column("id").to_pylist(), "near_duplicate"),
                                **common))
    if spec.get("decont"):
        from curation.corpus.decont.phase import removed_ids
        steps.append(DropListed("decontaminate", removed_ids(out_dir, source, shard), **common))
    records = (Record(id=i, source=source, text=t, meta=json.loads(m), image=img)
               for i, t, m, img in zip(table.column("id").to_pylist(), table.column("text").to_pylist(),
                                       table.column("meta").to_pylist(),
                                       table.column("image").to_pylist() if spec.get("image")
                                       else [None] * table.num_rows))
    for step in steps:
        records = step.run(records)
    if spec.get("audio"):
        documents, tokens, extra = _write_audio(out_dir, spec, fingerprint, list(records), steps, common)
    elif spec.get("image"):
        documents, tokens = _write_images(out_dir, spec, fingerprint, list(records), steps, common)
    else:
        documents, tokens = _write_text(out_dir, spec, records, steps, common)
    atomic_write_jsonl(out_dir / "quarantine" / source / f"{shard}.tokenize.jsonl", sink.entries)
    prefix = part_prefix(out_dir, source, shard).relative_to(out_dir)
    return write_marker(out_dir, key, fingerprint, {
        "stats": [s.stats.to_json() for s in steps], "documents": documents, "tokens": tokens,
        "outputs": [f"{prefix}.bin", f"{prefix}.idx"], **({"audio": extra} if spec.get("audio") else {})})


def _write_text(out_dir: Path, spec: dict, records, steps: list, common: dict) -> tuple[int, int]:
    tokenizer = TextTokenizer(_vocab(spec["vocab"]), batch_size=spec["batch_size"], **common)
    steps.append(tokenizer)
    writer = IndexedWriter(part_prefix(out_dir, spec["source"], spec["shard"]))
    stripped = None
    if spec.get("reasoning"):
        from curation.steps.text.reasoning import ReasoningStripper
        stripped = ReasoningStripper(tokenizer, **spec["reasoning"])
        copy = IndexedWriter(Path(f"{part_prefix(out_dir, spec['source'], spec['shard'])}{NO_REASONING}"))
    documents = tokens = 0
    try:
        for rec in tokenizer.run(records):
            writer.add(rec.tokens)
            if stripped is not None:
                copy.add(stripped(rec))
            documents += 1
            tokens += int(rec.tokens.size)
    except BaseException:
        writer.abort()
        if stripped is not None:
            copy.abort()
        raise
    writer.close()
    if stripped is not None:
        copy.close()
    return documents, tokens


def _write_images(out_dir: Path, spec: dict, fingerprint: str, records: list, steps: list,
                  common: dict) -> tuple[int, int]:
    """Images are written batch by batch with a checkpoint after each (see `curation.steps.image.tokenize`)."""
    from curation.steps.image.tokenize import ImageTokenizer, load_codec
    im = spec["image"]
    tokenizer = ImageTokenizer(_vocab(spec["vocab"]), load_codec(im["codec"]), area=im["area"],
                               caption=im["caption"], batch_tokens=im["batch_tokens"], **common)
    steps.append(tokenizer)
    writer = ResumableWriter(part_prefix(out_dir, spec["source"], spec["shard"]), fingerprint)
    try:
        tokenizer.write(records, writer)
    except BaseException:
        writer.abort()
        raise
    writer.close()
    return len(writer.lengths), sum(writer.lengths)


def _write_audio(out_dir: Path, spec: dict, fingerprint: str, records: list, steps: list,
                 common: dict) -> tuple[int, int, dict]:
    """Clips are encoded batch by batch with the codes of each batch kept as a checkpoint (see
    `curation.steps.audio.tokenize`), then laid out as interleaved, transcription and audio-only sequences."""
    from curation.steps.audio.codec import load_audio_codec
    from curation.steps.audio.tokenize import AudioTokenizer
    au = spec["audio"]
    tokenizer = AudioTokenizer(_vocab(spec["vocab"]), load_audio_codec(au["codec"]),
                               max_batch_seconds=au["max_batch_seconds"], interleave=au["interleave"], **common)
    steps.append(tokenizer)
    prefix = part_prefix(out_dir, spec["source"], spec["shard"])
    writer, long_writer = IndexedWriter(prefix), IndexedWriter(Path(f"{prefix}{LONG_CONTEXT}"))
    try:
        tokenizer.write(records, shar_dir(out_dir, spec["source"], spec["shard"]), writer, fingerprint, long_writer)
    except BaseException:
        writer.abort()
        long_writer.abort()
        raise
    writer.close()
    long_writer.close()
    AudioTokenizer.cleanup(writer)
    return len(writer.lengths), sum(writer.lengths), tokenizer.counts


def run_merge(out: str, key: str, fingerprint: str, spec: dict) -> dict:
    out_dir = Path(out)
    source = spec["source"]
    prefix = source_prefix(out_dir, source)
    merge([part_prefix(out_dir, source, s) for s in spec["shards"]], prefix)
    rel = prefix.relative_to(out_dir)
    outputs = [f"{rel}.bin", f"{rel}.idx"]
    extra = ([NO_REASONING] if spec.get("reasoning") else []) + ([LONG_CONTEXT] if spec.get("audio") else [])
    for suffix in extra:   # the copy without reasoning spans, the audio long-context pool: merged alike
        merge([Path(f"{part_prefix(out_dir, source, s)}{suffix}") for s in spec["shards"]], Path(f"{prefix}{suffix}"))
        outputs += [f"{rel}{suffix}.bin", f"{rel}{suffix}.idx"]
    return write_marker(out_dir, key, fingerprint, {"outputs": outputs})
