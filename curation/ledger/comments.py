"""What every ledger table, view and column means: the text of `ledger.duckdb`'s `COMMENT ON`s, and the
README's schema page, generated from the comments of a database (`curation.ledger.schema_doc`), so the page
an auditor reads in the README and the comments `duckdb_columns()` shows in a mailed `ledger.duckdb` are one
text.

`COLUMNS` describes a column name once where it means the same in every table (`run`, `source`, `stage`,
...); `TABLE_COLUMNS` overrides it, or describes a column only one table has. `tests/ledger/test_comments.py`
requires a comment for every table and column of `curation.ledger.schema.SCHEMAS` and `DECISIONS`, and that
the README's section equals what `schema_doc.schema_markdown` writes (`python -m curation.ledger.schema_doc
--readme README.md` rewrites it).
"""
from __future__ import annotations

# the per-record evidence, stored in `ledger.duckdb` as the table `decisions` (curation.ledger.store)
DECISIONS_COLUMNS = ("source", "shard", "id", "step", "outcome", "reason", "detail")

TABLES: dict[str, str] = {
    "runs": "one row per run: the recipe, its vocabulary, when and where it ran, the library versions it found",
    "sources": "one row per source of the recipe: identity, licence decision, inputs, whether it is included",
    "acquisition": "one row per source x outcome x reason of acquiring a source's inputs (URLs, files, "
                   "samples or archive members)",
    "inputs": "one row per input file read",
    "steps": "one row per source x step: records in and out; for each, in = out + dropped + quarantined",
    "drops": "one row per source x step x reason: records a step dropped",
    "quarantine": "one row per source x step x reason: unusable records a step quarantined",
    "tokens": "one row per source x pool: documents and tokens counted from each merged shard set; the total "
              "is every token in tokenized/",
    "feeds": "one row per threat feed the network guard compiled",
    "stages": "one row per training stage: its sequence length and token budget",
    "mixture": "one row per stage x source: the planner's draw of the source into the stage",
    "mixture_flags": "one row per planner finding about a stage and source",
    "buckets": "one row per long-context stage x length bucket",
    "lc_classes": "one row per long-context extension step x class (and its cooldown subsample): planned, native "
                  "and topped-up tokens",
    "handoff": "one row per stage x planned source: planned tokens and the tokens Megatron-LM draws from the hand-off",
    "consumed": "one row per training run x stage x source: what `curate train` fed (written back after the run)",
    "pii": "one row per source x kind of personal data replaced",
    "optout": "one row per source: the retroactive robots.txt opt-out",
    "toxicity": "one row per source x language: the toxicity step's scores",
    "classifier_languages": "one row per source x classifier step x language: what the model was trained and "
                            "evaluated on (its card) and the documents it scored or did not cover",
    "captions": "one row per image source: caption checks and regenerations",
    "image_clusters": "one row per group of near-identical images",
    "audio_clusters": "one row per group of duplicate audio clips",
    "clusters": "one row per near-duplicate text cluster",
    "encoders": "one row per part (source x shard) x codec: the device and precision that made its codes "
                "(describes the execution; not in the manifests' digests)",
    "rank_plan": "one row per image source (and (all)): the image batch plan dealt to ranks and its predicted "
                 "imbalance (not in the manifests' digests)",
    "task_retries": "one row per task run lost with its Ray worker or node and run again (describes the "
                    "execution; not in the manifests' digests)",
    "near_duplicates": "one row per document removed as a near duplicate",
    "decontamination": "one row per source x benchmark (and `(all)`): documents removed for overlapping a "
                       "benchmark",
    "benchmarks": "one row per benchmark the decontamination indexed",
    "quality_thresholds": "one row per selection pool x language: the threshold the quality selection chose",
    "quality_selected": "one row per selection pool x source x language: documents reaching `select` and kept",
    "quality_histogram": "one row per selection pool x language x score bin (50 over [0, 1])",
    "images": "one row per image source",
    "audio": "one row per audio source",
    "interleaved": "one row per interleaved (text and image) source",
    "transparency": "one row per field of the recipe's `transparency:` section (provider, model, crawler, "
                    "collection period) for the EU AI Act public summary; value NULL where not declared",
    "source_origins": "one row per source: its category in the EU AI Act public summary's list of data sources",
    "robots_snapshots": "one row per robots.txt snapshot date the opt-out read",
    "domain_tokens": "one row per source x web domain of the page URL: documents and tokens in the source's "
                     "main shards (web_domain NULL: no usable page URL)",
    "decisions": "one row per dropped or quarantined record (and per record a step passed unjudged, "
                 "outcome passed): what removed it and why, with its evidence "
                 "(stored in this file, so a copied ledger.duckdb answers per-document questions)",
}

VIEWS: dict[str, str] = {
    "funnel": "per source: records read, documents kept, kept %, tokens in the main pool",
    "drop_reasons": "drops and quarantines by source, step and reason in one list",
    "category_shares": "per stage and category: effective tokens and share against the target share",
}

COLUMNS: dict[str, str] = {
    "run": "recipe fingerprint of the run that wrote the row (runs.run)",
    "source": "source name in the recipe",
    "stage": "training stage name in the recipe",
    "category": "the source's mixture category",
    "shard": "input shard label (the input file's path under the source)",
    "step": "the pipeline step (or corpus-wide phase) that decided",
    "reason": "why: a short machine-readable reason (e.g. `language_es`, `near_duplicate`)",
    "records": "records",
    "kind": "kind",
    "documents": "documents",
    "text_tokens": "text tokens",
    "image_tokens": "image tokens",
    "audio_tokens": "audio tokens",
    "total_tokens": "all tokens",
    "paired_text_tokens": "text tokens paired with the images or clips (captions, transcripts)",
    "sha256": "sha256 of the file's bytes",
    "bytes": "size in bytes",
    "items": "items",
    "pool": "shard set: `main`, an audio source's `long_context`, a reasoning source's `no_reasoning` copy",
    "lower": "lower bound (exclusive)",
    "upper": "upper bound (inclusive)",
    "sources": "sources of the members, sorted",
    "removed": "removed",
    "language": "language code",
    "flagged": "flagged",
    "cluster": "the cluster's kept member (source/id)",
    "domain": "content domain of the source",
    "kept_source": "source of the kept member",
    "kept_id": "record id of the kept member",
    "size": "members in the cluster, the kept one included",
    "members": "every member as source/id",
    "benchmark": "benchmark name",
    "kept": "kept",
    "area": "image area in pixels the images were resized to",
    "batches": "encoder batches run",
}

_VERSIONS = ("datatrove", "tokenizers", "torch", "fasttext", "lhotse", "pillow", "imagehash", "pyarrow", "duckdb")

TABLE_COLUMNS: dict[str, dict[str, str]] = {
    "runs": {
        "run": "recipe fingerprint: the identity of a run's outputs",
        "recipe": "recipe name", "vocabulary": "vocabulary id", "vocabulary_sha256": "sha256 of the vocabulary",
        "curate_version": "curate version that wrote the ledger", "stages": "the recipe's stages, in order",
        "started_at": "UTC ISO 8601 start of the run (volatile)", "finished_at": "UTC ISO 8601 end (volatile)",
        "host": "host that ran the driver (volatile)",
        **{f"{lib}_version": f"{lib} distribution version found, null when not installed (volatile)"
           for lib in _VERSIONS},
    },
    "sources": {
        "source_fingerprint": "fingerprint of the source's settings and inputs", "modality": "text, image, audio "
        "or interleaved", "revision": "the inputs' revision (acquired sources)", "licence": "SPDX licence expression",
        "licence_class": "licence class the policy assigned", "weight": "mixture weight in the recipe",
        "included": "whether the source reaches the mixture", "excluded_reason": "why not, when excluded",
        "input_files": "input files read", "input_bytes": "bytes of the input files",
        "licence_decision": "the licence policy's decision", "optout_mode": "robots.txt opt-out mode",
        "pii": "kinds of personal data replaced, or none", "acquired": "acquisition kind, null when local",
        "fetched_sha256": "sha256 of what was fetched",
    },
    "acquisition": {"kind": "acquisition kind (http, fsspec, archive, ...)", "origin": "where it was acquired from",
                    "outcome": "ok, refused or failed", "items": "URLs, files, samples or archive members"},
    "inputs": {"path": "input file path"},
    "steps": {"position": "the step's position in the source's chain (0: the reader)",
              "records_in": "records entering the step", "records_out": "records leaving it",
              "dropped": "records it dropped", "quarantined": "records it quarantined",
              "seconds": "time spent in the step (volatile)"},
    "drops": {"records": "records dropped"},
    "quarantine": {"records": "records quarantined"},
    "tokens": {"documents": "documents in the shard set"},
    "encoders": {"codec": "codec kind (image, audio)", "codec_sha256": "sha256 of the codec's configuration and weights",
                 "requested": "the recipe's device: cpu, cuda or auto", "device": "where it ran: cpu or cuda",
                 "precision": "float32, tf32 or bfloat16", "device_name": "the GPU's name, or cpu (volatile)",
                 "gpus": "the task's CUDA_VISIBLE_DEVICES (volatile)"},
    "rank_plan": {"images": "images planned", "tokens": "image tokens planned",
                  "imbalance_8": "predicted imbalance at 8 ranks (tokens per rank max/mean - 1)",
                  "imbalance_64": "predicted imbalance at 64 ranks", "imbalance_800": "predicted imbalance at 800 ranks",
                  "run_ranks": "the run's own rank count (volatile)",
                  "run_imbalance": "predicted imbalance at the run's own rank count (volatile)"},
    "task_retries": {"node": "the task's node key", "attempt": "which attempt was lost (1: the first)",
                     "error": "the Ray error class (NodeDiedError, WorkerCrashedError, ...)",
                     "message": "the first line of Ray's message"},
    "feeds": {"feed": "feed name", "declared_format": "format the recipe declared", "format": "format detected",
              "compression": "compression of the file", "bytes": "bytes of the feed file",
              "rule_lines": "lines that became rules", "networks": "IP networks", "hosts": "host names",
              "url_prefixes": "URL prefixes", "skipped_lines": "lines skipped",
              "skipped": "skipped lines by reason", "sha256": "sha256 of the feed file"},
    "stages": {"seq_length": "sequence length in tokens", "budget_tokens": "the stage's token budget",
               "training": "the stage's training settings as canonical JSON (stage_index, targets, goldfish, "
                           "thinking): what its manifest's `training` must be"},
    "mixture": {"raw_tokens": "tokens of the source's shard set", "documents": "documents of the shard set",
                "epochs": "epochs drawn (effective / raw)", "effective_tokens": "tokens drawn into the stage",
                "share": "share of the stage's effective tokens", "target_share": "the category's target share",
                "max_epochs": "the repetition cap", "exhausted_at_tokens": "stage tokens at which the source reached "
                "its cap, null if never", "excluded": "why the source is not drawn, null when it is"},
    "mixture_flags": {"kind": "over_repetition, target_unreachable, budget_exceeded, budget_unfilled, no_tokens, "
                      "bucket_short or not_drawable (a blend source Megatron-LM cannot draw)",
                      "message": "the finding in words"},
    "handoff": {"mode": "the stage's Megatron hand-off: packed (the plan as sequences) or blend (Megatron samples)",
                "planned_tokens": "tokens of the source's sampling plan",
                "drawn_tokens": "input tokens Megatron-LM draws from the hand-off with --train-samples",
                "train_samples": "the stage's --train-samples", "drawable": "whether Megatron-LM draws the source",
                "note": "why it is not drawn, when it is not"},
    "buckets": {"bucket": "bucket index", "lower": "lower document length (exclusive)",
                "upper": "upper document length (inclusive)", "target_tokens": "tokens the bucket should hold",
                "filled_tokens": "tokens filled from documents of its length",
                "topup_tokens": "tokens topped up from other buckets", "realised_tokens": "tokens it holds",
                "documents": "documents in the bucket", "sources": "sources drawn, comma-separated"},
    "lc_classes": {"start_from": "the stage whose checkpoint the step continues",
                   "seq_length": "the step's sequence length",
                   "class": "the class of long documents, or cooldown for the cooldown subsample",
                   "share": "asked share: of the tokens beyond the cooldown subsample (cooldown: of the budget)",
                   "planned_tokens": "tokens the recipe asks the class for",
                   "native_tokens": "tokens drawn from documents of the native range (cooldown: all)",
                   "topup_tokens": "tokens drawn from short-context documents of the top-up range",
                   "realised_tokens": "native + topped-up tokens", "documents": "documents drawn",
                   "native_lower": "native range: documents longer than this (cooldown: 0)",
                   "native_upper": "native range: documents at most this long (cooldown: its seq_length)",
                   "topup_min": "top-up range, shortest document (null: no top-up)",
                   "topup_max": "top-up range, longest document (null: no top-up)",
                   "sources": "tokens drawn per source, comma-separated"},
    "consumed": {"training": "training run id", "steps": "optimizer steps",
                 "text_tokens": "text tokens fed", "image_tokens": "image tokens fed", "audio_tokens": "audio "
                 "tokens fed", "other_tokens": "special tokens fed", "total_tokens": "all tokens fed",
                 "repeat_tokens": "tokens fed more than once", "documents": "documents fed",
                 "planned_tokens": "tokens the manifest planned"},
    "pii": {"kind": "kind of personal data (email, phone, ip, ...)", "replaced": "occurrences replaced"},
    "optout": {"mode": "opt-out mode", "records": "records checked", "with_url": "records with a URL",
               "removed": "records removed by the exclusion rule",
               "allowlist_would_remove": "records a strict allow-list would remove"},
    "toxicity": {"scored": "documents scored", "toxic": "documents dropped as toxic",
                 "toxic_share": "toxic / scored"},
    "classifier_languages": {
        "step": "the classifier step (toxicity, quality)", "model": "the model's name (its card)",
        "covered": "the card covers the language (training documents of each label >= its min_documents)",
        "train_positives": "training documents of the scored label (training split, before weights)",
        "train_negatives": "training documents of the other label", "held_out_documents": "held-out documents",
        "held_out_positives": "held-out documents of the scored label",
        "held_out_precision": "held-out precision at 0.5 (null: undefined)",
        "held_out_recall": "held-out recall at 0.5", "held_out_auc": "held-out ROC AUC (null: one label only)",
        "scored": "documents of this source the step scored",
        "not_covered": "documents not scored: language not covered (reason classifier_language_not_covered)",
        "not_covered_outcome": "what happened to them: quarantined (uncovered_languages: refuse) or passed"},
    "captions": {"checked": "captions checked", "flagged": "captions quarantined by a check",
                 "regenerated": "captions regenerated", "regenerated_kept": "regenerated captions kept",
                 "regenerated_flagged": "regenerated captions flagged"},
    "image_clusters": {"cluster": "the cluster's kept image (source/id; id#k: image k of an interleaved "
                       "document)", "domain": "content domain the images were grouped within"},
    "audio_clusters": {"kind": "exact or near", "max_ber": "largest bit error rate between members"},
    "near_duplicates": {"id": "record id of the removed document", "cluster": "the cluster it was removed from"},
    "decontamination": {"original": "documents before", "flagged": "documents overlapping the benchmark",
                        "readmitted": "flagged documents readmitted", "removed": "documents removed",
                        "final": "documents after", "pct_removed": "removed / original, in %"},
    "benchmarks": {"sha256": "sha256 of the benchmark file", "fields": "fields indexed",
                   "items": "benchmark items", "unindexable": "items shorter than the n-gram"},
    "quality_thresholds": {"pool": "selection pool", "field": "score field",
                           "documents": "documents reaching `select`", "kept": "documents kept",
                           "threshold": "score threshold chosen", "above": "documents above the threshold",
                           "tied": "documents at the threshold", "tied_kept": "tied documents kept",
                           "top_fraction": "fraction to keep", "tie_rule": "how ties are broken"},
    "quality_selected": {"pool": "selection pool", "documents": "documents reaching `select`",
                         "kept": "documents kept"},
    "quality_histogram": {"pool": "selection pool", "bin": "score bin index", "lower": "bin's lower score",
                          "upper": "bin's upper score", "documents": "documents in the bin",
                          "kept": "documents in the bin kept"},
    "images": {"samples": "image samples tokenized", "caption": "caption field"},
    "audio": {"clips": "clips tokenized", "hours": "hours of audio", "audio_codes": "codec codes",
              "interleaved": "interleaved samples", "transcription": "transcription samples",
              "translation": "translation samples", "translation_text_tokens": "text tokens of translations",
              "audio_only": "audio-only samples", "stage2_pool": "samples in the stage-2 pool",
              "long_context_pool": "samples in the long-context pool",
              "padding_pct": "padding in the encoder's batches, in %"},
    "interleaved": {"documents": "documents tokenized", "images": "images tokenized",
                    "images_listed": "images the inputs listed", "images_dropped": "images removed",
                    "images_dropped_by_reason": "images removed by reason (map)",
                    "text_tokens": "text tokens from the shards (an image's H*W counts as text)",
                    "image_codes": "image codec codes", "text_runs": "text runs between images"},
    "transparency": {"field": "provider, provider_contact, model, model_version, crawler, collection_start or "
                               "collection_end", "value": "the recipe's value, NULL where it declares none"},
    "source_origins": {"origin": "publicly_available, crawled, licensed or synthetic",
                       "basis": "declared in the recipe, or what it was derived from"},
    "robots_snapshots": {"snapshot": "snapshot date (YYYY-MM-DD)",
                         "domains": "domains with a robots.txt in that snapshot"},
    "domain_tokens": {"web_domain": "registrable domain of the page URL (the host where it has none)",
                      "documents": "documents in the main shards", "tokens": "tokens in the main shards"},
    "decisions": {"id": "record id", "outcome": "dropped, quarantined, or passed (kept, "
                  "the step's work not done on it, e.g. classifier_language_not_covered)",
                  "detail": "the evidence: the kept copy of a duplicate, its cluster, the matched benchmark item, "
                            "the robots.txt, the licence (at most 500 characters)"},
}


def column_comment(table: str, column: str) -> str | None:
    return TABLE_COLUMNS.get(table, {}).get(column, COLUMNS.get(column))


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def comment_sql(con, schema: str | None = None) -> None:
    """`COMMENT ON` every table, view and column of `con` that we describe (`schema`: the attached database).
    One multi-statement `execute`: ~300 separate ones cost 0.3 s per run, most of a small run's ledger write."""
    q = f"{schema}." if schema else ""
    where = f" AND database_name = {_literal(schema)}" if schema else ""
    tables = {r[0] for r in con.execute(f"SELECT table_name FROM duckdb_tables() WHERE NOT internal{where}").fetchall()}
    views = {r[0] for r in con.execute(f"SELECT view_name FROM duckdb_views() WHERE NOT internal{where}").fetchall()}
    columns: dict[str, list[str]] = {}
    for table, col in con.execute(f"SELECT table_name, column_name FROM duckdb_columns() WHERE true{where} "
                                  "ORDER BY table_name, column_index").fetchall():
        columns.setdefault(table, []).append(col)
    statements = []
    for name in sorted(tables):
        if name in TABLES:
            statements.append(f"COMMENT ON TABLE {q}{name} IS {_literal(TABLES[name])}")
        for col in columns.get(name, []):
            text = column_comment(name, col)
            if text is not None:
                statements.append(f'COMMENT ON COLUMN {q}{name}."{col}" IS {_literal(text)}')
    for name in sorted(views & set(VIEWS)):
        statements.append(f"COMMENT ON VIEW {q}{name} IS {_literal(VIEWS[name])}")
    if statements:
        con.execute("BEGIN;\n" + ";\n".join(statements) + ";\nCOMMIT")


def described(con) -> tuple[list[tuple[str, str]], dict[str, list[tuple[str, str, str]]], list[tuple[str, str]]]:
    """The comments `con` holds: (table, comment) in name order, per table its (column, type, comment) in
    column order, and (view, comment)."""
    tables = con.execute("SELECT table_name, coalesce(comment, '') FROM duckdb_tables() WHERE NOT internal "
                         "ORDER BY table_name").fetchall()
    columns = {t: con.execute("SELECT column_name, data_type, coalesce(comment, '') FROM duckdb_columns() "
                              f"WHERE table_name = {_literal(t)} ORDER BY column_index").fetchall() for t, _ in tables}
    views = con.execute("SELECT view_name, coalesce(comment, '') FROM duckdb_views() WHERE NOT internal "
                        "ORDER BY view_name").fetchall()
    return tables, columns, views
