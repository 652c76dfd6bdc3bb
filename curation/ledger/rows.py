"""Ledger rows from a finished plan: every count comes from task markers or from the shards.

The core tables are built here; the tables that steps, modalities and corpus-wide phases contribute
are asked of their declarations (`LEDGER_STEPS`, `Modality.ledger_table`, `CorpusPhase.ledger_rows`).
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from curation import __version__
from curation.acquire.feeds import feed_rows
from curation.acquire.sources import read_acquired
from curation.core.layout import source_prefix
from curation.core.parts import PartRows
from curation.core.record import StepStats
from curation.ledger.conservation import check_conservation, check_written
from curation.ledger.encoders import encoder_rows
from curation.ledger.environment import environment_row
from curation.ledger.pools import pool_name
from curation.ledger.ranks import rank_rows
from curation.ledger.transparency import DOMAIN_COLUMNS, domain_rows, transparency_rows
from curation.plan.graph import Plan, optout_index
from curation.plan.pipeline import compliance
from curation.shards.shardset import ShardSet
from curation.steps.compliance.domains import MATCH_RULES
from curation.steps.compliance.licences import licence_decision
from curation.steps.compliance.optout import NOT_TECHNICALLY_AVAILABLE
from curation.steps.registry import LEDGER_STEPS, MODALITIES
from curation.steps.text.filters import coverage
from curation.steps.text.filters.quality import read_card


def optout_mode(plan: Plan, src) -> str:
    if src.optout == "not_available":
        return NOT_TECHNICALLY_AVAILABLE
    optout = plan.recipe.recipe.optout
    return f"robots.txt (page URL; {MATCH_RULES[optout.match]})" if optout else "none (no snapshots in the recipe)"


def step_chain(markers: dict, source: str, shard: str) -> list[StepStats]:
    process = markers[f"process/{source}/{shard}"]["stats"]
    tokenize = markers[f"tokenize/{source}/{shard}"]["stats"]
    return [StepStats.from_json(s) for s in (*process, *tokenize)]


def _source_row(plan: Plan, src, out: Path) -> dict:
    files = plan.recipe.inputs[src.name]
    acquired = read_acquired(out / "raw", src.name) if src.acquire else None
    comp = next(n.spec["compliance"] for n in plan.process if n.source == src.name) if files else \
        compliance(plan.recipe, src, None)   # no input files: the same licence spec the tasks would get
    return {"source": src.name, "source_fingerprint": next(n.fingerprint for n in plan.merge if n.source == src.name),
            "modality": src.modality, "category": src.category,
            "revision": src.revision or (acquired or {}).get("revision"), "licence": src.license,
            "licence_class": comp["licence"]["class"], "weight": src.weight,
            "included": None, "excluded_reason": None,  # set once the stages are planned
            "input_files": len(files), "input_bytes": sum(f.size for f in files),
            "licence_decision": licence_decision(comp["licence"]),
            "optout_mode": optout_mode(plan, src), "pii": ", ".join(comp["pii"]) if comp["pii"] else "none",
            "acquired": acquired["kind"] if acquired else None,
            "fetched_sha256": acquired["fetched_sha256"] if acquired else None}, acquired


def _domains(marker: dict) -> dict[str, list[int]]:
    """A tokenize marker's documents and tokens per web domain; a marker written before curate counted
    them (a resumed older run) has none, and its documents count as without a page URL."""
    if "domains" in marker:
        return marker["domains"]
    return {"": [marker["documents"], marker["tokens"]]} if marker["documents"] else {}


def _domain_tokens(run: str, plan: Plan, markers: dict, out: Path) -> PartRows | list[dict]:
    """The `domain_tokens` rows: each source's file of documents and tokens per web domain, summed by its merge
    task and copied into the ledger by DuckDB (a corpus can hold millions of domains: the driver holds none).
    A merge marker of an older curate names no such file: then every source's rows are counted here, from
    the tokenize markers' `domains` (or those files, for the sources that have one)."""
    sources = plan.recipe.recipe.sources
    files = {s.name: markers.get(f"merge/{s.name}", {}).get("domains") for s in sources}
    table = PartRows([out / files[s.name] for s in sources if files[s.name]], DOMAIN_COLUMNS, {"run": run})
    if all(files.values()):
        return table
    rows: list[dict] = []
    for s in sources:
        if files[s.name]:
            rows += PartRows([out / files[s.name]], DOMAIN_COLUMNS, {"run": run})
        else:
            rows += domain_rows(run, s.name, [_domains(markers[f"tokenize/{s.name}/{f.shard_id}"])
                                              for f in plan.recipe.inputs[s.name]])
    return rows


def _totals(markers: dict, source: str, files) -> dict[str, StepStats]:
    """Summed step counts of a source over its shards, in chain order; conservation checked per shard."""
    totals: dict[str, StepStats] = {}
    for f in files:
        chain = step_chain(markers, source, f.shard_id)
        check_conservation(source, f.shard_id, chain)
        check_written(source, f.shard_id, chain, markers[f"tokenize/{source}/{f.shard_id}"]["records"])
        for st in chain:
            totals[st.step] = totals.get(st.step, StepStats(st.step)) + st
    return totals


def _step_rows(run: str, source: str, totals: dict[str, StepStats]) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = defaultdict(list)
    for pos, (name, t) in enumerate(totals.items()):
        rows["steps"].append({
            "run": run, "source": source, "position": pos, "step": name, "records_in": t.records_in,
            "records_out": t.records_out, "dropped": sum(t.dropped.values()),
            "quarantined": sum(t.quarantined.values()), "seconds": round(t.seconds, 6)})
        rows["drops"] += [{"run": run, "source": source, "step": name, "reason": reason, "records": n}
                          for reason, n in sorted(t.dropped.items())]
        rows["quarantine"] += [{"run": run, "source": source, "step": name, "reason": reason, "records": n}
                               for reason, n in sorted(t.quarantined.items())]
    return rows


def merged_counts(plan: Plan, markers: dict, out: Path, source: str, suffix: str) -> dict[str, int]:
    """Documents and tokens by modality of a merged shard set (all its parts), as its merge task counted them
    while writing it (its marker's `shards`); a merge marker written before merges counted (an earlier curate, its task not
    re-run) leaves the counting to this process, reading the shard in blocks."""
    summary = markers.get(f"merge/{source}", {}).get("shards", {}).get(suffix)
    if summary is not None:
        return {k: summary[k] for k in ("documents", "text", "image", "audio", "total")}
    return ShardSet.on_disk(Path(f"{source_prefix(out, source)}{suffix}")).counts(plan.vocab.blocks,
                                                                                 plan.vocab.reserved)


def runs_row(plan: Plan, started_at: str | None, finished_at: str | None) -> dict:
    """The run's row: what ran (recipe fingerprint, vocabulary, curate version, stages) and the execution
    columns (UTC start and end, host, library versions; `curation.ledger.environment`)."""
    r = plan.recipe.recipe
    return {"run": plan.recipe.fingerprint, "recipe": r.name, "vocabulary": plan.vocab.id,
            "vocabulary_sha256": plan.vocab.sha256, "curate_version": __version__,
            "stages": ", ".join(s.name for s in r.stages), **environment_row(started_at, finished_at)}


def build_rows(plan: Plan, markers: dict, out: Path, *, started_at: str | None = None,
               finished_at: str | None = None, ranks: int = 1) -> dict[str, list[dict]]:
    """All rows but the mixture's; `started_at`/`finished_at` (UTC ISO, `environment.utc_now`) are the
    run's, from `curate run`; `ranks`: how many codec tasks the run's executor ran at once (`rank_plan`)."""
    run = plan.recipe.fingerprint
    r = plan.recipe.recipe
    rows: dict[str, list[dict]] = defaultdict(list)
    rows["runs"].append(runs_row(plan, started_at, finished_at))
    all_totals: dict[str, dict[str, StepStats]] = {}
    for src in r.sources:
        files = plan.recipe.inputs[src.name]
        row, acquired = _source_row(plan, src, out)
        rows["sources"].append({"run": run, **row})
        for outcome, n in sorted((acquired or {}).get("outcomes", {}).items()):
            kind, _, reason = outcome.partition(":")
            rows["acquisition"].append({"run": run, "source": src.name, "kind": acquired["kind"],
                                        "origin": acquired["origin"], "outcome": kind, "reason": reason or None,
                                        "items": n})
        rows["inputs"] += [{"run": run, "source": src.name, "shard": f.shard_id, "path": f.rel, "bytes": f.size,
                            "sha256": f.sha256} for f in files]
        totals = all_totals[src.name] = _totals(markers, src.name, files)
        for step in LEDGER_STEPS:
            if step.name in totals:
                for table, more in step.ledger_rows(run, src.name, totals[step.name]).items():
                    rows[table] += more
        for table, more in _step_rows(run, src.name, totals).items():
            rows[table] += more
        for name, _, cfg in coverage.classifier_filters(src):   # what each classifier knows, per language
            notes = totals[name].notes if name in totals else {}
            rows[coverage.TABLE] += coverage.coverage_rows(run, src.name, name, cfg,
                                                           read_card(plan.recipe.resolve(cfg.model)), notes)
        for suffix in MODALITIES[src.modality].outputs(src):   # every merged shard set: the table sums to them
            pool = merged_counts(plan, markers, out, src.name, suffix)
            rows["tokens"].append({"run": run, "source": src.name, "pool": pool_name(suffix),
                                   "documents": pool["documents"], "text_tokens": pool["text"],
                                   "image_tokens": pool["image"], "audio_tokens": pool["audio"],
                                   "total_tokens": pool["total"]})
            if suffix == "":
                counts = pool      # the source's own counts (its modality table's, below)
        table = MODALITIES[src.modality].ledger_table
        if table is not None:
            rows[table.name].append(table.row(run, src, totals, counts))
    rows["domain_tokens"] = _domain_tokens(run, plan, markers, out)
    for table, more in transparency_rows(run, r, optout_index(plan.recipe)).items():
        rows[table] += more
    rows["encoders"] = encoder_rows(run, plan.tokenize, markers)
    rows["rank_plan"] = rank_rows(run, plan.tokenize, markers, ranks)
    rows["feeds"] = feed_rows(run, [read_acquired(out / "raw", s.name) for s in r.sources
                                    if s.acquire and s.acquire.kind == "urls"])
    for phase, nodes in plan.phases:
        for table, more in phase.ledger_rows(run, nodes, markers, out, all_totals).items():
            if isinstance(more, PartRows):   # rows in the task's part files: never read into this process
                if rows.get(table):
                    raise ValueError(f"ledger table {table!r}: part files and rows from two phases")
                rows[table] = more
            else:
                rows[table] += more
    return dict(rows)
