"""What the image and audio near-duplicate phases share: one task over one modality's shards.

The task reads what exact dedup already removes (those records take no part), finds the groups of
near-identical samples (`find`, the modality's own matching), drops all but each group's earliest
member in canonical order under the tokenize step `exact_dedup`, and keeps the groups for the ledger
table `table`. The node's fingerprint covers the phase's settings, the modality's process nodes and
the exact-dedup node it reads.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from curation.core.atomic import atomic_write_parquet
from curation.core.hashing import fingerprint
from curation.core.layout import drops_path, work_dir
from curation.core.node import CODE_EPOCH, Node
from curation.core.parts import PartRows
from curation.corpus.base import CorpusPhase, PlanContext
from curation.steps.droplist import read_drops


class NearDuplicatePhase(CorpusPhase):
    step = "exact_dedup"
    modalities: tuple[str, ...] = ()   # the modalities whose samples it compares
    table = ""              # its ledger table of duplicate groups
    clusters = pa.schema([])

    def settings(self, recipe) -> dict:
        """The recipe settings the matching reads (JSON-able)."""
        raise TypeError(f"{type(self).__name__} must declare its settings")

    def find(self, out: Path, shards: list[tuple[str, str]], settings: dict, gone: set) -> tuple[list[dict], pa.Table]:
        """(drop rows with source, shard, id, reason, detail; the groups as a table of `clusters`)."""
        raise TypeError(f"{type(self).__name__} must find its duplicates")

    @property
    def tables(self) -> dict[str, pa.Schema]:
        return {self.table: pa.schema([("run", pa.string()), *self.clusters])}

    def applies(self, recipe) -> bool:
        return any(self.covers(s) for s in recipe.sources)

    def covers(self, src) -> bool:
        return src.modality in self.modalities

    def node_count(self, recipe, files: dict[str, int]) -> int:
        return 1   # one task over every covered shard

    def plan(self, ctx: PlanContext) -> list[list[Node]]:
        r = ctx.loaded.recipe
        process = [n for n in ctx.process if self.covers(ctx.source(n.source))]
        # the exact phase's nodes of the covered modalities (one per modality): their removals take no part
        exact = sorted({f"exact/{ctx.source(n.source).modality}" for n in process}) \
            if r.dedup.exact is not None else []
        settings = self.settings(r)
        node = Node(self.name, None, None, fingerprint(
            {"v": CODE_EPOCH, "phase": self.name, "settings": settings,
             "exact": [ctx.planned[k].fingerprint for k in exact] or None,
             "process": [[n.source, n.shard, n.fingerprint] for n in process]}),
            deps=[n.key for n in process] + exact,
            spec={"settings": settings, "exact": bool(exact), "shards": [(n.source, n.shard) for n in process]})
        return [[node]]

    def runners(self):
        return {self.name: self.run}

    def run(self, out: Path, node: Node) -> dict:
        shards = [tuple(s) for s in node.spec["shards"]]
        gone = {(s, i) for s, sh in shards for i in read_drops(drops_path(out, "exact", s, sh))} \
            if node.spec["exact"] else set()
        rows, groups = self.find(out, shards, node.spec["settings"], gone)
        path = work_dir(out, self.name) / "clusters.parquet"
        atomic_write_parquet(path, groups)
        return {"duplicates": len(rows), "outputs": [*self.write_drops(out, shards, rows), str(path.relative_to(out))]}

    def ledger_rows(self, run: str, nodes: list[Node], markers: dict, out: Path, totals: dict) -> dict[str, list[dict]]:
        # the task's file, copied into the ledger by DuckDB: the driver holds none of its rows
        return {self.table: PartRows([work_dir(out, self.name) / "clusters.parquet"], self.tables[self.table].names,
                                     {"run": run})}
