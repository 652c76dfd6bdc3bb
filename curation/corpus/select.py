"""Top-fraction selection by score per language (FineWeb2-HQ+: the 10% of documents per language
rated highest by a quality classifier), as a corpus-wide phase of two stages under `work/select/`:

    select_scores(source, shard)  (id, group, score) of every document of the shard that reaches the
                                  step: the `meta` column of the processed shard minus the ids the
                                  earlier phases (exact, near-duplicate, decontamination) drop  → scores/<source>/<shard>.parquet
    select_resolve                exact per-group thresholds by radix selection over the score
                                  files, then one drop list per shard (`below_quality_quantile`)  → drops/, selection.json

Rule (exact, deterministic): in a group (a language, or everything with `by: none`) of n documents,
exactly k = ceil(top_fraction × n) are kept: those ranked first by (score descending, canonical
order: recipe source order, shard, row). The threshold is the k-th score; documents above it are
kept, documents below it dropped, and of the documents scoring exactly the threshold the earliest in
canonical order are kept until k is reached. top_fraction is the decimal the recipe writes, so 0.1 ×
30 is 3. Nothing depends on worker count, shard completion order or float summation order.

Memory (no task holds the corpus): a score task holds one shard's `id` and `meta` columns (parsed
65,536 rows at a time) and its (id, group, score) lists. The resolve task streams the score files one
at a time, reading only the `group` and `score` columns (plus `id` in its last pass): about 190 bytes
per document of the current shard (measured for 320,000 documents: 80 in Python and numpy, 110 in
Arrow's pool: the columns, the uint64 keys, masks, the drop list being written) and nothing per
document of the other shards; per group 1,024 bins × 24 bytes while its threshold is being narrowed,
the report's 50-bin histogram and a few counters (`tests/corpus/test_select.py` checks that four
times the corpus in four times the shards leaves the peak where it was). The threshold is found by radix
selection on the key: each pass counts the group's candidates per 10-bit digit below the common prefix
of the window's lowest and highest key and keeps the bin holding the k-th document, until the window
is one value (float32 scores such as fastText's: at most 4 passes; any float64: at most 7). Ties
never need memory: the last pass counts them in canonical order.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.atomic import atomic_write_json, atomic_write_parquet
from curation.core.hashing import fingerprint
from curation.core.layout import drops_path, processed_path, work_dir
from curation.core.node import CODE_EPOCH, Node
from curation.corpus.base import CorpusPhase, PlanContext
from curation.corpus.select_ledger import TABLES, TIE_RULE, ledger_rows
from curation.corpus.select_radix import GroupStats, from_key, resolve_groups
from curation.errors import RecipeError
from curation.recipe.selection import ALL, Select, pools
from curation.steps.droplist import SCHEMA as DROPS
from curation.steps.droplist import read_drops

REASON = "below_quality_quantile"
SCORES = pa.schema([("id", pa.string()), ("group", pa.string()), ("score", pa.float64())])
BATCH = 65_536   # rows of `meta` parsed at a time


def scores_path(out: Path, source: str, shard: str) -> Path:
    return work_dir(out, "select") / "scores" / source / f"{shard}.parquet"


def _score(meta: dict, field: str, where: str) -> float:
    v = meta.get(field)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise RecipeError(f"select: {where} has no numeric meta[{field!r}] (got {v!r}); every document the "
                          f"selection covers needs a finite score: score the source with a `quality` step")
    return float(v) + 0.0   # -0.0 ranks as 0.0


def run_scores(out: Path, node: Node) -> dict:
    spec = node.spec
    field, by = spec["field"], spec["by"]
    dropped: set[str] = set()
    for phase in spec["earlier"]:
        dropped |= read_drops(drops_path(out, phase, node.source, node.shard)).keys()
    ids, groups, scores = [], [], []
    shard = pq.ParquetFile(processed_path(out, node.source, node.shard))
    for batch in shard.iter_batches(batch_size=BATCH, columns=["id", "meta"]):
        for rid, raw in zip(batch.column("id").to_pylist(), batch.column("meta").to_pylist()):
            if rid in dropped:
                continue
            meta = json.loads(raw) if raw else {}
            where = f"document {rid!r} of source {node.source!r} (shard {node.shard})"
            group = ALL
            if by == "language":
                group = meta.get("language")
                if not isinstance(group, str) or not group:
                    raise RecipeError(f"select (by: language): {where} has no meta['language']; identify "
                                      f"languages with a `language` filter or a `quality` step first")
            ids.append(rid)
            groups.append(group)
            scores.append(_score(meta, field, where))
    path = scores_path(out, node.source, node.shard)
    atomic_write_parquet(path, pa.table({"id": ids, "group": groups, "score": scores}, schema=SCORES))
    return {"documents": len(ids), "excluded": shard.metadata.num_rows - len(ids),
            "outputs": [str(path.relative_to(out))]}


def _groups_of(table: pa.Table, index: dict[str, int]) -> np.ndarray:
    """The `group` column as global group numbers (new groups numbered as they appear)."""
    col = table.column("group")
    codes = []
    for chunk in col.chunks:
        if not isinstance(chunk, pa.DictionaryArray):
            chunk = chunk.dictionary_encode()
        local = np.array([index.setdefault(g, len(index)) for g in chunk.dictionary.to_pylist()], dtype=np.int64)
        codes.append(local[chunk.indices.to_numpy(zero_copy_only=False)] if local.size else
                     np.zeros(len(chunk), np.int64))
    return np.concatenate(codes) if codes else np.zeros(0, np.int64)


def stream(out: Path, shards: list[tuple[str, str]], index: dict[str, int], ids: bool = False):
    """(source, shard, group numbers, scores[, the id column]) per score file, in canonical order, one at a time."""
    for source, shard in shards:
        t = pq.read_table(scores_path(out, source, shard), columns=["group", "score"] + (["id"] if ids else []),
                          read_dictionary=["group"])
        row = (source, shard, _groups_of(t, index), t.column("score").to_numpy())
        yield row + (t.column("id"),) if ids else row


def _evidence(names: list[str], cut: list[float], groups: np.ndarray, scores: np.ndarray) -> pa.Array:
    """Why each dropped document is out: its score against its group's threshold (exact values)."""
    return pa.array([f"{names[g]}: score {s!r} " + ("below the threshold" if s < cut[g] else
                                                    "ties the threshold, after the kept ties") + f" {cut[g]!r}"
                     for g, s in zip(groups.tolist(), scores.tolist())], pa.string())


def run_resolve(out: Path, node: Node, phase: SelectPhase) -> dict:
    """One pool: thresholds per group, then the drop list of every shard of the pool's sources."""
    spec = node.spec
    shards = [tuple(s) for s in spec["shards"]]
    cfg = Select.model_validate(spec["cfg"])
    index: dict[str, int] = {}
    stats = GroupStats()
    for source, _, groups, scores in stream(out, shards, index):
        stats.add(source, groups, scores)
    names = sorted(index, key=index.get)
    k = [math.ceil(cfg.fraction(g) * n) for g, n in zip(names, stats.counts(len(names)))]
    thresholds = resolve_groups(lambda: ((g, s) for _, _, g, s in stream(out, shards, index)), stats, k)
    cut = from_key(thresholds.key).tolist()
    drops, dropped = [], 0
    for source, shard, groups, scores, rids in stream(out, shards, index, ids=True):
        gone = ~thresholds.keep(source, groups, scores)
        path = drops_path(out, phase.name, source, shard)   # shard by shard, as Arrow columns: one shard's memory
        atomic_write_parquet(path, pa.table({"id": rids.filter(pa.array(gone)),
                                             "reason": pa.array([REASON] * int(gone.sum()), pa.string()),
                                             "detail": _evidence(names, cut, groups[gone], scores[gone]),
                                             "image": pa.nulls(int(gone.sum()), pa.int32())},
                                            schema=DROPS))
        drops.append(str(path.relative_to(out)))
        dropped += int(gone.sum())
    result = thresholds.summary(names, stats, k, {g: float(cfg.fraction(g)) for g in names}, cfg.field)
    result["covered"] = list(dict.fromkeys(s for s, _ in shards))
    path = work_dir(out, "select") / f"{node.shard}.json"
    atomic_write_json(path, result | {"tie_rule": TIE_RULE})
    return {**result, "kept": sum(g["kept"] for g in result["groups"]), "dropped": dropped,
            "outputs": [str(path.relative_to(out)), *drops]}


def _stages_of(phase: CorpusPhase, planned: dict[str, Node]) -> list[list[Node]]:
    """An earlier phase's stages as planned (its nodes by stage name, in the order they were planned)."""
    names, stages = set(phase.runners()), {}
    for n in planned.values():
        if n.phase in names:
            stages.setdefault(n.phase, []).append(n)
    return list(stages.values())


class SelectPhase(CorpusPhase):
    """`after`: the phases whose drop steps come before `select` in the tokenize chain (the phase table
    passes those before it), so that the selection ranks exactly the documents that reach the step.
    One resolve task per pool (`select.pool`)."""
    name = "select"
    step = "select"
    tables = TABLES

    def __init__(self, after: list[CorpusPhase] = ()):
        self.after = list(after)

    def applies(self, recipe) -> bool:
        return any(s.select is not None for s in recipe.sources)

    def covers(self, src) -> bool:
        return src.select is not None

    def plan(self, ctx: PlanContext) -> list[list[Node]]:
        recipe = ctx.loaded.recipe
        scores = []
        for p in ctx.process:
            src = ctx.source(p.source)
            if not self.covers(src):
                continue
            earlier = [(e.name, e.drop_node(_stages_of(e, ctx.planned), src)) for e in self.after
                       if e.applies(recipe) and e.covers(src)]
            common = {"field": src.select.field, "by": src.select.by}
            scores.append(Node("select_scores", p.source, p.shard, fingerprint(
                {"v": CODE_EPOCH, "phase": "select_scores", **common, "process": p.fingerprint,
                 "reads": [[name, n.fingerprint] for name, n in earlier]}),
                deps=[p.key, *dict.fromkeys(n.key for _, n in earlier)],
                spec={**common, "earlier": [name for name, _ in earlier]}))
        resolves = []
        for pool, sources in pools(recipe).items():
            cfg = sources[0].select.model_dump(mode="json")
            mine = [n for n in scores if ctx.source(n.source).select.pool == pool]
            resolves.append(Node("select_resolve", None, pool, fingerprint(
                {"v": CODE_EPOCH, "phase": "select_resolve", "cfg": cfg,
                 "scores": [[n.source, n.shard, n.fingerprint] for n in mine]}),
                deps=[n.key for n in mine], spec={"cfg": cfg, "shards": [(n.source, n.shard) for n in mine]}))
        return [scores, resolves]

    def node_count(self, recipe, files: dict[str, int]) -> int:
        return self.covered_files(recipe, files) + len(pools(recipe))   # scores per shard, one resolve per pool

    def drop_node(self, stages: list[list[Node]], src) -> Node:
        return next(n for n in stages[-1] if n.shard == src.select.pool)

    def runners(self):
        return {"select_scores": run_scores, "select_resolve": lambda out, node: run_resolve(out, node, self)}

    def ledger_rows(self, run: str, nodes: list[Node], markers: dict, out: Path, totals: dict) -> dict:
        pools_ = {n.shard: markers[n.key] for n in nodes if n.phase == "select_resolve"}
        return ledger_rows(run, pools_, totals, self.step, REASON)

    def explain(self, nodes: list[Node]) -> str:
        resolves = [n for n in nodes if n.phase == "select_resolve"]
        parts = []
        for n in resolves:
            cfg = n.spec["cfg"]
            by = "per language" if cfg["by"] == "language" else "over all documents"
            parts.append(f"pool {n.shard}: top {cfg['top_fraction']} {by} by meta[{cfg['field']!r}] "
                         f"{n.fingerprint}")
        return f"{len(nodes) - len(resolves)} score tasks → " + "; ".join(parts)
