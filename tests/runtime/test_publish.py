"""A task of an output URL talks to the store `TRANSFERS` requests at a time (`curation.runtime.publish`):
its deps' markers and files are fetched concurrently, whole files before the ones it reads in part, its
outputs uploaded concurrently and its marker only after every one of them; the first failure is raised."""
from __future__ import annotations

import json
import threading
import time

import fsspec
import pytest

from curation.core.node import Node
from curation.core.outloc import Remote
from curation.runtime import publish
from curation.runtime.mirror import copy_held, mirror_dir, pull


class Watch:
    """Requests to the in-memory store, each held for a moment: how many overlapped, and their order."""

    def __init__(self, monkeypatch):
        self.lock, self.now, self.most, self.log = threading.Lock(), 0, 0, []
        cls = type(fsspec.filesystem("memory"))
        for name in ("cat_file", "get_file", "put_file"):
            monkeypatch.setattr(cls, name, self._held(name, getattr(cls, name)))

    def _held(self, name, fn):
        def held(fs, path, *a, **kw):
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
            try:
                time.sleep(0.02)
                result = fn(fs, path, *a, **kw)
            finally:
                with self.lock:
                    self.now -= 1
                    self.log.append((name, path if name != "put_file" else a[0]))
            return result
        return held


def _store(tmp_path, n: int) -> tuple[Remote, list[str]]:
    fs, root = fsspec.filesystem("memory"), f"pub-{tmp_path.name}/run"
    deps = []
    for k in range(n):
        key = f"signatures/s/{k:03d}"
        fs.pipe_file(f"{root}/work/x/{k:03d}.bin", bytes([k]) * 100)
        fs.pipe_file(f"{root}/work/markers/{key}.json", json.dumps({"outputs": [f"work/x/{k:03d}.bin"]}).encode())
        deps.append(key)
    return Remote(f"memory://{root}"), deps


def test_a_tasks_fetches_overlap_and_bring_every_file(tmp_path, monkeypatch):
    remote, deps = _store(tmp_path, 12)
    watch = Watch(monkeypatch)
    got = publish.fetch(remote, Node("band", None, "000-000", "fp", deps=deps), tmp_path / "local")
    assert len(got) == 24 and all((tmp_path / "local" / f"work/x/{k:03d}.bin").read_bytes() == bytes([k]) * 100
                                  for k in range(12))
    assert 1 < watch.most <= publish.TRANSFERS
    monkeypatch.setattr(publish, "TRANSFERS", 1)    # one at a time: the same files
    watch.most = 0
    assert publish.fetch(remote, Node("band", None, "000-000", "fp", deps=deps), tmp_path / "one") == got
    assert watch.most == 1


def test_whole_files_are_fetched_before_the_parts_that_may_read_them(tmp_path, monkeypatch):
    remote, deps = _store(tmp_path, 6)
    seen = []

    def partial(rel):
        if not rel.endswith(("001.bin", "003.bin")):
            return None

        def part(remote, rel, local):   # a part's fetch reads the whole files beside it, as exact_part's does
            seen.append(sorted(p.name for p in local.parent.glob("*.bin")))
            local.write_bytes(remote.cat(rel)[:10])
        return part
    publish.fetch(remote, Node("band", None, "000-000", "fp", deps=deps), tmp_path / "local", partial)
    assert seen and all({"000.bin", "002.bin", "004.bin", "005.bin"} <= set(names) for names in seen)
    assert (tmp_path / "local" / "work/x/001.bin").read_bytes() == bytes([1]) * 10


def test_the_marker_is_uploaded_after_every_output(tmp_path, monkeypatch):
    remote, _ = _store(tmp_path, 0)
    local = tmp_path / "local"
    outputs = [f"work/y/{k}.bin" for k in range(10)]
    for rel in outputs:
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_bytes(b"x")
    node = Node("band", None, "000-001", "fp")
    marker = {"outputs": outputs}
    (local / publish.marker_rel(node.key)).parent.mkdir(parents=True, exist_ok=True)
    (local / publish.marker_rel(node.key)).write_text(json.dumps(marker))
    watch = Watch(monkeypatch)
    publish.publish(remote, local, node, marker, set())
    puts = [path for name, path in watch.log if name == "put_file"]
    assert len(puts) == 11 and puts[-1].endswith(f"markers/{node.key}.json") and watch.most > 1


def test_the_first_failure_is_raised_after_the_calls_in_flight_end_and_no_new_one_starts():
    ended = []

    def fn(x):
        time.sleep(0.01 * (x % 8))
        ended.append(x)
        if x in (2, 5):
            raise ValueError(x)
        return x
    with pytest.raises(ValueError, match="2"):   # 8 of 16 run at once: both fail, the first in order is raised
        publish.each(fn, range(8))
    assert sorted(ended) == list(range(8))
    ended.clear()
    with pytest.raises(ValueError):   # 200 items: none starts once one has failed
        publish.each(fn, range(200))
    assert len(ended) <= 3 * publish.TRANSFERS
    assert publish.each(lambda x: x * 2, range(500)) == [x * 2 for x in range(500)]


def test_at_most_twice_the_transfers_are_queued(monkeypatch):
    import concurrent.futures
    submitted, real = [], concurrent.futures.ThreadPoolExecutor.submit
    monkeypatch.setattr(concurrent.futures.ThreadPoolExecutor, "submit",
                        lambda self, fn, *a: submitted.append(len(submitted)) or real(self, fn, *a))
    live = []

    def fn(x):
        live.append(len(submitted) - x)   # submitted but not yet started or finished, counting this one
        return x
    assert publish.each(fn, range(1000)) == list(range(1000))
    assert len(submitted) == 1000 and max(live) <= 2 * publish.TRANSFERS


def test_an_interrupt_stops_without_running_the_queued_calls(monkeypatch):
    """An interrupt while `each` waits (what Ray's cancel sends the task's thread; raised here by the wait
    itself, so that no signal reaches a pytest-xdist worker's other threads): the queued calls never start."""
    ended, waits, real_wait = [], [], publish.wait

    def interrupted(futures, return_when):
        waits.append(1)
        if len(waits) == 2:
            raise KeyboardInterrupt
        return real_wait(futures, return_when=return_when)
    monkeypatch.setattr(publish, "wait", interrupted)

    def fn(x):
        time.sleep(0.05)
        ended.append(x)
    with pytest.raises(KeyboardInterrupt):
        publish.each(fn, range(320))
    time.sleep(0.3)   # the calls in flight end by now; the queued ones were cancelled
    assert 0 < len(ended) <= 2 * publish.TRANSFERS + 1


def test_skip_checks_read_the_stores_state_once_and_agree_with_the_store(tmp_path, monkeypatch):
    """A re-run's skip check per node, from one listing and the markers read at once as the run starts:
    the same answer as asking the store node by node, and no request per node."""
    from curation.runtime.node import digest
    fs, root = fsspec.filesystem("memory"), f"state-{tmp_path.name}/run"
    url = f"memory://{root}"
    nodes = {name: Node("signatures", "s", name, f"fp-{name}") for name in ("whole", "missing", "moved", "none")}
    for name, node in nodes.items():
        if name == "none":
            continue
        outputs = [f"work/sig/{name}.a", f"work/sig/{name}.b"]
        for rel in outputs[: 1 if name == "missing" else 2]:
            fs.pipe_file(f"{root}/{rel}", b"x")
        fingerprint = "old" if name == "moved" else node.fingerprint
        fs.pipe_file(f"{root}/{publish.marker_rel(node.key)}",
                     json.dumps({"fingerprint": fingerprint, "outputs": outputs}).encode())
    live = {name: publish.current_remote(url, node, digest) for name, node in nodes.items()}
    state = publish.StoreState(Remote(url), [n.key for n in nodes.values()])
    cls = type(fs)

    def no_request(*a, **kw):
        raise AssertionError("a request per node")
    for name in ("cat_file", "exists", "info", "get_file"):
        monkeypatch.setattr(cls, name, no_request)
    assert {name: publish.current_remote(url, node, digest, state) for name, node in nodes.items()} == live
    assert [name for name, marker in live.items() if marker] == ["whole"]


def test_a_file_this_machine_holds_as_published_is_copied_not_downloaded(tmp_path, monkeypatch):
    """The driver's mirror holds dep 000 as published (its marker equal to the store's), dep 001 under an
    older marker, dep 002's marker without its file (`pull` fetches only what the driver reads): only 000's
    file is copied; the others are downloaded, and a file read in part is fetched in part whatever the mirror
    holds."""
    monkeypatch.setenv("CURATE_STAGING", str(tmp_path / "staging"))
    remote, deps = _store(tmp_path, 4)
    fs, mirror = fsspec.filesystem("memory"), mirror_dir(remote.url)
    for k, marker in [(0, None), (1, {"outputs": ["work/x/001.bin"], "fingerprint": "older"}), (2, None), (3, None)]:
        key = deps[k]
        stored = json.loads(fs.cat_file(remote.key(publish.marker_rel(key))))
        (mirror / publish.marker_rel(key)).parent.mkdir(parents=True, exist_ok=True)
        (mirror / publish.marker_rel(key)).write_text(json.dumps(marker or stored))
        if k != 2:
            (mirror / f"work/x/{k:03d}.bin").parent.mkdir(parents=True, exist_ok=True)
            (mirror / f"work/x/{k:03d}.bin").write_bytes(b"mirror")
    watch = Watch(monkeypatch)
    partial = lambda rel: (lambda r, rel, local: local.write_bytes(r.cat(rel)[:3])) if rel.endswith("003.bin") else None  # noqa: E731
    publish.fetch(remote, Node("band", None, "000-000", "fp", deps=deps), tmp_path / "local", partial, copy_held)
    local = tmp_path / "local" / "work" / "x"
    assert [(local / f"{k:03d}.bin").read_bytes() for k in range(4)] == [b"mirror", b"\1" * 100, b"\2" * 100, b"\3" * 3]
    assert sorted(path.rsplit("/", 1)[1] for name, path in watch.log if name == "get_file") == ["001.bin", "002.bin"]
    (local / "000.bin").write_bytes(b"changed by the task")      # a copy: the mirror keeps what was published
    assert (mirror / "work/x/000.bin").read_bytes() == b"mirror"


def test_pull_removes_a_tasks_only_file_it_does_not_fetch(tmp_path, monkeypatch):
    """A node published elsewhere since this machine last held it: `pull` fetches the files the driver reads and
    removes the others' old copies, so no later task copies them from the mirror as published."""
    monkeypatch.setenv("CURATE_STAGING", str(tmp_path / "staging"))
    fs, root = fsspec.filesystem("memory"), f"pull-{tmp_path.name}/run"
    remote, key = Remote(f"memory://{root}"), "process/s/000"
    marker = {"fingerprint": "new", "outputs": ["processed/s/000.parquet", "ledger/decisions/s/000.parquet"]}
    for rel in marker["outputs"]:
        fs.pipe_file(f"{root}/{rel}", b"new")
    fs.pipe_file(f"{root}/{publish.marker_rel(key)}", json.dumps(marker).encode())
    mirror = mirror_dir(remote.url)
    for rel in marker["outputs"]:
        (mirror / rel).parent.mkdir(parents=True, exist_ok=True)
        (mirror / rel).write_bytes(b"old")
    pull(remote, mirror, {key: marker})
    assert not (mirror / "processed/s/000.parquet").exists()
    assert (mirror / "ledger/decisions/s/000.parquet").read_bytes() == b"new"
    assert copy_held(remote.url, key, marker, ["processed/s/000.parquet"], tmp_path / "task") == \
        ["processed/s/000.parquet"]
