"""`run_node`: the one task function every executor runs, whatever the phase or modality.

It finds the node's task (a record-pipeline task, or a corpus-wide phase's stage from the phase
table), runs it, and writes the node's completion marker: its fingerprint, its digest when it has
one (`curation.plan.fingerprint`) and the task's counts. `current` decides whether a node's outputs
from an earlier run can stand.
"""
from __future__ import annotations

from pathlib import Path

from curation.core.markers import read_marker, write_marker
from curation.core.node import Node
from curation.core.outloc import is_remote
from curation.plan.fingerprint import digest
from curation.plan.phases import stage_partial_reads, stage_runners
from curation.runtime.fanout import spreading
from curation.runtime.tasks import RECORD_TASKS

_RUNNERS: dict = {}
_PARTIAL: dict = {}


def task_for(phase: str):
    if not _RUNNERS:
        _RUNNERS.update(RECORD_TASKS, **stage_runners())
    return _RUNNERS[phase]


def partial_reads(node: Node):
    """rel -> what the node reads of that dep output when it reads only part of it, else None
    (`curation.corpus.base.CorpusPhase.partial_reads`); None for a node that reads every file whole."""
    if not _PARTIAL:
        _PARTIAL.update(stage_partial_reads())
    which = _PARTIAL.get(node.phase)
    return None if which is None else (lambda rel: which(node, rel))


def run_node(out: str, node: Node) -> dict:
    """Run the node's task into `out` and mark it complete. `out` may be an output URL: then the task runs
    in a local staging folder and publishes its outputs (`curation.runtime.publish`)."""
    if is_remote(out):
        from curation.runtime.mirror import adopt, copy_held
        from curation.runtime.publish import run_staged
        with spreading(False):   # the staging folder is this machine's: no other node could write into it
            return run_staged(out, node, _run_here, adopt, partial_reads(node), copy_held)
    return _run_here(Path(out), node)


def _run_here(out_dir: Path, node: Node) -> dict:
    payload = task_for(node.phase)(out_dir, node)
    d = digest(out_dir, node)
    return write_marker(out_dir, node.key, node.fingerprint, {**payload, **({"digest": d} if d else {})})


def current(out: Path | str, node: Node, state=None) -> dict | None:
    """The node's marker if its outputs are current: same fingerprint, or same digest (then the marker is
    rewritten with the new fingerprint), and every output file still there (`out` may be an output URL;
    `state`: its `publish.StoreState` as the run started)."""
    if is_remote(out):
        from curation.runtime.publish import current_remote
        return current_remote(out, node, digest, state)
    marker = read_marker(out, node.key, node.fingerprint)
    if marker is None:
        old = read_marker(out, node.key, None)
        d = old and old.get("digest") and digest(out, node)
        if not d or old.get("digest") != d:
            return None
        marker = write_marker(out, node.key, node.fingerprint, {k: v for k, v in old.items() if k != "fingerprint"})
    if all((out / p).exists() for p in marker.get("outputs", [])):
        return marker
    return None
