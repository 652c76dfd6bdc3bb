"""The driver's local copy of an output URL, for the work that follows the tasks (ledger, manifests,
Megatron hand-off, report), and its upload.

`mirror_dir(url)` is one folder per URL on this machine. A task that runs on the driver's machine moves
its published outputs there (`adopt`), so the driver reads them without downloading, and so does a later
task on this machine that reads them (`copy_held`, instead of a request to the store per file); `pull` fetches
what tasks on other machines published (a node's files are current when the mirror holds its marker
as published). The driver then works on the mirror exactly as on a local output, and `push` uploads:

1. every manifest in the store is deleted when the run starts (`retract`), so none names files that
   are being rewritten;
2. the files the driver wrote (ledger, hand-off, report, review, acquired `raw/`), each only when its
   bytes differ from the store's (a re-run that changed nothing uploads nothing but the manifests);
3. files of nodes or stages this run does not have, removed (`stale`);
4. the manifests, last: a manifest in the store means every file it names is there.

Both directions send `publish.TRANSFERS` requests at a time. `pull` fetches only what the driver reads
(`for_the_driver`): not the corpus text, per-shard token parts or any other file that only a later task
reads, which at scale would be the corpus itself on the driver's disk.

Object stores have no links: a stage's `.bin` link to its source's shard is not uploaded; the manifest
names the object it links to (`bin_of`), and `curate verify`/`curate train` recreate the link.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

from curation.core.layout import marker_path
from curation.core.outloc import Remote, staging_root
from curation.runtime.publish import each, marker_rel

NODE_AREAS = ("processed/", "tokenized/", "work/", "quarantine/", "ledger/decisions/")
DRIVER_AREAS = ("ledger/", "manifests/", "megatron/", "handoff/", "reports/", "review/")
KEEP = (".curate-lock", ".curate-recipe.json")
# node outputs that only other tasks read, never the driver (ledger, manifests, hand-off, report): the processed
# text, per-shard token parts and domain counts (the merge task's inputs), MinHash signatures, edges, clustering
# rounds and drop lists, exact dedup's keys, hash ranges and rounds, decontamination's index and flags, selection
# scores, near-duplicate drop lists. What the driver does read of `work/`: the merged domain counts and the
# clusters and duplicates tables the ledger copies (checked by tracing every shipped recipe's finish).
TASKS_ONLY = re.compile(r"processed/|tokenized/[^/]+/parts/|work/tokenize/domains/[^/]+/|"
                        r"work/(minhash/(sig|edges|cc|drops)/|exact/|decont/|select/|image_near/drops/|audio_near/drops/)")


def for_the_driver(rel: str) -> bool:
    """Whether the driver reads this node output (`pull` fetches only those)."""
    return TASKS_ONLY.match(rel) is None


def mirror_dir(url: str) -> Path:
    return staging_root() / f"mirror-{hashlib.sha256(url.encode()).hexdigest()[:16]}"


def adopt(url: str, local: Path, key: str, marker: dict) -> None:
    """Move a published task's outputs into this machine's mirror of `url`, if the driver keeps one here."""
    mirror = mirror_dir(url)
    if not mirror.is_dir():
        return
    for rel in marker.get("outputs", []):
        (mirror / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(local / rel, mirror / rel)
    path = marker_path(mirror, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.replace(marker_path(local, key), path)


def copy_held(url: str, key: str, marker: dict, rels: list[str], local: Path) -> list[str]:
    """Copy into `local` those of dep `key`'s published files `rels` that this machine's mirror of `url` holds as
    published: the mirror holds the dep's marker, equal to the store's `marker` (a task here adopted it, or
    `pull` fetched it), and the file. Returns the files left to download. A copy, not a link: the task owns
    its folder and the mirror's files stay as published whatever it does there."""
    mirror = mirror_dir(url)
    try:
        if json.loads(marker_path(mirror, key).read_text()) != marker:
            return rels
    except (OSError, ValueError):
        return rels
    left = []
    for rel in rels:
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(mirror / rel, local / rel)
        except FileNotFoundError:   # not kept here (`pull` fetches only what the driver reads)
            left.append(rel)
    return left


def _current_here(mirror: Path, key: str, marker: dict) -> bool:
    try:
        here = json.loads(marker_path(mirror, key).read_text())
    except (OSError, ValueError):
        return False
    return here == marker and all((mirror / p).is_file() for p in marker.get("outputs", []) if for_the_driver(p))


def pull(remote: Remote, mirror: Path, markers: dict[str, dict]) -> int:
    """Download the outputs the driver reads (`for_the_driver`) of every node the mirror does not hold as
    published, then their markers (a node is current here once its marker is; `publish.TRANSFERS` requests at
    a time); returns files fetched. Also the training write-backs (`ledger/consumed.parquet`), which outlive
    re-runs."""
    missing = [(key, marker) for key, marker in markers.items() if not _current_here(mirror, key, marker)]
    outputs = [rel for _, marker in missing for rel in marker.get("outputs", []) if for_the_driver(rel)]
    # what is not fetched goes: a copy left by an earlier version of the node would pass for the published
    # file once the marker is here (`copy_held`)
    for rel in (rel for _, marker in missing for rel in marker.get("outputs", []) if not for_the_driver(rel)):
        (mirror / rel).unlink(missing_ok=True)
    each(lambda rel: remote.get(rel, mirror / rel), outputs)
    each(lambda key: remote.get(marker_rel(key), marker_path(mirror, key)), [key for key, _ in missing])
    if remote.cat("ledger/consumed.parquet") is not None:
        remote.get("ledger/consumed.parquet", mirror / "ledger" / "consumed.parquet")
    return len(outputs)


def retract(remote: Remote) -> None:
    """Remove the store's manifests before a run changes what they name."""
    remote.rm([rel for rel in remote.listing("manifests") if rel.count("/") == 1 and rel.endswith(".json")])


def _md5(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def push(remote: Remote, mirror: Path, markers: dict[str, dict]) -> dict[str, int]:
    """Upload the driver's files (manifests last) and remove stale ones; returns counts."""
    owned = {marker_rel(k) for k in markers} | {p for m in markers.values() for p in m.get("outputs", [])}
    files = {str(p.relative_to(mirror)): p for p in mirror.rglob("*")
             if (p.is_file() and not p.is_symlink()) and p.name not in KEEP}
    driver = {rel: p for rel, p in files.items() if rel not in owned and "/cache/" not in rel
              and not rel.startswith("work/")}
    remote_files = remote.objects()
    def is_manifest(rel: str) -> bool:
        return rel.startswith("manifests/") and rel.count("/") == 1

    def changed(rel: str) -> bool:
        have, path = remote_files.get(rel), driver[rel]
        return not (have and int(have.get("size", -1)) == path.stat().st_size and
                    str(have.get("ETag", "")).strip('"') == _md5(path))
    others = [rel for rel in sorted(driver) if not is_manifest(rel)]
    uploads = [rel for rel, differs in zip(others, each(changed, others), strict=True) if differs]
    each(lambda rel: remote.put(driver[rel], rel), uploads)
    stale = [rel for rel in remote_files if rel not in owned and rel not in driver and rel not in KEEP
             and rel.startswith(NODE_AREAS + DRIVER_AREAS)]
    remote.rm(sorted(stale))
    manifests = [rel for rel in sorted(driver) if is_manifest(rel)]   # last: each names files now there
    each(lambda rel: remote.put(driver[rel], rel), manifests)
    return {"uploaded": len(uploads), "removed": len(stale), "manifests": len(manifests)}


def clear(mirror: Path) -> None:
    shutil.rmtree(mirror, ignore_errors=True)
