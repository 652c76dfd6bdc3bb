"""The ledger's tables: the core ones (run, sources, inputs, step counts, tokens, mixture, consumed) and
those the steps, modalities and corpus-wide phases contribute (`ledger_tables` / `tables` /
`ledger_table` in their declarations). Every table exists in every ledger, empty when unused, so
queries and reports can rely on them.
"""
from __future__ import annotations

import pyarrow as pa

from curation.acquire.feeds import FEEDS_SCHEMA
from curation.ledger.encoders import ENCODERS
from curation.ledger.encoders import VOLATILE as ENCODER_VOLATILE
from curation.ledger.environment import LIBRARIES, TIME_COLUMNS
from curation.ledger.ranks import RANK_PLAN
from curation.ledger.ranks import VOLATILE as RANK_VOLATILE
from curation.ledger.transparency import SCHEMAS as TRANSPARENCY
from curation.plan.phases import ledger_schemas
from curation.steps.registry import LEDGER_STEPS, MODALITIES
from curation.steps.text.filters import coverage

# Columns whose values describe one execution rather than its outputs: step timings, when and where the
# run happened, the library versions it found. Left out of the manifests' ledger digests
# (`curation.mixture.merkle.table_digest`) and of the determinism checks, so two runs of the same
# recipe on the same inputs still give byte-identical manifests. Column names here are unique
# across the ledger's tables.
VOLATILE_COLUMNS: frozenset[str] = frozenset({"seconds", *TIME_COLUMNS, *LIBRARIES, *ENCODER_VOLATILE, *RANK_VOLATILE})

# Tables that describe one execution rather than its outputs, as the volatile columns do: which tasks were
# run again after their worker or node died. Left out of the manifests' ledger digests and of the
# determinism checks (a run that lost a node gives the same outputs and manifests as one that did not).
EXECUTION_TABLES: tuple[str, ...] = ("task_retries",)

CORE: dict[str, pa.Schema] = {
    # one row per run; the execution columns (UTC ISO times, host, library versions) are volatile
    "runs": pa.schema([("run", pa.string()), ("recipe", pa.string()), ("vocabulary", pa.string()),
                       ("vocabulary_sha256", pa.string()), ("curate_version", pa.string()),
                       ("stages", pa.string()), *[(c, pa.string()) for c in (*TIME_COLUMNS, *LIBRARIES)]]),
    "sources": pa.schema([("run", pa.string()), ("source", pa.string()), ("source_fingerprint", pa.string()),
                          ("modality", pa.string()), ("category", pa.string()), ("revision", pa.string()),
                          ("licence", pa.string()), ("licence_class", pa.string()), ("weight", pa.float64()),
                          ("included", pa.bool_()), ("excluded_reason", pa.string()),
                          ("input_files", pa.int64()), ("input_bytes", pa.int64()),
                          ("licence_decision", pa.string()), ("optout_mode", pa.string()), ("pii", pa.string()),
                          ("acquired", pa.string()), ("fetched_sha256", pa.string())]),
    "acquisition": pa.schema([("run", pa.string()), ("source", pa.string()), ("kind", pa.string()),
                              ("origin", pa.string()), ("outcome", pa.string()), ("reason", pa.string()),
                              ("items", pa.int64())]),
    "inputs": pa.schema([("run", pa.string()), ("source", pa.string()), ("shard", pa.string()),
                         ("path", pa.string()), ("bytes", pa.int64()), ("sha256", pa.string())]),
    "steps": pa.schema([("run", pa.string()), ("source", pa.string()), ("position", pa.int32()),
                        ("step", pa.string()), ("records_in", pa.int64()), ("records_out", pa.int64()),
                        ("dropped", pa.int64()), ("quarantined", pa.int64()), ("seconds", pa.float64())]),
    "drops": pa.schema([("run", pa.string()), ("source", pa.string()), ("step", pa.string()),
                        ("reason", pa.string()), ("records", pa.int64())]),
    "quarantine": pa.schema([("run", pa.string()), ("source", pa.string()), ("step", pa.string()),
                             ("reason", pa.string()), ("records", pa.int64())]),
    "tokens": pa.schema([("run", pa.string()), ("source", pa.string()), ("pool", pa.string()), ("documents", pa.int64()),
                         ("text_tokens", pa.int64()), ("image_tokens", pa.int64()),
                         ("audio_tokens", pa.int64()), ("total_tokens", pa.int64())]),
    "feeds": FEEDS_SCHEMA,
    "encoders": ENCODERS,    # per part: codec, device and precision (curation.ledger.encoders)
    "rank_plan": RANK_PLAN,  # image batches per rank, predicted imbalance (curation.ledger.ranks)   # threat feeds the network guard compiled: format, entries by kind, skipped lines
    "stages": pa.schema([("run", pa.string()), ("stage", pa.string()), ("seq_length", pa.int64()),
                         ("budget_tokens", pa.int64()), ("training", pa.string())]),
    "mixture": pa.schema([("run", pa.string()), ("stage", pa.string()), ("source", pa.string()),
                          ("category", pa.string()), ("raw_tokens", pa.int64()), ("documents", pa.int64()),
                          ("epochs", pa.float64()), ("effective_tokens", pa.int64()), ("share", pa.float64()),
                          ("target_share", pa.float64()), ("max_epochs", pa.float64()),
                          ("exhausted_at_tokens", pa.int64()), ("excluded", pa.string())]),
    # per stage and planned source: planned tokens and the input tokens Megatron-LM draws from the stage's
    # hand-off with its `--train-samples` (`curation.mixture.megatron`, mode `packed` or `blend`)
    "handoff": pa.schema([("run", pa.string()), ("stage", pa.string()), ("source", pa.string()),
                          ("mode", pa.string()), ("planned_tokens", pa.int64()), ("drawn_tokens", pa.int64()),
                          ("train_samples", pa.int64()), ("drawable", pa.bool_()), ("note", pa.string())]),
    "mixture_flags": pa.schema([("run", pa.string()), ("stage", pa.string()), ("source", pa.string()),
                                ("kind", pa.string()), ("message", pa.string())]),
    "buckets": pa.schema([("run", pa.string()), ("stage", pa.string()), ("bucket", pa.int32()),
                          ("lower", pa.int64()), ("upper", pa.int64()), ("target_tokens", pa.int64()),
                          ("filled_tokens", pa.int64()), ("topup_tokens", pa.int64()),
                          ("realised_tokens", pa.int64()), ("documents", pa.int64()), ("sources", pa.string())]),
    # per long-context extension step and class (and its cooldown subsample, class "cooldown"): the tokens
    # the recipe asks for, those drawn from native long documents and those topped up from short ones
    # (`curation.mixture.extension`; Apertus 1.5 Table 5, Appendix F)
    "lc_classes": pa.schema([("run", pa.string()), ("stage", pa.string()), ("start_from", pa.string()),
                             ("seq_length", pa.int64()), ("class", pa.string()), ("share", pa.float64()),
                             ("planned_tokens", pa.int64()), ("native_tokens", pa.int64()),
                             ("topup_tokens", pa.int64()), ("realised_tokens", pa.int64()),
                             ("documents", pa.int64()), ("native_lower", pa.int64()), ("native_upper", pa.int64()),
                             ("topup_min", pa.int64()), ("topup_max", pa.int64()), ("sources", pa.string())]),
    # one row per task resubmitted after a system failure (curation.runtime.ray_executor): the node key,
    # the attempt that failed (1: the first run) and Ray's error class and first message line
    "task_retries": pa.schema([("run", pa.string()), ("node", pa.string()), ("attempt", pa.int32()),
                               ("error", pa.string()), ("message", pa.string())]),
    # written back by `curate train` (curation.train.writeback): what a training run actually consumed
    "consumed": pa.schema([("run", pa.string()), ("stage", pa.string()), ("source", pa.string()),
                           ("training", pa.string()), ("steps", pa.int64()),
                           ("text_tokens", pa.int64()), ("image_tokens", pa.int64()),
                           ("audio_tokens", pa.int64()), ("other_tokens", pa.int64()), ("total_tokens", pa.int64()),
                           ("repeat_tokens", pa.int64()), ("documents", pa.int64()),
                           ("planned_tokens", pa.int64())]),
    # for the EU AI Act public summary: declarations, source origins, robots.txt dates, tokens per web domain
    **TRANSPARENCY,
}


def _contributed() -> dict[str, pa.Schema]:
    out = {name: schema for step in LEDGER_STEPS for name, schema in step.ledger_tables.items()}
    out[coverage.TABLE] = coverage.SCHEMA   # rows from the classifiers' cards and counts (`build_rows`)
    out.update(ledger_schemas())
    out.update({m.ledger_table.name: m.ledger_table.schema for m in MODALITIES.values() if m.ledger_table})
    return out


SCHEMAS: dict[str, pa.Schema] = {**CORE, **_contributed()}
