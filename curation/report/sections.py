"""The report's tables, each a `Section` in a group of the table of contents, built from ledger rows."""
from __future__ import annotations

from itertools import islice

from curation.ledger.pools import main_pool
from curation.report.cluster_stats import cluster_stats
from curation.report.removals import group_removals, pipeline_order
from curation.report.table import Cell, Section, table
from curation.steps.registry import MODALITIES

MIXTURE, DECONT, DEDUP, MEDIA, TRAINING, RECORDS = ("Mixture", "Decontamination", "Deduplication",
                                                     "Images and audio", "Training", "Records and tokens")
SOURCE_COLUMNS = 8    # up to this many sources, the removal table has a column per source


def mixture_sections(rows: dict) -> list[Section]:
    """Per stage: the per-source table in Soofi S Appendix B form, length buckets, category shares and flags."""
    out = []
    # the modality column a source counts in: interleaved image-text documents are vision data (Table 3)
    modality = {src["source"]: MODALITIES[src["modality"]].budget_family for src in rows["sources"]}
    modal = []
    for st in rows.get("stages", []):
        eff = {"text": 0, "image": 0, "audio": 0}
        for m in rows["mixture"]:
            if m["stage"] == st["stage"]:
                eff[modality[m["source"]]] += m["effective_tokens"]
        total = sum(eff.values()) or 1
        hand = [h for h in rows.get("handoff", []) if h["stage"] == st["stage"]]
        modal.append([st["stage"], *[f"{eff[k]:,} ({100 * eff[k] / total:.1f}%)" for k in eff], sum(eff.values()),
                      sum(h["planned_tokens"] for h in hand), sum(h["drawn_tokens"] for h in hand),
                      hand[0]["mode"] if hand else ""])
    if modal:
        out.append(Section(MIXTURE, "Token budget per modality and stage",
                           "Effective tokens (repetition included) by the sources' modality, with the within-stage "
                           "share, as in Apertus 1.5 Table 3: paired captions and transcripts count with their "
                           "modality. Planned: the tokens of the stage's sampling plans (whole documents); drawn: "
                           "the input tokens Megatron-LM draws from the stage's hand-off with its --train-samples "
                           "(packed: every planned token once; blend: Megatron's sampling, under one sequence "
                           "short per source).",
                           table(["stage", "text", "image", "audio", "total", "planned", "drawn", "hand-off"], modal)))
    for st in rows.get("stages", []):
        out += _stage_sections(rows, st)
    return out


def _stage_sections(rows: dict, st: dict) -> list[Section]:
    name = st["stage"]
    mix = [m for m in rows["mixture"] if m["stage"] == name]
    hand = {h["source"]: h for h in rows.get("handoff", []) if h["stage"] == name}
    body = []
    for m in mix:
        h = hand.get(m["source"])
        note = m["excluded"] or (f"runs out at token {m['exhausted_at_tokens']:,}"
                                 if m["exhausted_at_tokens"] is not None else "")
        if h is not None and not h["drawable"]:
            note = f"not drawn by Megatron: {h['note']}"
        body.append([m["source"], m["category"], m["raw_tokens"], f"{m['epochs']:.2f}", m["effective_tokens"],
                     f"{100 * m['share']:.2f}%", h["planned_tokens"] if h else 0, h["drawn_tokens"] if h else 0, note])
    body.append([Cell("total", "total"), "", sum(m["raw_tokens"] for m in mix), "",
                 sum(m["effective_tokens"] for m in mix),
                 "100.00%" if any(m["effective_tokens"] for m in mix) else "0.00%",
                 sum(h["planned_tokens"] for h in hand.values()), sum(h["drawn_tokens"] for h in hand.values()), ""])
    mode = next(iter(hand.values()))["mode"] if hand else "none"
    out = [Section(MIXTURE, f"Stage {name}: mixture",
                   f"Budget {st['budget_tokens']:,} tokens at sequence length {st['seq_length']:,}. Raw = tokens in "
                   "the shards; Ep. = epochs; Eff. = Raw × Ep.; Share = of the stage's effective tokens; Planned = "
                   "the sampling plan's tokens (whole documents); Drawn = what Megatron-LM draws from the stage's "
                   f"{mode} hand-off (ledger table `handoff`). Zero-epoch rows are kept.",
                   table(["source", "category", "raw", "ep.", "eff.", "share", "planned", "drawn", "note"], body))]
    buckets = [b for b in rows.get("buckets", []) if b["stage"] == name]
    if buckets:
        bbody = [[f"({b['lower']:,}, {b['upper']:,}]", b["target_tokens"], b["filled_tokens"], b["topup_tokens"],
                  b["realised_tokens"], f"{100 * b['realised_tokens'] / max(b['target_tokens'], 1):.1f}%",
                  b["documents"], b["sources"] or "empty"] for b in buckets]
        out.append(Section(MIXTURE, f"Stage {name}: length buckets",
                           "Documents by token length; each bucket filled in source priority order, a shortfall "
                           "topped up with shorter documents; sequences packed best-fit decreasing.",
                           table(["bucket", "target", "filled", "top-up", "realised", "of target", "documents",
                                  "sources"], bbody)))
    cats: dict[str, list] = {}
    for m in mix:
        c = cats.setdefault(m["category"], [m["category"], 0, 0.0, m["target_share"]])
        c[1] += m["effective_tokens"]
        c[2] += m["share"]
    cbody = [[c[0], c[1], f"{100 * c[2]:.2f}%", "" if c[3] is None else f"{100 * c[3]:.2f}%"] for c in cats.values()]
    notes = [f"{f['kind']}: {f['message']}" for f in rows.get("mixture_flags", []) if f["stage"] == name]
    out.append(Section(MIXTURE, f"Stage {name}: categories", "Flags: " + ("; ".join(notes) if notes else "none") + ".",
                       table(["category", "effective tokens", "share", "target"], cbody)))
    return out


def decont_sections(rows: dict) -> list[Section]:
    """Apertus 1.5 Table H.2: per source and benchmark, original, removed, final, % removed."""
    if not rows.get("benchmarks"):
        return []
    bench = [[b["benchmark"], b["items"], b["unindexable"], b["fields"], Cell(f"`{b['sha256'][:16]}`", title=b["sha256"])]
             for b in rows["benchmarks"]]
    body = [[d["source"], d["benchmark"], d["original"], d["flagged"], d["readmitted"], d["removed"], d["final"],
             f"{d['pct_removed']:.2f}%"] for d in rows.get("decontamination", [])]
    return [
        Section(DECONT, "Benchmarks", "Evaluation sets decontaminated against (local files, fingerprinted). "
                "Unindexable: items shorter than the n-gram size, which cannot be matched.",
                table(["benchmark", "items", "unindexable", "fields", "sha256"], bench)),
        Section(DECONT, "Decontamination", "Per source and benchmark, as Apertus 1.5 Table H.2. Original: documents "
                "reaching the step; flagged/re-admitted: the review (`review/decontamination.html`, flagged samples "
                "next to the matched item); removed: by sample id only.",
                table(["source", "benchmark", "original", "flagged", "re-admitted", "removed", "final", "% removed"],
                      body or [["—", "no sample flagged", "", "", "", "", "", ""]])),
    ]


def dedup_sections(rows: dict) -> list[Section]:
    """Near-duplicate clusters (size distribution, which sources share clusters) and image/audio groups. The
    cluster tables may be `PartRows` (rows left in their part files): the MinHash clusters are counted by DuckDB
    (`cluster_stats`), the image and audio groups' first 50 read."""
    out = []
    clusters = rows.get("clusters", [])
    if clusters:
        n, sizes, named, shared = cluster_stats(clusters)   # by DuckDB: no cluster row in this process
        names = [s["source"] for s in rows["sources"]]
        names += sorted(set(named) - set(names))  # earlier runs' index
        overlap = {(a, b): shared.get((a, b), 0) for a in names for b in names}
        out += [
            Section(DEDUP, "Near-duplicate clusters", f"{n} clusters of MinHash near-duplicates; each keeps "
                    "one document, which names the cluster (`dedup.minhash.keep`: `earliest` in recipe source order, "
                    "then shard, then position; `highest_quality`: the highest score, ties the earliest). Members: "
                    "ledger table `clusters`.", table(["cluster size", "clusters", "documents removed"],
                                         [[k, v, v * (k - 1)] for k, v in sorted(sizes.items())])),
            _overlap_section(names, overlap),
        ]
    images = rows.get("image_clusters", [])
    if images:
        out.append(Section(DEDUP, "Image near-duplicates", f"{len(images)} groups of images within their domain's pHash "
                           "radius (`image_dedup`); each keeps its earliest member. All groups: ledger table "
                           f"`image_clusters`{'; the first 50 shown' if len(images) > 50 else ''}.",
                           table(["domain", "kept", "size", "members"],
                                 [[c["domain"], c["cluster"], c["size"], ", ".join(c["members"])] for c in islice(images, 50)])))
    audio = rows.get("audio_clusters", [])
    if audio:
        out.append(Section(DEDUP, "Audio duplicates", f"{len(audio)} groups of clips with equal 16-bit PCM at 24 kHz "
                           "(exact) or matching spectral fingerprints (near: re-encoded, resampled, trimmed); each keeps "
                           "its earliest member. Ledger table `audio_clusters`"
                           f"{'; the first 50 shown' if len(audio) > 50 else ''}.",
                           table(["kind", "kept", "size", "members", "max bit error rate"],
                                 [[x["kind"], x["cluster"], x["size"], ", ".join(x["members"]), f"{x['max_ber']:.3f}"]
                                  for x in islice(audio, 50)])))
    return out


def media_sections(rows: dict) -> list[Section]:
    out = []
    if rows.get("images"):
        out.append(Section(MEDIA, "Images", "Image samples per source and domain after checks and dedup; image codes "
                           "and paired caption tokens in the shards (end-of-document included); encoder batches. "
                           "Ledger table `images`.",
                           table(["source", "category", "domain", "samples", "image tokens", "paired text tokens",
                                  "caption", "area (pixels)", "batches"],
                                 [[i["source"], i["category"], i["domain"], i["samples"], i["image_tokens"],
                                   i["paired_text_tokens"], i["caption"], i["area"], i["batches"]] for i in rows["images"]])))
    if any(c["checked"] or c["regenerated"] for c in rows.get("captions", [])):
        out.append(Section(MEDIA, "Captions", "Captions checked per source (`token_loop`, `repetitive_caption`, "
                           "`prompt_fragment`, ...), quarantined by a check (exported to "
                           "`review/captions_to_regenerate.parquet`), and replaced by regenerated captions from "
                           "`images.recaptions`, then kept or flagged again. Ledger table `captions`.",
                           table(["source", "checked", "flagged", "regenerated", "regenerated, kept",
                                  "regenerated, flagged"],
                                 [[c["source"], c["checked"], c["flagged"], c["regenerated"], c["regenerated_kept"],
                                   c["regenerated_flagged"]] for c in rows["captions"]])))
    if rows.get("audio"):
        out.append(Section(MEDIA, "Audio", "Clips and hours after checks and dedup; codes (40 per second) and the text "
                           "tokens of transcripts and translations in the shards; sequences by kind (interleaved "
                           "speech-text, transcription pairs, translation pairs, audio only) and pool (stage 2 up to "
                           "`audio.stage2_max_tokens`, 8,192 by default; long context above); padding of the "
                           "bucketed encoder batches. Ledger table `audio`.",
                           table(["source", "category", "clips", "hours", "audio tokens", "paired text tokens",
                                  "interleaved", "transcription", "translation", "audio only", "stage-2 pool",
                                  "long-context pool", "batches", "padding %"],
                                 [[a["source"], a["category"], a["clips"], f"{a['hours']:.4f}", a["audio_tokens"],
                                   a["paired_text_tokens"], a["interleaved"], a["transcription"], a.get("translation", 0),
                                   a["audio_only"], a["stage2_pool"], a["long_context_pool"], a["batches"],
                                   a["padding_pct"]]
                                  for a in rows["audio"]])))
    if rows.get("interleaved"):
        out.append(Section(MEDIA, "Interleaved documents", "Image-text documents after checks and dedup: images "
                           "tokenized, listed and removed from kept documents by reason (listed = tokenized + removed); "
                           "image and text tokens in the shards. Ledger table `interleaved`.",
                           table(["source", "documents", "images", "listed", "removed", "by reason", "image tokens",
                                  "text tokens", "batches"],
                                 [[d["source"], d["documents"], d["images"], d["images_listed"], d["images_dropped"],
                                   ", ".join(f"{k} {v}" for k, v in d["images_dropped_by_reason"]) or "-",
                                   d["image_tokens"], d["text_tokens"], d["batches"]] for d in rows["interleaved"]])))
    return out


def consumed_sections(rows: dict) -> list[Section]:
    if not rows.get("consumed"):
        return []
    body = []
    for c in sorted(rows["consumed"], key=lambda c: (c["training"], c["stage"], c["source"])):
        pct = 100 * c["total_tokens"] / c["planned_tokens"] if c["planned_tokens"] else 0.0
        body.append([c["training"], c["stage"], c["source"], c["steps"], c["planned_tokens"], c["total_tokens"],
                     f"{pct:.1f}%", c["text_tokens"], c["image_tokens"], c["audio_tokens"], c["repeat_tokens"],
                     c["documents"]])
    return [Section(TRAINING, "Planned vs consumed", "What each training run (`curate train`) actually fed the model, "
                    "per source, beside the stage's plan: exact counts written back by the trainer. Ledger table "
                    "`consumed`.", table(["training", "stage", "source", "steps", "planned", "consumed", "of plan",
                                          "text", "image", "audio", "repeated", "documents"], body))]


def retry_sections(rows: dict) -> list[Section]:
    """The tasks run again after their worker or node died (only when some were)."""
    if not rows.get("task_retries"):
        return []
    body = [[r["node"], r["attempt"], r["error"], r["message"]]
            for r in sorted(rows["task_retries"], key=lambda r: (r["node"], r["attempt"]))]
    return [Section(RECORDS, "Task retries", f"{len(body)} task run(s) were lost with their Ray worker or node and "
                    "run again (a task that raises is never retried). The outputs are the same as a run without "
                    "failures; this table describes the execution and is in no manifest digest. Ledger table "
                    "`task_retries`.", table(["task", "attempt lost", "error", "message"], body))]


def _overlap_section(names: list[str], overlap: dict[tuple[str, str], int]) -> Section:
    """Up to `SOURCE_COLUMNS` sources a source x source matrix; beyond, one row per pair that shares a
    cluster (a matrix of 24 sources is wider than the page at 1280 px)."""
    if len(names) <= SOURCE_COLUMNS:
        return Section(DEDUP, "Cross-source overlap", "Clusters with members in both sources (diagonal: clusters "
                       "touching the source).", table(["source", *names], [[a, *[overlap[(a, b)] for b in names]]
                                                                         for a in names]))
    pairs = [[a, b, overlap[(a, b)]] for i, a in enumerate(names) for b in names[i:] if overlap[(a, b)]]
    return Section(DEDUP, "Cross-source overlap", "Clusters with members in both sources, per pair that shares one "
                   "(a source with itself: clusters touching the source).", table(["source", "with", "clusters"], pairs))


def removal_section(rows: dict) -> Section:
    sources = [s["source"] for s in rows["sources"]]
    wide = len(sources) <= SOURCE_COLUMNS
    groups = group_removals(rows)
    total = sum(g.total for g in groups) or 1
    body = []
    for g in groups:
        style = "fold" if g.folded else ""
        per = ([g.records.get(s) or "" for s in sources] if wide else
               [", ".join(f"{s} {n:,}" for s, n in sorted(g.records.items(), key=lambda kv: (-kv[1], kv[0]))[:3])])
        body.append([g.step, Cell(g.reason, style), g.kind, *per, g.total, f"{100 * g.total / total:.1f}%", g.detail])
    header = ["step", "reason", "kind", *(sources if wide else ["largest sources"]), "total", "share", "detail"]
    return Section(RECORDS, "Why records were removed",
                   "Drop and quarantine reasons in pipeline order (quarantined records are in `quarantine/`). Reasons "
                   "naming one of many values (one per detected language) are one row per step; reasons under 2% of "
                   "every source's removals are folded into one row per step. Share: of all removed records. Every "
                   "reason: `curate ledger OUT --table drop_reasons`.",
                   table(header, body or [["—", "nothing removed", "", *([""] * (len(header) - 3))]]))


def record_sections(rows: dict) -> list[Section]:
    tokens = main_pool(rows)
    first = {r["source"]: r["records_in"] for r in rows["steps"] if r["position"] == 0}
    total_tokens = sum(t["total_tokens"] for t in tokens.values()) or 1
    summary = []
    for s in rows["sources"]:
        t, n = tokens[s["source"]], first.get(s["source"], 0)
        summary.append([s["source"], s["category"], s["input_files"], n, t["documents"],
                        f"{100 * t['documents'] / max(n, 1):.1f}%", t["total_tokens"],
                        f"{100 * t['total_tokens'] / total_tokens:.1f}%", s["weight"]])
    toks = [[t["source"], t["pool"], t["documents"], t["text_tokens"], t["image_tokens"], t["audio_tokens"],
             t["total_tokens"]] for t in rows["tokens"]]
    return [
        Section(RECORDS, "Sources", "Records read, documents kept and their tokens (counted from the shards).",
                table(["source", "category", "files", "records read", "documents kept", "kept", "tokens",
                       "token share", "weight"], summary)),
        removal_section(rows),
        Section(RECORDS, "Tokens by modality", f"In the vocabulary `{rows['runs'][0]['vocabulary']}`, per source and "
                "shard set (`main`; an audio source's `long_context` pool, a text source's `no_reasoning` copy): "
                "every merged shard, so the total is what the shards hold.",
                table(["source", "pool", "documents", "text", "image", "audio", "total"], toks)),
        steps_section(rows),
    ]


def steps_section(rows: dict) -> Section:
    """Per step and source: in = out + dropped + quarantined. Up to `SOURCE_COLUMNS` sources, one row per
    step (in pipeline order) and a column per source; beyond, one row per source and step."""
    sources = [s["source"] for s in rows["sources"]]
    note = "Per step: in = out + dropped + quarantined (checked for every shard)."
    if len(sources) > SOURCE_COLUMNS:
        return Section(RECORDS, "Steps", note, table(["source", "step", "in", "out", "dropped", "quarantined"],
                       [[r["source"], r["step"], r["records_in"], r["records_out"], r["dropped"], r["quarantined"]]
                        for r in rows["steps"]]))
    cell: dict[tuple[str, str], str] = {}
    for r in rows["steps"]:
        lost = [f"−{r['dropped']:,} dropped"] if r["dropped"] else []
        lost += [f"−{r['quarantined']:,} quarantined"] if r["quarantined"] else []
        cell[(r["step"], r["source"])] = f"{r['records_in']:,} → {r['records_out']:,}" + (
            f" ({', '.join(lost)})" if lost else "")
    steps = pipeline_order(rows)
    return Section(RECORDS, "Steps", note + " Each cell: records in → out, and what the step removed.",
                   table(["step", *sources], [[st, *[cell.get((st, s), "") for s in sources]] for st in steps]))
