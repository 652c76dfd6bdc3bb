"""Where a run's outputs go: a local folder, or an S3 URL written through fsspec (s3fs).

`parse_out(text)` decides before any work:

- a path, or `file:///abs/path`: a local folder (resolved, symlinks followed). The run writes there
  directly, as it always did;
- `s3://bucket/prefix`: an S3 bucket or an S3-compatible server (credentials from the usual AWS_*
  variables, the endpoint from `FSSPEC_S3_ENDPOINT_URL`). Tasks write into a local staging folder and
  publish (`curation.runtime.publish`): this relies on what S3 guarantees, that one PUT is atomic (an
  object is visible whole or not at all, multipart uploads included) and that reads after a write are
  strongly consistent; the lock object relies on its conditional PUT (`If-None-Match: *`);
- anything else is refused with a `UsageError` (exit 2) naming the reason: `http(s)://` and `ftp://` are
  not writable folders, `memory://` lives in one process (Ray workers and a re-run would not see it), and
  other stores (`gs://`, `az://`, ...) are not offered until they are tested here: their guarantees
  differ (GCS serves S3's API too: use `s3://` with its endpoint).

`Remote` is the one place that talks to the store: paths are relative to the output (`tokenized/x/x.bin`).
"""
from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from curation.errors import CurateError, UsageError

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://(.*)$")
WRITABLE = ("s3",)
_WHY_NOT = {
    "http": "an http(s) URL is read-only to curate (there is no folder to write into)",
    "https": "an http(s) URL is read-only to curate (there is no folder to write into)",
    "ftp": "ftp:// offers no atomic write, so a crash could leave a half-written file under its final name",
    "sftp": "sftp:// offers no atomic publish of a task's outputs",
    "memory": "a memory:// filesystem lives inside one process: Ray workers and a re-run would not see it",
}


def is_remote(out: object) -> TypeGuard[str]:
    """True for an output URL (`s3://...`); a local output is a path (or a string without a scheme)."""
    return isinstance(out, str) and bool(_SCHEME.match(out))


def parse_out(text: str | Path) -> Path | str:
    """The output location: a resolved local `Path`, or a normalised `s3://bucket/prefix` string.
    Raises UsageError (exit 2) for a scheme the run cannot write, before anything is created."""
    if isinstance(text, Path):
        return text.resolve()
    m = _SCHEME.match(text)
    if not m:
        return Path(text).resolve()
    scheme, rest = m.group(1).lower(), m.group(2)
    if scheme == "file":
        host, _, path = rest.partition("/")
        if host not in ("", "localhost"):
            raise UsageError(f"--out {text}: a file:// URL names a local path (file:///abs/path); host {host!r} "
                             f"is not this machine")
        return Path("/" + path).resolve()
    if scheme not in WRITABLE:
        why = _WHY_NOT.get(scheme, f"{scheme}:// is not a supported output store")
        raise UsageError(f"--out {text}: {why}; give a local folder or an s3:// URL (S3 or an S3-compatible "
                         f"server: FSSPEC_S3_ENDPOINT_URL)")
    bucket = rest.split("/", 1)[0]
    if not bucket:
        raise UsageError(f"--out {text}: no bucket; give s3://BUCKET/PREFIX")
    prefix = "/".join(p for p in rest.split("/") if p)
    if any(p in (".", "..") for p in prefix.split("/")):
        raise UsageError(f"--out {text}: `.` and `..` are not allowed in an output URL")
    try:
        import s3fs  # noqa: F401 - the implementation fsspec uses for s3://
    except ImportError:
        raise UsageError(f"--out {text}: writing to s3:// needs s3fs: pip install s3fs") from None
    return f"{scheme}://{prefix}"


@dataclass(frozen=True)
class Remote:
    """An output URL and the operations the run needs on it (paths relative to the output)."""
    url: str

    @property
    def fs(self):
        import fsspec
        # no listings cache: other processes (tasks on other nodes, a second run) write here too
        return fsspec.filesystem(self.url.split("://", 1)[0], use_listings_cache=False)

    def key(self, rel: str = "") -> str:
        root = self.url.split("://", 1)[1]
        return f"{root}/{rel}" if rel else root

    def check(self) -> None:
        """Fail before any work when the bucket cannot be reached or does not exist."""
        bucket = self.key().split("/", 1)[0]
        try:
            ok = self.fs.exists(bucket)
        except (OSError, ValueError) as e:
            raise CurateError(f"--out {self.url}: the store cannot be reached ({e}); check the credentials "
                              f"(AWS_* variables) and the endpoint (FSSPEC_S3_ENDPOINT_URL)") from None
        if not ok:
            raise CurateError(f"--out {self.url}: bucket {bucket!r} does not exist (or these credentials cannot "
                              f"see it); create it first")

    def cat(self, rel: str) -> bytes | None:
        """The object's bytes, or None when there is none, in one request.

        Read as the range `0-`: without a range s3fs first asks for the size (a HEAD), and for a missing
        object then lists the key as a folder, so every marker read cost two round trips. S3 refuses a range
        of an empty object (416), which the plain read then answers."""
        key = self.key(rel)
        try:
            return self.fs.cat_file(key, start=0)
        except FileNotFoundError:
            return None
        except OSError:
            try:
                return self.fs.cat_file(key)   # an empty object, or the same error again
            except FileNotFoundError:
                return None

    def rel(self, name: str) -> str:
        """The path of a listed object relative to the output (a filesystem may list `/bucket/...`)."""
        root, path = self.key().strip("/"), name.strip("/")
        if not path.startswith(root + "/"):   # an output URL not normalised by `parse_out`: a bug, not data
            raise ValueError(f"listed object {name!r} is not under the output {self.url!r}")
        return path[len(root) + 1:]

    def objects(self, under: str = "") -> dict[str, dict]:
        """rel path -> the listing's entry of every object under `under` (one listing; no directories)."""
        try:
            found = self.fs.find(self.key(under), detail=True)
        except FileNotFoundError:
            return {}
        return {self.rel(k): v for k, v in found.items() if v.get("type") != "directory"}

    def listing(self, under: str = "") -> dict[str, int]:
        """rel path -> size of every object under `under` (one listing; no directories)."""
        return {rel: int(v.get("size") or 0) for rel, v in self.objects(under).items()}

    def put(self, local: Path, rel: str) -> None:
        self.fs.put_file(str(local), self.key(rel))

    def pipe(self, rel: str, data: bytes, *, create: bool = False) -> None:
        """Write an object; `create`: only if none exists (S3's conditional PUT), else FileExistsError."""
        self.fs.pipe_file(self.key(rel), data, **({"mode": "create"} if create else {}))

    def get(self, rel: str, local: Path) -> None:
        """Download to `local` atomically (a temporary name beside it, then a rename)."""
        local.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=local.parent, prefix=f".{local.name}.", suffix=".part")
        os.close(fd)
        try:
            self.fs.get_file(self.key(rel), tmp)
            os.replace(tmp, local)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get_pieces(self, rel: str, local: Path, pieces: Callable) -> int:
        """Download only the byte ranges `pieces(read)` asks for (`read(start, end)`, a ranged GET each) into a
        sparse file at `local`, each at its offset, as long as the last piece's end, atomically; returns the
        bytes downloaded. A task that
        reads a slice of a file at known offsets (`os.pread`) reads the same bytes from it as from the whole."""
        key = self.key(rel)
        # an empty range is no request: S3 answers `bytes=N-(N-1)` with the whole object (moto does too)
        got = pieces(lambda start, end: self.fs.cat_file(key, start=start, end=end) if end > start else b"")
        local.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=local.parent, prefix=f".{local.name}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as f:
                for at, data in got:
                    f.seek(at)
                    f.write(data)
                f.truncate(max((at + len(data) for at, data in got), default=0))   # a last (size, b"") sets the size
            os.replace(tmp, local)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return sum(len(data) for _, data in got)

    def get_columns(self, rel: str, local: Path, columns: list[str]) -> int:
        """Download only `columns` of a Parquet object (its footer and those column chunks, by ranged reads)
        into a Parquet file at `local` holding them, rows in the same order, atomically; returns its bytes. A
        task reading another column of it fails loudly, never on wrong data."""
        import pyarrow.parquet as pq
        with self.fs.open(self.key(rel), "rb", cache_type="none") as f:   # no read-ahead of whole blocks
            table = pq.read_table(f, columns=columns)
        local.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=local.parent, prefix=f".{local.name}.", suffix=".part")
        os.close(fd)
        try:
            pq.write_table(table, tmp)
            os.replace(tmp, local)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return local.stat().st_size

    def rm(self, rels) -> None:
        keys = [self.key(r) for r in rels]
        if keys:
            self.fs.rm(keys)


def staging_root() -> Path:
    """Where this machine stages a remote output's files (`CURATE_STAGING`, else the temp folder)."""
    return Path(os.environ.get("CURATE_STAGING") or Path(tempfile.gettempdir()) / "curate-staging")
