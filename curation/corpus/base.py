"""The corpus-wide phase protocol: what every phase declares, so the plan, the tokenize tasks and
the ledger never need to know which phases exist.

A phase declares
- whether a recipe uses it (`applies`) and which sources it may remove records from (`covers`);
- its stages, in order, as nodes (`plan`): each node's fingerprint covers the settings the stage
  reads, its inputs' content and the fingerprints of the nodes it reads; its last stage writes one
  drop list per covered shard (`curation.steps.droplist`) and nothing else reads the phase's files;
- the tokenize-chain step that removes what it lists (`step`: `exact_dedup`, `near_dedup`,
  `decontaminate`); phases that share a step name share one step, in table order;
- the task function of each stage (`runners`) and the ledger tables it contributes (`tables`,
  `ledger_rows`).

Canonical order, used by every survivor rule: recipe source order, then shard, then row. It never
depends on worker count or task completion order.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pyarrow as pa

from curation.core.layout import drops_path, is_processed_table
from curation.core.node import Node
from curation.steps.droplist import write_drop_columns, write_drops


@dataclass
class PlanContext:
    """What a phase knows when it plans: the loaded recipe and the process node of every shard."""
    loaded: object            # curation.recipe.LoadedRecipe
    process: list[Node]       # in canonical order
    planned: dict[str, Node] = field(default_factory=dict)   # every node planned so far, by key

    def source(self, name: str):
        return self.loaded.source(name)

    def shards(self, covered: Callable | None = None) -> list[tuple[str, str]]:
        """(source, shard) in canonical order, of the sources `covered` accepts (default: all)."""
        return [(n.source, n.shard) for n in self.process if covered is None or covered(self.source(n.source))]


class CorpusPhase:
    name = "phase"          # also the folder under work/
    step = "dedup"          # the tokenize-chain step that drops what the phase lists
    tables: ClassVar[dict[str, pa.Schema]] = {}

    def applies(self, recipe) -> bool:
        raise TypeError(f"{type(self).__name__} must say whether a recipe uses it")

    def covers(self, src) -> bool:
        raise TypeError(f"{type(self).__name__} must say which sources it removes records from")

    def plan(self, ctx: PlanContext) -> list[list[Node]]:
        """The phase's stages, in order; the last one holds the node(s) that write the drop lists."""
        raise TypeError(f"{type(self).__name__} must plan its stages")

    def node_count(self, recipe, files: dict[str, int]) -> int:
        """How many nodes `plan` builds for `files` input files per source (the plan-size bound is checked
        with it before any node exists: `plan.size`). Beside `plan`, so the two change together; a test
        compares them on every shipped recipe."""
        raise TypeError(f"{type(self).__name__} must say how many nodes it plans")

    def covered_files(self, recipe, files: dict[str, int]) -> int:
        """Input files of the sources the phase covers."""
        return sum(files.get(s.name, 0) for s in recipe.sources if self.covers(s))

    def runners(self) -> dict[str, Callable[[Path, Node], dict]]:
        """Stage name -> task function (out, node) -> marker payload."""
        raise TypeError(f"{type(self).__name__} must name its task functions")

    def partial_reads(self) -> dict[str, Callable[[Node, str], Callable | None]]:
        """Stage name -> (node, an output of one of its deps) -> None when the task reads that file whole, else
        how a task of an output URL fetches just what it reads: a function (remote, rel, local path) writing a
        local file that gives the task the same reads (`curation.core.outloc.Remote.get_pieces`: byte ranges
        into a sparse file; `Remote.get_columns`: some columns of a Parquet file). Used by
        `curation.runtime.publish.fetch`: a file that many tasks each read a part of is then not downloaded
        whole by every one of them."""
        return {}

    def ledger_rows(self, run: str, nodes: list[Node], markers: dict, out: Path, totals: dict) -> dict[str, list[dict]]:
        """Rows of the phase's tables; `totals`: source -> step name -> summed `StepStats` of the run."""
        return {}

    def explain(self, nodes: list[Node]) -> str:
        """One line for `curate explain`: the phase's stages with their task counts and fingerprints."""
        stages: dict[str, list[Node]] = {}
        for n in nodes:
            stages.setdefault(n.phase, []).append(n)
        return " → ".join(f"{stage} {ns[0].fingerprint}" if len(ns) == 1 else f"{len(ns)} {stage} tasks"
                          for stage, ns in stages.items())

    def drop_node(self, stages: list[list[Node]], src) -> Node:
        """The node whose drop lists a source's tokenize tasks read (default: the last stage's only node)."""
        return stages[-1][0]

    # -- shared by the phases -------------------------------------------------
    def write_drops(self, out: Path, shards: list[tuple[str, str]], rows: list[dict]) -> list[str]:
        """One drop list per covered shard from rows with source, shard, id, reason, optionally detail (the
        evidence) and `image` (the index of one image to remove from the record rather than the record);
        returns the paths."""
        per: dict[tuple[str, str], list[tuple]] = {s: [] for s in shards}
        for r in rows:
            per[(r["source"], r["shard"])].append((r["id"], r["reason"], r.get("detail") or "", r.get("image")))
        paths = []
        for (source, shard), drops in per.items():
            path = drops_path(out, self.name, source, shard)
            write_drops(path, drops)
            paths.append(str(path.relative_to(out)))
        return paths


    def write_drop_table(self, out: Path, shard: tuple[str, str], ids, reasons, details) -> str:
        """`write_drops` for one shard from Arrow columns (ids, their reasons or one for all, the evidence of
        each; `steps.droplist.write_drop_columns`); returns the path. The assemblies that write a shard's drops from the resolved parts hold no Python row per record."""
        path = drops_path(out, self.name, *shard)
        write_drop_columns(path, ids, reasons, details)
        return str(path.relative_to(out))


def processed_columns(rel: str, columns: list[str]) -> Callable | None:
    """For `CorpusPhase.partial_reads`: fetch only `columns` of a processed shard (ids, metadata), not its
    text; None for any other output."""
    if not is_processed_table(rel):
        return None
    return lambda remote, rel, local: remote.get_columns(rel, local, columns)
