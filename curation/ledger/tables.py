"""Ledger rows from a finished plan: every count comes from task markers or from the shards.

Conservation is checked here, per source, shard and step: `in = out + dropped + quarantined`,
and each step's output is the next step's input. A violation raises `ConservationError`
naming the source, shard and step.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from curation import __version__
from curation.acquire.sources import read_acquired
from curation.core.record import StepStats
from curation.errors import ConservationError
from curation.plan.graph import Plan
from curation.shards.counting import count_tokens_by_modality


def decontamination_rows(run: str, source: str, step: StepStats, out: Path) -> list[dict]:
    """Apertus 1.5 Table H.2 per source and benchmark, plus the review: flagged, re-admitted, removed.

    `original` counts the documents that reached the step (after dedup); `flagged` and `readmitted`
    count over all processed documents of the source (a flagged duplicate may already be gone)."""
    import pyarrow.parquet as pq
    flags = [f for f in pq.read_table(out / "review" / "decontamination.parquet",
                                      columns=["source", "benchmark", "status"]).to_pylist()
             if f["source"] == source]
    removed = {r.removeprefix("contaminated:"): n for r, n in step.dropped.items()}
    out_rows = []
    for bench in sorted({f["benchmark"] for f in flags} | set(removed)):
        mine = [f for f in flags if f["benchmark"] == bench]
        n = removed.get(bench, 0)
        out_rows.append({"run": run, "source": source, "benchmark": bench, "original": step.records_in,
                         "flagged": len(mine), "readmitted": sum(f["status"] == "readmitted" for f in mine),
                         "removed": n, "final": step.records_in - n,
                         "pct_removed": round(100 * n / max(step.records_in, 1), 4)})
    total = sum(removed.values())
    out_rows.append({"run": run, "source": source, "benchmark": "(all)", "original": step.records_in,
                     "flagged": len(flags), "readmitted": sum(f["status"] == "readmitted" for f in flags),
                     "removed": total, "final": step.records_out,
                     "pct_removed": round(100 * total / max(step.records_in, 1), 4)})
    return out_rows


def licence_decision(licence: dict) -> str:
    if licence["field"]:
        return f"per record ({licence['field']}); source class {licence['class']}"
    return f"excluded ({licence['class']})" if licence["class"] in licence["exclude"] else "included"


def optout_mode(plan: Plan, src) -> str:
    from curation.steps.compliance.optout import NOT_TECHNICALLY_AVAILABLE
    if src.optout == "not_available":
        return NOT_TECHNICALLY_AVAILABLE
    return "robots.txt (page URL)" if plan.recipe.recipe.optout else "none (no snapshots in the recipe)"


def step_chain(plan: Plan, markers: dict, source: str, shard: str) -> list[StepStats]:
    process = markers[f"process/{source}/{shard}"]["stats"]
    tokenize = markers[f"tokenize/{source}/{shard}"]["stats"]
    return [StepStats.from_json(s) for s in (*process, *tokenize)]


def check_conservation(source: str, shard: str, chain: list[StepStats]) -> None:
    prev: StepStats | None = None
    for st in chain:
        if not st.balanced():
            raise ConservationError(
                f"source {source!r} shard {shard} step {st.step!r}: in={st.records_in} but out={st.records_out} "
                f"+ dropped={sum(st.dropped.values())} + quarantined={sum(st.quarantined.values())} "
                f"= {st.records_out + sum(st.dropped.values()) + sum(st.quarantined.values())}; "
                f"records were lost, this is a bug in that step")
        if prev is not None and prev.records_out != st.records_in:
            raise ConservationError(f"source {source!r} shard {shard}: step {prev.step!r} emitted "
                                    f"{prev.records_out} records but {st.step!r} received {st.records_in}")
        prev = st


def audio_row(run: str, src, per_shard: list[dict], counts: dict) -> dict:
    """One source's audio accounting: clips, hours, codes and paired text, sequences by kind and pool."""
    total: dict[str, float] = {}
    for c in per_shard:
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    g = lambda k: int(total.get(k, 0))  # noqa: E731
    return {"run": run, "source": src.name, "category": src.category, "clips": g("clips"),
            "hours": round(total.get("seconds", 0) / 3600, 6), "audio_codes": g("codes"),
            "audio_tokens": counts["audio"], "paired_text_tokens": counts["text"],
            "interleaved": g("interleaved"), "transcription": g("transcription"), "audio_only": g("audio_only"),
            "stage2_pool": g("stage2"), "long_context_pool": g("long_context"), "batches": g("batches"),
            "padding_pct": round(100 * (1 - total.get("seconds", 0) / total["padded_seconds"]), 3)
            if total.get("padded_seconds") else 0.0}


def build_rows(plan: Plan, markers: dict, out: Path) -> dict[str, list[dict]]:
    from curation.core.layout import source_prefix

    run = plan.recipe.fingerprint
    r = plan.recipe.recipe
    rows: dict[str, list[dict]] = defaultdict(list)
    rows["runs"].append({"run": run, "recipe": r.name, "vocabulary": plan.vocab.id,
                         "vocabulary_sha256": plan.vocab.sha256, "curate_version": __version__,
                         "stages": ", ".join(s.name for s in r.stages)})
    for src in r.sources:
        files = plan.recipe.inputs[src.name]
        src_fp = next(n.fingerprint for n in plan.merge if n.source == src.name)
        acquired = read_acquired(out / "raw", src.name) if src.acquire else None
        comp = next(n.spec["compliance"] for n in plan.process if n.source == src.name) if files else \
            {"licence": {"class": src.license_class or "unknown", "exclude": [], "field": None}, "pii": None}
        rows["sources"].append({
            "run": run, "source": src.name, "source_fingerprint": src_fp, "modality": src.modality,
            "category": src.category,
            "revision": src.revision or (acquired or {}).get("revision"), "license": src.license,
            "license_class": comp["licence"]["class"], "weight": src.weight,
            "included": None, "excluded_reason": None,  # set once the stages are planned
            "input_files": len(files), "input_bytes": sum(f.size for f in files),
            "licence_decision": licence_decision(comp["licence"]),
            "optout_mode": optout_mode(plan, src), "pii": ", ".join(comp["pii"]) if comp["pii"] else "none",
            "acquired": acquired["kind"] if acquired else None,
            "fetched_sha256": acquired["fetched_sha256"] if acquired else None})
        for outcome, n in sorted((acquired or {}).get("outcomes", {}).items()):
            kind, _, reason = outcome.partition(":")
            rows["acquisition"].append({"run": run, "source": src.name, "kind": acquired["kind"],
                                        "origin": acquired["origin"], "outcome": kind, "reason": reason or None,
                                        "items": n})
        for f in files:
            rows["inputs"].append({"run": run, "source": src.name, "shard": f.shard_id, "path": f.rel,
                                   "bytes": f.size, "sha256": f.sha256})
        totals: dict[str, StepStats] = {}
        order: list[str] = []
        for f in files:
            chain = step_chain(plan, markers, src.name, f.shard_id)
            check_conservation(src.name, f.shard_id, chain)
            tok = markers[f"tokenize/{src.name}/{f.shard_id}"]
            # audio clips become interleaved/transcription/audio-only sequences: count clips there
            written = tok["audio"]["clips"] if "audio" in tok else tok["documents"]
            if chain[-1].records_out != written:
                raise ConservationError(f"source {src.name!r} shard {f.shard_id}: tokenize emitted "
                                        f"{chain[-1].records_out} records but the shard holds {written}")
            for st in chain:
                if st.step not in totals:
                    totals[st.step] = StepStats(st.step)
                    order.append(st.step)
                t = totals[st.step]
                t.records_in += st.records_in
                t.records_out += st.records_out
                t.dropped.update(st.dropped)
                t.quarantined.update(st.quarantined)
                t.seconds += st.seconds
                t.notes.update(st.notes)
        if "pii" in totals:
            rows["pii"] += [{"run": run, "source": src.name, "kind": k, "replaced": n}
                            for k, n in sorted(totals["pii"].notes.items())]
        if "robots_optout" in totals:
            o = totals["robots_optout"]
            rows["optout"].append({"run": run, "source": src.name, "mode": "robots.txt (page URL)",
                                   "records": o.records_in, "with_url": o.notes["checked"],
                                   "removed": o.dropped["robots_opt_out"],
                                   "allowlist_would_remove": o.notes["not_allowlisted"] + o.notes["no_url"]})
        if "decontaminate" in totals:
            rows["decontamination"] += decontamination_rows(run, src.name, totals["decontaminate"], out)
        for pos, name in enumerate(order):
            t = totals[name]
            rows["steps"].append({
                "run": run, "source": src.name, "position": pos, "step": name, "records_in": t.records_in,
                "records_out": t.records_out, "dropped": sum(t.dropped.values()),
                "quarantined": sum(t.quarantined.values()), "seconds": round(t.seconds, 6)})
            for reason, n in sorted(t.dropped.items()):
                rows["drops"].append({"run": run, "source": src.name, "step": name, "reason": reason,
                                      "records": n})
            for reason, n in sorted(t.quarantined.items()):
                rows["quarantine"].append({"run": run, "source": src.name, "step": name, "reason": reason,
                                           "records": n})
        counts = count_tokens_by_modality(source_prefix(out, src.name), plan.vocab.blocks, plan.vocab.reserved)
        rows["tokens"].append({"run": run, "source": src.name, "documents": counts["documents"],
                               "text_tokens": counts["text"], "image_tokens": counts["image"],
                               "audio_tokens": counts["audio"], "total_tokens": counts["total"]})
        if src.modality == "image":
            im = src.image_settings()
            batches = sum(int(next(st for st in markers[f"tokenize/{src.name}/{f.shard_id}"]["stats"]
                                   if st["step"] == "tokenize").get("notes", {}).get("batches", 0)) for f in files)
            rows["images"].append({"run": run, "source": src.name, "category": src.category, "domain": im.domain,
                                   "samples": counts["documents"], "image_tokens": counts["image"],
                                   "paired_text_tokens": counts["text"], "caption": im.caption, "area": im.area,
                                   "batches": batches})
        if src.modality == "audio":
            rows["audio"].append(audio_row(run, src, [markers[f"tokenize/{src.name}/{f.shard_id}"]["audio"]
                                                      for f in files], counts))
    if plan.decont_index is not None:
        rows["benchmarks"] = [{"run": run, "benchmark": b["name"], "sha256": b["sha256"],
                               "fields": ", ".join(b["fields"]), "items": b.get("items", 0),
                               "unindexable": b.get("unindexable", 0)}
                              for b in markers[plan.decont_index.key]["benchmarks"]]
    image_clusters = out / "work" / "dedup" / "image_clusters.parquet"
    if image_clusters.is_file() and plan.dedup.spec["images"]["sources"]:
        import pyarrow.parquet as pq
        rows["image_clusters"] = [{"run": run, **c} for c in pq.read_table(image_clusters).to_pylist()]
    audio_clusters = out / "work" / "dedup" / "audio_clusters.parquet"
    if audio_clusters.is_file() and plan.dedup.spec.get("audio"):
        import pyarrow.parquet as pq
        rows["audio_clusters"] = [{"run": run, **c} for c in pq.read_table(audio_clusters).to_pylist()]
    clusters = out / "work" / "minhash" / "clusters.parquet"
    if plan.clusters is not None:
        import pyarrow.parquet as pq
        rows["clusters"] = [{"run": run, **c} for c in pq.read_table(clusters).to_pylist()]
        rows["near_duplicates"] = [{"run": run, "source": d["source"], "id": d["id"], "cluster": d["cluster"]}
                                   for d in pq.read_table(clusters.with_name("duplicates.parquet")).to_pylist()]
    return dict(rows)
