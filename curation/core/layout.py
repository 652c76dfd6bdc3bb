"""The output folder's layout: the one place that knows where a run keeps what under `<out>/`.

    raw/<source>/                     acquired inputs (`curation.acquire`)
    processed/<source>/<shard>.parquet   records after the process phase (`.shar/` for audio clips)
    work/markers/<node key>.json      completion markers (fingerprint + counts)
    work/<phase>/...                  files that join the corpus-wide phases; work/<phase>/drops/
                                      <source>/<shard>.parquet: what a phase removes from a shard
    tokenized/<source>/parts/<shard>  per-task Megatron shards; tokenized/<source>/<source> merged
                                      (a set over `shards.max_part_bytes`: <source>.part-00000, ...,
                                      `curation.shards.shardset`)
    work/tokenize/domains/<source>/<shard>.parquet   a tokenize task's documents and tokens per web
                                      domain; work/tokenize/domains/<source>.parquet: summed by the merge
    quarantine/<source>/<shard>.<phase>.jsonl   quarantined records with their reasons
    review/                           exports for people (decontamination review)
    ledger/, manifests/, reports/     what auditors, trainers and readers open
    megatron/<stage>/                 the Megatron-LM hand-off of a stage (`curation.mixture.megatron`)
    handoff/<format>/<stage>/         its hand-off in another trainer format the recipe's `trainers:` names
"""
from __future__ import annotations

from pathlib import Path

NO_REASONING = ".no_reasoning"   # suffix of the prefix of a source's copy without reasoning spans
LONG_CONTEXT = ".long_context"   # suffix of the prefix of an audio source's long-context pool


def raw_dir(raw_root: Path, source: str) -> Path:
    return raw_root / source


def processed_path(out: Path, source: str, shard: str) -> Path:
    return out / "processed" / source / f"{shard}.parquet"


def is_processed_table(rel: str) -> bool:
    """Whether an output path (relative to `OUT`) is a shard's processed records (`processed_path`)."""
    return rel.startswith("processed/") and rel.endswith(".parquet")


def shar_dir(out: Path, source: str, shard: str) -> Path:
    return out / "processed" / source / f"{shard}.shar"


def part_prefix(out: Path, source: str, shard: str) -> Path:
    return out / "tokenized" / source / "parts" / shard


def source_prefix(out: Path, source: str) -> Path:
    return out / "tokenized" / source / source


def domains_path(out: Path, source: str, shard: str) -> Path:
    """Documents and tokens of one tokenize task's main shards per web domain of the page URL."""
    return work_dir(out, "tokenize") / "domains" / source / f"{shard}.parquet"


def source_domains_path(out: Path, source: str) -> Path:
    """A source's documents and tokens per web domain, summed over its shards by its merge task (the ledger's
    `domain_tokens` rows of the source)."""
    return work_dir(out, "tokenize") / "domains" / f"{source}.parquet"


def marker_path(out: Path, key: str) -> Path:
    return out / "work" / "markers" / f"{key}.json"


def quarantine_path(out: Path, source: str, shard: str, phase: str) -> Path:
    return out / "quarantine" / source / f"{shard}.{phase}.jsonl"


def decisions_path(out: Path, source: str, shard: str, phase: str) -> Path:
    """Every record a task dropped or quarantined, with its reason and evidence (hive-partitioned by source)."""
    return ledger_dir(out) / "decisions" / f"source={source}" / f"{shard}.{phase}.parquet"


def work_dir(out: Path, phase: str) -> Path:
    return out / "work" / phase


def drops_path(out: Path, phase: str, source: str, shard: str) -> Path:
    """The ids a corpus-wide phase removes from one shard (id, reason), read by that shard's tokenize task."""
    return work_dir(out, phase) / "drops" / source / f"{shard}.parquet"


def codes_dir(out: Path, source: str, shard: str) -> Path:
    """Codec output of finished batches of one tokenize task (its checkpoint)."""
    return Path(f"{part_prefix(out, source, shard)}.codes")


def exact_keys_path(out: Path, source: str, shard: str) -> Path:
    """Exact dedup's keys of one shard (content and URL hashes with their rows), sorted by hash."""
    return work_dir(out, "exact") / "keys" / source / f"{shard}.npy"


def exact_index_path(out: Path, source: str, shard: str) -> Path:
    """The key of every 64th row of the shard's sorted keys (`curation.corpus.partition.range_index`)."""
    return work_dir(out, "exact") / "keys" / source / f"{shard}.index"


def exact_part_path(out: Path, modality: str, part: int) -> Path:
    """The shared keys of one hash range of one modality: (document, kind, key) of every repeated key."""
    return work_dir(out, "exact") / "parts" / modality / f"{part:04d}.npy"


def sig_path(out: Path, source: str, shard: str) -> Path:
    """A shard's MinHash band keys, band-major with a table of partition slices (`curation.corpus.minhash_sig`)."""
    return work_dir(out, "minhash") / "sig" / source / f"{shard}.bands"


def sig_rows_path(out: Path, source: str, shard: str) -> Path:
    """The row-major (documents × bands) `.npy` of earlier versions, still read from `dedup.minhash.index` folders."""
    return work_dir(out, "minhash") / "sig" / source / f"{shard}.npy"


def edges_path(out: Path, band: int, part: int) -> Path:
    return work_dir(out, "minhash") / "edges" / f"{band:03d}-{part:03d}.npy"


def decont_dir(out: Path) -> Path:
    return work_dir(out, "decont")


def flags_path(out: Path, source: str, shard: str) -> Path:
    return decont_dir(out) / "flags" / source / f"{shard}.parquet"


def review_dir(out: Path) -> Path:
    return out / "review"


def ledger_dir(out: Path) -> Path:
    return out / "ledger"


def manifests_dir(out: Path) -> Path:
    return out / "manifests"


def megatron_dir(out: Path, stage: str) -> Path:
    """A stage's Megatron-LM hand-off: data-args files and the indexed datasets that express its plan."""
    return out / "megatron" / stage


def handoff_dir(out: Path, fmt: str, stage: str) -> Path:
    """A stage's hand-off in a trainer format other than Megatron's (`curation.mixture.handoffs.FORMATS`)."""
    return out / "handoff" / fmt / stage
