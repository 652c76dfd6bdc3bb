"""A node of the run's graph: one task of one phase, with its fingerprint.

`phase` names the task function (`process`, `tokenize`, `merge`, or a corpus phase's stage such as
`band`); `spec` holds plain, JSON-able data the task needs (it travels to Ray workers); `deps` are
the keys of the nodes whose outputs it reads. The fingerprint covers the settings the node reads,
its inputs' content and the fingerprints of those nodes, so a completion marker with the same
fingerprint means the outputs are current and a re-run skips the node. `resources` is what the node's
task asks the scheduler for (`curation.core.resources.Resources` as JSON; empty: one CPU); it is not part
of the fingerprint, since where a task runs is not what it writes (the device's precision is, through the
encoder's settings).

A partitioned phase's tasks each read every shard, so a plan's dependency edges can number shards ×
partitions: sibling nodes share one `deps` list (never modified after planning) and one key string per
node, and the scheduler counts a shared list once (`curation.runtime.schedule`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from curation import __version__

CODE_EPOCH = __version__  # outputs of a different curate version are recomputed


@dataclass
class Node:
    phase: str
    source: str | None
    shard: str | None
    fingerprint: str
    deps: list[str] = field(default_factory=list)
    spec: dict = field(default_factory=dict)
    resources: dict = field(default_factory=dict)

    @cached_property
    def key(self) -> str:   # one string per node, however many deps lists name it
        return "/".join(p for p in (self.phase, self.source, self.shard) if p)
