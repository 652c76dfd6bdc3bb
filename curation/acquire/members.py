"""The member rules of safe extraction (`curation.acquire.archives`): which member names, types and
sizes are refused one by one (`Refused`: counted, never written, the extraction goes on) and which
limits stop the whole archive (an `InputError`). `Writer` writes accepted members under the staging
root with normalised modes, never following a link (none is ever created)."""
from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from curation.errors import InputError

_CHUNK = 1 << 20
# Below this many bytes written the ratio is not enforced: a small archive of very repetitive
# text can exceed any sensible ratio without being able to fill a disk.
_RATIO_FLOOR_BYTES = 1 << 20
_FILE_MODE = 0o644
_DIR_MODE = 0o755
_DRIVE = re.compile(r"^[A-Za-z]:")
LISTED = 1000   # refused members named one by one in the result; all are counted


class Refused(Exception):
    """One member is refused (counted, not written); the extraction goes on."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


class Writer:
    """Writes members under `root`, refuses hostile members and enforces the archive-wide limits."""

    def __init__(self, archive: Path, root: Path, archive_size: int, *, max_members: int,
                 max_total_bytes: int, max_member_bytes: int, max_ratio: float):
        self.archive = archive
        self.root = os.path.realpath(root)
        self.archive_size = archive_size
        self.max_members = max_members
        self.max_total_bytes = max_total_bytes
        self.max_member_bytes = max_member_bytes
        self.max_ratio = max_ratio
        self.members = 0
        self.total = 0                    # bytes written, overwritten and refused partial members included
        self.sizes: dict[str, int] = {}   # rel path -> size of the file now on disk
        self.dirs: set[str] = set()
        self.refused: Counter[str] = Counter()
        self.listed: list[dict] = []

    def abort(self, name: str, problem: str, fix: str) -> InputError:
        return InputError(f"{self.archive}: member {name!r} {problem}; refusing to extract the "
                          f"archive ({fix})")

    def member(self, name: str, step: Callable[[], None]) -> None:
        """Count one member and run `step` on it; a `Refused` member is counted by reason, not written."""
        self.members += 1
        if self.members > self.max_members:
            raise self.too_many(name)
        try:
            step()
        except Refused as r:
            self.refused[r.reason] += 1
            if len(self.listed) < LISTED:
                self.listed.append({"member": name, "reason": r.reason, "detail": r.detail})

    def too_many(self, name: str) -> InputError:
        return self.abort(name, f"is beyond max_members={self.max_members}",
                          "raise max_members if the archive is trusted")

    def rel_path(self, name: str) -> str:
        """The member's normalised relative path ('' for the root), or refuse the member."""
        if not name or "\x00" in name:
            raise Refused("bad_name", "empty or NUL-containing name")
        try:
            name.encode("utf-8")      # tarfile keeps undecodable bytes as surrogates
        except UnicodeEncodeError:
            raise Refused("bad_name", "not UTF-8: raw/ names must be text that every later step can name") from None
        if name.startswith(("/", "\\")) or _DRIVE.match(name):
            raise Refused("absolute_path", "absolute path: archive members are relative to its root")
        if ".." in re.split(r"[/\\]", name):
            raise Refused("path_traversal", "escapes the target with '..'")
        if "\\" in name:
            # A separator on Windows, so such names are ambiguous wherever raw/ is read later.
            raise Refused("bad_name", "contains a backslash")
        rel = "/".join(p for p in name.split("/") if p not in ("", "."))
        if rel and not self._inside(os.path.join(self.root, rel)):
            raise Refused("path_traversal", "resolves outside the target")
        return rel

    def _inside(self, path: str) -> bool:
        real = os.path.realpath(path)
        return real == self.root or real.startswith(self.root + os.sep)

    def link(self, rel: str, link: str, *, hard: bool) -> Refused:
        what = "hard link" if hard else "symlink"
        # Hard link targets are archive-root relative; symlinks are relative to their directory.
        base = self.root if hard else os.path.join(self.root, os.path.dirname(rel))
        outside = (link.startswith("/") or not self._inside(
            os.path.normpath(os.path.join(base, link))))
        where = "outside the target" if outside else "inside the target (links are never extracted)"
        return Refused("link", f"{what} to {link!r} {where}; re-pack with links dereferenced "
                                f"(tar --dereference --hard-dereference)")

    def make_dir(self, rel: str) -> None:
        if rel:
            if rel in self.sizes:
                raise Refused("conflict", f"is a folder but an earlier member made {rel!r} a file")
            self._make_dirs(rel.split("/"))

    def _make_dirs(self, parts: list[str]) -> None:
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub in self.dirs:
                continue
            if sub in self.sizes:
                raise Refused("conflict", f"needs {sub!r} to be a directory but it is a file")
            path = os.path.join(self.root, sub)
            os.mkdir(path, _DIR_MODE)
            os.chmod(path, _DIR_MODE)  # the umask may have removed bits
            self.dirs.add(sub)

    def write_file(self, rel: str, name: str, declared: int, read: Callable[[int], bytes]) -> None:
        if not rel:
            raise Refused("bad_name", "a file named like the archive root")
        if rel in self.dirs:
            raise Refused("conflict", "is a file but an earlier member made it a directory")
        # Headers can only make us refuse earlier; the streaming checks below are what count.
        if declared > self.max_member_bytes:
            self.total += declared  # skipping it still decompresses it, in a compressed tar
            self._check_sizes(name, 0, self.total)
        self._check_sizes(name, declared, self.total + declared)
        parts = rel.split("/")
        self._make_dirs(parts[:-1])
        path = os.path.join(self.root, rel)
        if rel in self.sizes:
            os.unlink(path)  # a later duplicate wins, as with tar -x
            del self.sizes[rel]
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     _FILE_MODE)
        written = 0
        try:
            with os.fdopen(fd, "wb") as out:
                os.fchmod(out.fileno(), _FILE_MODE)
                while chunk := read(_CHUNK):
                    written += len(chunk)
                    self.total += len(chunk)
                    self._check_sizes(name, written, self.total)
                    out.write(chunk)
        except Refused:
            os.unlink(path)
            raise
        self.sizes[rel] = written

    def _check_sizes(self, name: str, member: int, total: int) -> None:
        # the archive-wide limits first: a bomb stops the archive even where one member is the bomb
        if total > self.max_total_bytes:
            raise self.abort(name, f"takes the archive past max_total_bytes={self.max_total_bytes} "
                             f"uncompressed", "raise max_total_bytes if the archive is trusted")
        if total > _RATIO_FLOOR_BYTES and total > self.max_ratio * self.archive_size:
            raise self.abort(name, f"takes the archive past max_ratio={self.max_ratio} "
                             f"({total} bytes out of a {self.archive_size}-byte archive: a "
                             f"decompression bomb?)", "raise max_ratio if the archive is trusted")
        if member > self.max_member_bytes:
            raise Refused("too_large", f"larger than max_member_bytes={self.max_member_bytes}")
