"""`curate verify URL` and `curate train URL`: a manifest in an object store, read through a local cache.

`fetch_manifest("s3://bucket/out/manifests/stage1.json")` downloads into one cache folder per output
URL (`CURATE_CACHE`, else `~/.cache/curate/<hash>/`, laid out like the output folder):

- the manifest;
- every file it names (`path` entries: shards, sampling plans, the stage's hand-off files and indexes),
  skipping one already cached with the recorded sha256;
- the whole `ledger/` folder (Parquet tables, `ledger.duckdb`, `decisions/`), which verify compares.

A stage index's `.bin` is not in the store (object stores have no links; `curation.runtime.mirror`): it
is recreated as a link to the source's shard the manifest names in `bin_of`. Then the hand-off's files
are rewritten for the cache's location (`relocate_handoff`: the
manifest's digests are location-independent), and verification runs on the cache as on any folder.
`curate train` writes its consumed tokens into the cache's ledger; `publish_writeback` uploads that
ledger's `consumed.parquet` and `ledger.duckdb` to the output, under the output's lock.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from curation.core.hashing import sha256_file
from curation.core.outloc import Remote
from curation.errors import CurateError


def cache_dir(out_url: str) -> Path:
    root = Path(os.environ.get("CURATE_CACHE") or Path("~/.cache/curate").expanduser())
    return root / hashlib.sha256(out_url.encode()).hexdigest()[:16]


def _named(obj, found: dict[str, str | None]) -> None:
    """Every `path` in the manifest (relative to its folder), with its sha256 where recorded."""
    if isinstance(obj, dict):
        if isinstance(obj.get("path"), str):
            found.setdefault(obj["path"], obj.get("sha256"))
        for v in obj.values():
            _named(v, found)
    elif isinstance(obj, list):
        for v in obj:
            _named(v, found)


def fetch_manifest(url: str) -> Path:
    """Download what verifying (and training on) the manifest at `url` reads; returns the local manifest."""
    head, sep, name = url.rpartition("/manifests/")
    if not sep or "/" in name or not name.endswith(".json"):
        raise CurateError(f"{url}: not a manifest URL; give OUT_URL/manifests/STAGE.json")
    remote = Remote(head)
    data = remote.cat(f"manifests/{name}")
    if data is None:
        raise CurateError(f"{url}: no such object; a run publishes its manifests last, so a run into {head} has "
                          f"not finished (or failed its checks)")
    local = cache_dir(head)
    mdir = local / "manifests"
    try:
        m = json.loads(data)
        files: dict[str, str | None] = {}
        _named(m, files)
        links = {p["prefix"] + ".bin": p["bin_of"] for p in m["megatron"]["prefixes"] if p.get("bin_of")}
    except (ValueError, KeyError, TypeError, AttributeError):
        m, files, links = None, {}, {}   # not a manifest: verify says what is wrong with it
    for rel, sha in sorted(files.items()):
        path = Path(os.path.normpath(mdir / rel))
        if not path.is_relative_to(local):
            raise CurateError(f"{url}: names {rel}, outside its output; refusing to download it")
        if rel in links:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)
            os.symlink(os.path.relpath(mdir / links[rel], path.parent), path)
            continue
        if path.is_file() and sha and sha256_file(path) == sha:
            continue
        remote.get(os.path.relpath(path, local), path)
    for rel in remote.listing("ledger"):
        remote.get(rel, local / rel)
    target = mdir / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    from curation.mixture.signing import signature_path
    sig, sig_path = remote.cat(f"manifests/{Path(name).with_suffix('.sig')}"), signature_path(target)
    if sig is None:
        sig_path.unlink(missing_ok=True)       # a signature of an earlier fetch is not this manifest's
    else:
        sig_path.write_bytes(sig)
    if m is not None:
        from curation.mixture.handoffs import relocate_handoff
        relocate_handoff(target)
    return target


def publish_writeback(url: str, local_manifest: Path) -> str:
    """Upload the ledger a training run wrote its consumed tokens into (`consumed.parquet` and the
    `ledger.duckdb` that must agree with it) from the cache to the output URL, holding the output's lock;
    returns what was done, as a sentence."""
    from curation.core.outlock import OutputLock

    head = url.rpartition("/manifests/")[0]
    ledger = local_manifest.parent.parent / "ledger"
    lock = OutputLock(head, recipe="(curate train write-back)")
    try:
        lock.acquire()
    except CurateError as e:
        return f"consumed tokens are in {ledger}, not written back to {head}: {e}"
    try:
        remote = Remote(head)
        for name in ("consumed.parquet", "ledger.duckdb"):
            remote.put(ledger / name, f"ledger/{name}")
    finally:
        lock.release()
    return f"consumed tokens written back to {head}/ledger"
