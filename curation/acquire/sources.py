"""The raw/ layer: sources with `acquire:` are unpacked, copied or downloaded into
`<out>/raw/<source>/` before the run is planned; `input.paths` then name files in that folder.

- `archive`: a tar/zip extracted with `curation.acquire.archives.extract` into `files/`, member by
  member: a hostile member (traversal, absolute path, link, device, ...) is refused and counted as
  `refused:<reason>` (listed in `refused`), the others kept; size/count/ratio limits and a corrupt
  archive stop it whole. What was fetched = the archive: its sha256 is recorded.
- `fsspec`: every file matching an fsspec URL glob is copied into `files/`; the recorded sha256 is
  over the sorted (name, sha256) list. A Hugging Face snapshot path (`.../snapshots/<commit>/`)
  pins its revision, which must match the source's `revision` when both are given.
- `urls`: a URL list (`.txt` one URL per line, or `.jsonl` objects with `url_field` and metadata)
  downloaded by `Fetcher` behind the recipe's network guard into `fetched/` (resumable). A text
  source also gets `documents.jsonl` (id, url, text, metadata; HTML reduced to its main text with
  trafilatura); an image source gets WebDataset tars `images-NNNNN.tar` (`curation.acquire.pack`),
  one sample per downloaded body with the entry's fields. Every URL ends as `ok`, `refused:<reason>` or `failed:<reason>`; the counts, and the
  sha256 over the sorted (url, body sha256) list, are recorded.
- `audio_folder`: the audio files under a local folder copied, with `clips.jsonl` (sidecar `.txt`
  transcripts; sub-folder = recording; sorted position = clip order) for `input.format: audio`.
- `image_folder`: the images under a local folder, with sidecar captions, packed into WebDataset
  tars `images-NNNNN.tar` the same way.
  Both read only inside the folder and `input.allow_roots` (`curation.core.contain`): a clip, image or
  sidecar that is a link out is refused with its sample (`refused:link_outside_input`, listed).

`<out>/raw/<source>/acquired.json` holds that record (the ledger's `acquisition` rows and the
`sources.fetched_sha256` column are read from it; a `urls` record also lists the threat feeds it
was checked against, with format and entry counts: `curation.acquire.feeds.feed_rows`). An archive acquisition whose spec and archive
are unchanged is reused as is; fsspec sources are copied again on every run (their listing is the
only way to know they did not change).
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from pathlib import Path, PurePosixPath

from curation.core.atomic import atomic_write_json
from curation.core.hashing import fingerprint, sha256_file
from curation.core.layout import raw_dir
from curation.errors import InputError
from curation.recipe.load import LoadedRecipe

RECORD = "acquired.json"


def read_acquired(raw_root: Path, source: str) -> dict | None:
    path = raw_dir(raw_root, source) / RECORD
    return json.loads(path.read_text()) if path.is_file() else None


def _write(folder: Path, record: dict) -> dict:
    atomic_write_json(folder / RECORD, record)
    return record


def _listing_sha(pairs: list[tuple[str, str]]) -> str:
    return hashlib.sha256("".join(f"{a}\0{b}\n" for a, b in sorted(pairs)).encode()).hexdigest()


def guard_for(loaded: LoadedRecipe, raw_root: Path, resolver=None):
    """The run's guard. Feeds given as URLs are fetched afresh each run, by a guard that checks scheme
    and resolution only (no lists exist yet), into `raw/_feeds/`. Each feed's format (declared or
    detected) and entry counts are printed, and kept in `guard.lists.feeds` for the ledger."""
    from curation.acquire.fetch import Fetcher, FetchPolicy
    from curation.acquire.netguard import (
        AccessLists,
        Guard,
        load_feeds,
        system_resolver,
    )
    resolver = resolver or system_resolver
    feeds = []
    for f in loaded.recipe.network.feeds:
        spec = {"format": f.format, "min_entry_share": f.min_entry_share, "name": f.path or f.url}
        if f.path is not None:
            feeds.append(spec | {"path": str(loaded.resolve(f.path))})
            continue
        bootstrap = Fetcher(Guard(AccessLists.compile([]), resolver), FetchPolicy(max_retries=2))
        result, body = bootstrap.fetch(f.url)  # fresh every run: feeds change daily
        if body is None:
            raise InputError(f"threat feed {f.url} could not be fetched ({result.status}: {result.reason}); "
                             f"download it and give its path instead")
        path = raw_root / "_feeds" / f"{result.sha256[:16]}.feed"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        feeds.append(spec | {"path": str(path)})
    lists = load_feeds(feeds)
    for record in lists.feeds:
        how = "detected" if record["declared_format"] == "auto" else "declared"
        print(f"threat feed {record['feed']}: {record['format']} ({how}): {record['networks']} networks, "
              f"{record['hosts']} hosts, {record['url_prefixes']} URL prefixes", file=sys.stderr)
    return Guard(lists, resolver=resolver)


def acquire_all(loaded: LoadedRecipe, raw_root: Path, resolver=None) -> dict[str, dict]:
    """Acquire every source that has `acquire:`; returns source -> its acquired.json record."""
    done, guard = {}, None
    for src in loaded.recipe.sources:
        if src.acquire is None:
            continue
        folder = raw_dir(raw_root, src.name)
        folder.mkdir(parents=True, exist_ok=True)
        spec = src.acquire.model_dump(mode="json")
        if src.acquire.kind == "urls":
            guard = guard or guard_for(loaded, raw_root, resolver)
            done[src.name] = _urls(loaded, src, folder, spec, guard)
        elif src.acquire.kind == "archive":
            done[src.name] = _archive(loaded, src, folder, spec)
        elif src.acquire.kind == "image_folder":
            done[src.name] = _image_folder(loaded, src, folder, spec)
        elif src.acquire.kind == "audio_folder":
            done[src.name] = _audio_folder(loaded, src, folder, spec)
        else:
            done[src.name] = _fsspec(loaded, src, folder, spec)
    return done


def _archive(loaded: LoadedRecipe, src, folder: Path, spec: dict) -> dict:
    from curation.acquire.archives import extract
    archive = loaded.resolve(src.acquire.path)
    if not archive.is_file():
        raise InputError(f"source {src.name!r}: archive {archive} does not exist; fix acquire.path")
    sha = sha256_file(archive)
    key = fingerprint({"spec": spec, "sha256": sha})
    previous = read_acquired(folder.parent, src.name)
    if previous and previous.get("key") == key and (folder / "files").is_dir():
        return previous
    shutil.rmtree(folder / "files", ignore_errors=True)
    result = extract(archive, folder / "files", max_total_bytes=src.acquire.max_archive_bytes)
    return _write(folder, {"key": key, "source": src.name, "kind": "archive", "origin": src.acquire.path,
                           "origin_sha256": sha, "fetched_sha256": sha, "files": len(result.files),
                           "bytes": result.bytes, "outcomes": {"ok": len(result.files),
                                                               **{f"refused:{k}": v for k, v in
                                                                  result.refused.items()}},
                           "refused": result.refused_members})


def _outcomes(ok: int, refused: list[dict]) -> dict[str, int]:
    counts = {"ok": ok}
    for r in refused:
        counts[f"refused:{r['reason']}"] = counts.get(f"refused:{r['reason']}", 0) + 1
    return dict(sorted(counts.items()))


def _image_folder(loaded: LoadedRecipe, src, folder: Path, spec: dict) -> dict:
    from curation.acquire.pack import folder_samples, write_tars
    scan = folder_samples(loaded.resolve(src.acquire.path), src.input.allowed_roots(loaded.base_dir))
    samples = scan.samples
    # every part of a sample counts: an edited sidecar caption or JSON is a changed input, re-packed
    sha = _listing_sha([(k, fingerprint([hashlib.sha256(data).hexdigest(), fields,
                                         hashlib.sha256(caption).hexdigest() if caption is not None else None]))
                        for k, data, fields, caption in samples])
    key = fingerprint({"spec": spec, "sha256": sha})
    previous = read_acquired(folder.parent, src.name)
    if not (previous and previous.get("key") == key and any(folder.glob("images-*.tar"))):
        write_tars(samples, folder)
    return _write(folder, {"key": key, "source": src.name, "kind": "image_folder", "origin": src.acquire.path,
                           "origin_sha256": sha, "fetched_sha256": sha, "files": len(samples),
                           "bytes": sum(len(s[1]) for s in samples), "outcomes": _outcomes(len(samples), scan.refused),
                           "refused": scan.refused})


AUDIO_EXTS = {".wav", ".flac", ".ogg", ".oga", ".opus", ".mp3"}


def _audio_folder(loaded: LoadedRecipe, src, folder: Path, spec: dict) -> dict:
    """Audio files under a folder (recursively) copied into `files/`, and `clips.jsonl`: one clip per
    file, its sidecar `<stem>.txt` as transcript, the sub-folder as recording and the file's position
    in sorted order within it as clip order (name clips so they sort in reading order).

    Only files inside the folder (or `input.allow_roots`) are read: a clip or a sidecar that is a link
    out of the tree refuses the clip (`link_outside_input`, listed in `refused`). A transcript's bytes
    are kept as they are, so one that is not UTF-8 is quarantined by the reader
    (`bad_transcript_encoding`), never mended; a file name that is not UTF-8 is copied under its
    backslash-escaped name (`caf\\xe9.wav`)."""
    from curation.acquire.pack import display_name, read_sidecar
    from curation.core.contain import InputTree, Refusal
    root = loaded.resolve(src.acquire.path)
    if not root.is_dir():
        raise InputError(f"source {src.name!r}: audio folder {root} does not exist; fix acquire.path")
    tree = InputTree(root, src.input.allowed_roots(loaded.base_dir))
    # the audio modality's settings (curation.steps.audio.declaration.Audio); acquire sits below steps, so not
    # through its typed accessor
    a = src.settings_for("audio")
    pairs, lines, order, refused, total = [], [], {}, [], 0
    shutil.rmtree(folder / "files", ignore_errors=True)
    for f, refusal in tree.walk(AUDIO_EXTS):
        rel = Path(display_name(f.relative_to(root)))
        transcript = read_sidecar(tree, f.with_suffix(".txt"))
        clip = tree.open(f) if refusal is None else refusal
        refusal = next((x for x in (clip, transcript) if isinstance(x, Refusal)), None)
        if refusal is not None or (folder / "files" / rel).exists():
            if not isinstance(clip, Refusal):
                clip.close()
            refused.append({"path": str(rel), "reason": refusal.reason if refusal else "duplicate_name",
                            "detail": refusal.detail if refusal else f"{rel} is also the escaped name of another file"})
            continue
        (folder / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
        with clip, open(folder / "files" / rel, "wb") as out:
            shutil.copyfileobj(clip, out)
        recording = str(rel.parent) if str(rel.parent) != "." else rel.stem
        order[recording] = order.get(recording, -1) + 1
        line = {a.audio_field: str(Path("files") / rel), a.recording_field: recording,
                a.order_field: order[recording], "id": str(rel.with_suffix(""))}
        if transcript is not None:
            # undecodable bytes ride through as surrogates and are written back as the same bytes
            line[src.input.text_field] = transcript.decode("utf-8", errors="surrogateescape").strip()
        lines.append(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
        pairs.append((str(rel), sha256_file(folder / "files" / rel)))
        total += (folder / "files" / rel).stat().st_size
    (folder / "clips.jsonl").write_bytes("".join(lines).encode("utf-8", errors="surrogateescape"))
    sha = _listing_sha(pairs)
    return _write(folder, {"key": fingerprint({"spec": spec, "sha256": sha}), "source": src.name,
                           "kind": "audio_folder", "origin": src.acquire.path, "origin_sha256": sha,
                           "fetched_sha256": sha, "files": len(pairs), "bytes": total,
                           "outcomes": _outcomes(len(pairs), refused), "refused": refused})


def snapshot_revision(src) -> str | None:
    """The commit a Hugging Face snapshot path pins (`.../snapshots/<40 hex>/...`), checked against
    the source's `revision`: a snapshot of another revision than the recipe pins is an error."""
    found = re.search(r"snapshots/([0-9a-f]{40})(?:/|$)", src.acquire.path)
    pinned = found.group(1) if found else None
    if pinned and src.revision and src.revision != pinned:
        raise InputError(f"source {src.name!r}: acquire.path is the snapshot of revision {pinned}, but the "
                         f"recipe pins revision {src.revision}; point at the pinned snapshot or update `revision`")
    return src.revision or pinned


def _glob_root(fs, url: str) -> str:
    """The folder a glob starts from ("s3://b/p/**/*.jsonl" → "b/p"), in the file system's own paths."""
    path = fs._strip_protocol(url)
    parts = PurePosixPath(path).parts
    fixed = [p for p in parts[:next((i for i, p in enumerate(parts) if any(c in p for c in "*?[")), len(parts))]]
    return str(PurePosixPath(*fixed)) if fixed else "/"


def _fsspec(loaded: LoadedRecipe, src, folder: Path, spec: dict) -> dict:
    import fsspec
    revision = snapshot_revision(src)
    url = src.acquire.path if "://" in src.acquire.path else f"file://{loaded.resolve(src.acquire.path)}"
    try:
        files = fsspec.open_files(url, mode="rb")
    except (ValueError, ImportError, OSError) as e:
        raise InputError(f"source {src.name!r}: cannot list {src.acquire.path!r} ({e}); check the URL and "
                         f"that the filesystem's package is installed") from None
    if not files:
        raise InputError(f"source {src.name!r}: {src.acquire.path!r} matched no files; fix acquire.path")
    target = folder / "files"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    pairs, total = [], 0
    root = _glob_root(files[0].fs, url)
    for f in sorted(files, key=lambda f: f.path):
        name = str(PurePosixPath(f.path).relative_to(root))  # keep sub-folders: a/part.jsonl ≠ b/part.jsonl
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        with f as fin, open(target / name, "wb") as fout:
            shutil.copyfileobj(fin, fout)
        pairs.append((name, sha256_file(target / name)))
        total += (target / name).stat().st_size
    sha = _listing_sha(pairs)
    return _write(folder, {"key": fingerprint({"spec": spec, "sha256": sha}), "source": src.name, "kind": "fsspec",
                           "origin": src.acquire.path, "origin_sha256": None, "fetched_sha256": sha, "revision": revision,
                           "files": len(pairs), "bytes": total, "outcomes": {"ok": len(pairs)}})


def _url_list(path: Path, url_field: str) -> list[dict]:
    if not path.is_file():
        raise InputError(f"URL list {path} does not exist; fix acquire.path")
    entries = []
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if path.suffix == ".jsonl":
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"URL list {path} line {n}: {e.msg}; fix the line") from None
            if not isinstance(obj, dict) or not isinstance(obj.get(url_field), str):
                raise InputError(f"URL list {path} line {n}: no string field {url_field!r}; set acquire.url_field")
            entries.append(obj | {"url": obj[url_field]})
        else:
            entries.append({"url": line})
    return entries


def _to_text(body: bytes) -> str | None:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    head = text[:2048].lower()
    if "<html" in head or "<!doctype html" in head or "<body" in head:
        import trafilatura
        return trafilatura.extract(text, include_comments=False) or ""
    return text


def _urls(loaded: LoadedRecipe, src, folder: Path, spec: dict, guard) -> dict:
    from curation.acquire.fetch import Fetcher, FetchPolicy
    origin = loaded.resolve(src.acquire.path)
    entries = _url_list(origin, src.acquire.url_field)
    a = src.acquire
    policy = FetchPolicy(timeout_s=a.timeout_s, max_retries=a.max_retries, per_host=a.per_host,
                         host_interval_s=a.host_interval_s, workers=a.workers, max_bytes=a.max_bytes)
    results = Fetcher(guard, policy).fetch_all([e["url"] for e in entries], folder / "fetched")
    outcomes: dict[str, int] = {}
    for r in results:
        key = r.status if r.status == "ok" else f"{r.status}:{r.reason}"
        outcomes[key] = outcomes.get(key, 0) + 1
    if src.modality == "image":
        from curation.acquire.pack import safe_key, write_tars
        samples = []
        for entry, r in zip(entries, results):
            if r.status == "ok":
                fields = {k: v for k, v in entry.items() if k != src.acquire.url_field}
                fields.update({"url": r.url, "final_url": r.final_url, "sha256": r.sha256})
                samples.append((safe_key(r.sha256[:16] + "_" + hashlib.sha256(r.url.encode()).hexdigest()[:8]),
                                (folder / "fetched" / r.file).read_bytes(), fields, None))
        write_tars(samples, folder)
    if src.modality == "text":
        tmp = folder / ".documents.jsonl.tmp"
        with tmp.open("w", encoding="utf-8") as f:
            for entry, r in zip(entries, results):
                if r.status != "ok":
                    continue
                text = _to_text((folder / "fetched" / r.file).read_bytes())
                doc = {k: v for k, v in entry.items() if k != src.acquire.url_field}
                doc.setdefault("id", hashlib.sha256(r.url.encode()).hexdigest()[:16])
                doc.update({"url": r.url, "final_url": r.final_url, "sha256": r.sha256, "text": text})
                if text is None:
                    doc["fetch_error"] = "body is not UTF-8 text"
                f.write(json.dumps(doc, ensure_ascii=False, sort_keys=True) + "\n")
        tmp.replace(folder / "documents.jsonl")
    sha = _listing_sha([(r.url, r.sha256) for r in results if r.status == "ok"])
    return _write(folder, {"key": fingerprint({"spec": spec, "sha256": sha256_file(origin)}), "source": src.name,
                           "kind": "urls", "origin": src.acquire.path, "origin_sha256": sha256_file(origin),
                           "fetched_sha256": sha, "files": outcomes.get("ok", 0),
                           "bytes": sum(r.bytes for r in results), "outcomes": dict(sorted(outcomes.items())),
                           "guard": guard.lists.counts, "guard_fingerprint": guard.lists.fingerprint,
                           "feeds": guard.lists.feeds})
