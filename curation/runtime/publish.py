"""Tasks of a run whose output is a URL: each one stages locally, then publishes.

A task runs in a fresh local folder that holds only what it reads: the completion markers of its
`deps` and the files they list (`fetch`; of a phase's per-shard drop lists, a task of one shard takes
its own; a file this machine already holds as published, in the driver's mirror, is copied from there
instead of downloaded). So a task needs no shared disk, and a task that read a file no dep lists fails here rather
than on a cluster. It runs exactly as for a local output, with that folder as `out`, then `publish`
uploads every file its marker lists, removes what its previous marker listed and this one does not,
and uploads the marker last: a marker in the store means every file it lists is there. A task that
dies before that leaves no marker and is simply run again.

A file the task wrote that its marker does not list is a bug in the task (it would be lost, or read
by no one through the store) and fails the run.

Requests to the store run `TRANSFERS` at a time (the deps' markers, the files, the uploads, the checks
that a marker's files are there): an object store answers each request after a round trip of tens of
milliseconds, and a task of a partitioned phase reads a piece of every shard (tests/benchmarks/
bench_store_latency.py). The marker is still uploaded only after every file it lists.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from curation.core.layout import marker_path
from curation.core.node import Node
from curation.core.outloc import Remote, staging_root
from curation.errors import CurateError

_DROPS = re.compile(r"^work/[^/]+/drops/([^/]+)/([^/]+)\.parquet$")
TRANSFERS = 16   # requests in flight per task (S3 serves thousands per second per prefix)


def each(fn: Callable, items: Iterable, transfers: int | None = None) -> list:
    """`[fn(x) for x in items]` with up to `transfers` (default TRANSFERS) calls at once, and at most twice that
    many queued (a million items do not become a million futures). After a call fails no new call starts;
    the first error in `items` order is raised once the calls in flight have ended. An interrupt (Ray's
    cancel) stops at once: queued calls are dropped and the ones in flight are not waited for."""
    items = list(items)
    limit = TRANSFERS if transfers is None else transfers
    if limit <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    results: list = [None] * len(items)
    failed: dict[int, Exception] = {}
    running: dict[Future, int] = {}
    pool = ThreadPoolExecutor(min(limit, len(items)))
    try:
        start = 0
        while running or (start < len(items) and not failed):
            while start < len(items) and not failed and len(running) < 2 * limit:
                running[pool.submit(fn, items[start])] = start
                start += 1
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                i = running.pop(future)
                if future.cancelled():
                    continue
                try:
                    results[i] = future.result()
                except Exception as e:
                    failed[i] = e
                    for queued in running:   # those not started yet never start
                        queued.cancel()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    if failed:
        raise failed[min(failed)]
    return results


def marker_rel(key: str) -> str:
    return f"work/markers/{key}.json"


def remote_marker(remote: Remote, key: str) -> dict | None:
    data = remote.cat(marker_rel(key))
    try:
        return json.loads(data) if data is not None else None
    except ValueError:
        return None


def reads(node: Node, output: str) -> bool:
    """Whether `node` reads a dep's `output`: everything, but of per-shard drop lists only its own shard's."""
    m = _DROPS.match(output)
    return m is None or node.shard is None or (m.group(1), m.group(2)) == (node.source, node.shard)


def fetch(remote: Remote, node: Node, local: Path, partial: Callable[[str], Callable | None] | None = None,
          copies: Callable[[str, str, dict, list[str], Path], list[str]] | None = None) -> set[str]:
    """Download the node's deps' markers and the files it reads of theirs into `local`; returns them.
    `partial(rel)`: for a file the task reads only part of, how to fetch that part
    (`curation.corpus.base.CorpusPhase.partial_reads`), else None. `copies(url, key, marker, rels, local)`: puts
    the files of dep `key` that this machine holds as published into `local` and returns the others, which
    are downloaded (`curation.runtime.mirror.copy_held`)."""
    got: set[str] = set()
    wanted: list[str] = []
    owner: dict[str, str] = {}   # rel -> the dep that lists it
    markers = dict(zip(node.deps, each(lambda k: remote_marker(remote, k), node.deps), strict=True))
    for key, marker in markers.items():
        if marker is None:
            raise CurateError(f"task {node.key} reads the outputs of {key}, which has no completion marker in "
                              f"{remote.url}; re-run to produce it")
        path = marker_path(local, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(marker))
        got.add(marker_rel(key))
        for rel in marker.get("outputs", []):
            if reads(node, rel) and rel not in got:
                wanted.append(rel)
                got.add(rel)
                owner[rel] = key

    # whole files first, then the parts: how a part is fetched may depend on a whole file beside it (an
    # `exact_part` task reads a shard's range index to know which rows of its keys to fetch)
    parts = {rel: partial(rel) for rel in wanted} if partial is not None else {}
    whole = [rel for rel in wanted if parts.get(rel) is None]
    if copies is not None:   # a file read in part is always fetched in part: a task reading more fails here too
        by_dep: dict[str, list[str]] = {}
        for rel in whole:
            by_dep.setdefault(owner[rel], []).append(rel)
        left = {rel for key, rels in by_dep.items() for rel in copies(remote.url, key, markers[key], rels, local)}
        whole = [rel for rel in whole if rel in left]
    each(lambda rel: remote.get(rel, local / rel), whole)
    each(lambda rel: parts[rel](remote, rel, local / rel), [rel for rel in wanted if parts.get(rel) is not None])
    return got


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def publish(remote: Remote, local: Path, node: Node, marker: dict, fetched: set[str]) -> None:
    """Upload the task's outputs, remove its stale ones, then its marker."""
    outputs = list(marker.get("outputs", []))
    unlisted = sorted(_files(local) - fetched - set(outputs) - {marker_rel(node.key)})
    if unlisted:
        raise RuntimeError(f"task {node.key} wrote files its completion marker does not list: {unlisted[:5]}")
    each(lambda rel: remote.put(local / rel, rel), outputs)
    old = remote_marker(remote, node.key)
    stale = sorted(set(old.get("outputs", [])) - set(outputs)) if old else []
    remote.rm(stale)
    remote.put(marker_path(local, node.key), marker_rel(node.key))


def run_staged(url: str, node: Node, run: Callable[[Path, Node], dict], adopt: Callable | None = None,
               partial: Callable[[str], Callable | None] | None = None, copies: Callable | None = None) -> dict:
    """`run(local_out, node)` (which writes the marker there) in a staging folder, then publish; `adopt`
    may keep the published files on this machine (the driver's mirror); `partial` and `copies`: see `fetch`."""
    remote = Remote(url)
    root = staging_root()
    root.mkdir(parents=True, exist_ok=True)
    local = Path(tempfile.mkdtemp(dir=root, prefix=f"task-{os.getpid()}-"))
    try:
        fetched = fetch(remote, node, local, partial, copies)
        marker = run(local, node)
        publish(remote, local, node, marker, fetched)
        if adopt is not None:
            adopt(url, local, node.key, marker)
        return marker
    finally:
        shutil.rmtree(local, ignore_errors=True)


class StoreState:
    """What the store holds as a run starts: every object (one listing) and the markers of the plan's nodes
    that have one (`TRANSFERS` at a time). A node's skip check reads only its own marker and outputs, which
    only its own task writes, so this state, read before any task runs, is what the check would read from
    the store; the driver then checks a node without a round trip (a re-run of a million nodes made two or
    more, one node after another)."""

    def __init__(self, remote: Remote, keys: list[str]):
        self.objects = set(remote.listing())
        have = [k for k in keys if marker_rel(k) in self.objects]
        self.markers = dict(zip(have, each(lambda k: remote_marker(remote, k), have), strict=True))


def current_remote(url: str, node: Node, digest: Callable[[Path, Node], str | None],
                   state: StoreState | None = None) -> dict | None:
    """`curation.runtime.node.current` for an output URL: the marker in the store, if its outputs are there
    (read from `state` when the run read it as it started)."""
    from curation.core.markers import write_marker

    remote = Remote(url)
    marker = state.markers.get(node.key) if state is not None else remote_marker(remote, node.key)
    if marker is None:
        return None
    if marker.get("fingerprint") != node.fingerprint:
        if not marker.get("digest"):
            return None
        root = staging_root()
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=root, prefix="digest-") as tmp:
            try:
                fetch(remote, node, Path(tmp))
            except CurateError:
                return None
            if digest(Path(tmp), node) != marker["digest"]:
                return None
            marker = write_marker(Path(tmp), node.key, node.fingerprint,
                                  {k: v for k, v in marker.items() if k != "fingerprint"})
            remote.put(marker_path(Path(tmp), node.key), marker_rel(node.key))
    outputs = marker.get("outputs", [])
    if state is not None:
        there = all(p in state.objects for p in outputs)
    else:
        fs = remote.fs
        there = all(each(lambda p: fs.exists(remote.key(p)), outputs))
    return marker if there else None
