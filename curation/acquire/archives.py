"""Safe extraction of tar (plain, gz/tgz, bz2, xz) and zip archives into the raw/ layer.

Threat model: an archive is downloaded from somewhere we do not control, so its member names,
link targets, types and sizes are hostile until checked. `extract` defends against:

* path escapes: absolute names, `..` components, names that resolve outside the target, and
  links. All links are refused, tar symlinks and hard links and zip entries with symlink mode
  bits alike, whether they point inside the target or not: a link that stays inside is legal
  but rarely needed in training data, and refusing them all removes a whole class of
  link-then-write-through-it attacks. Re-pack with links dereferenced if needed;
* resource exhaustion: too many members, too many bytes, one huge member, and decompression
  bombs (uncompressed total / archive size above `max_ratio`). Sizes are counted on the bytes
  actually written, while streaming; header sizes only allow refusing earlier, never later;
* special files: devices, fifos and sockets are skipped and counted in `skipped`, not created;
* partial output: everything is written into a fresh hidden directory next to the target (in
  the target's parent) and renamed onto the target in one step at the end. On any refusal or
  error that directory is removed, so the target is either complete or absent (or left as the
  empty directory it was).

tar members also go through `tarfile.data_filter` (the `filter="data"` policy) as a backstop;
members are copied by this module rather than by `TarFile.extract` so that bytes can be counted
as they are written. Output is deterministic: `files` is sorted and modes are normalised to
0o644 for files and 0o755 for directories, whatever the archive says.
"""
from __future__ import annotations

import hashlib
import lzma
import os
import re
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from curation.errors import InputError

_CHUNK = 1 << 20
# Below this many bytes written the ratio is not enforced: a small archive of very repetitive
# text can exceed any sensible ratio without being able to fill a disk.
_RATIO_FLOOR_BYTES = 1 << 20
_FILE_MODE = 0o644
_DIR_MODE = 0o755
_ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
_COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
_TAR_SUFFIXES = (".tar",)
_COMPRESSED_TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tbz2", ".tar.xz", ".txz")
# What decompressors and the archive readers raise on damaged input (gzip.BadGzipFile and bz2's
# "Invalid data stream" are OSErrors). Only reads are wrapped, so write failures are not
# misreported as a bad archive.
_READ_ERRORS = (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError, OSError)
_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class ExtractResult:
    files: list[str]                 # relative POSIX paths of regular files written, sorted
    bytes: int                       # total size of those files
    sha256: str                      # hex digest of the archive file itself
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> members not extracted


def extract(archive: Path, target: Path, *, max_members: int = 100_000,
            max_total_bytes: int = 20 * 2**30, max_member_bytes: int = 4 * 2**30,
            max_ratio: float = 200.0) -> ExtractResult:
    """Extract `archive` into `target`, which must not exist or be an empty directory.

    Raises InputError, leaving no files from this extraction behind, when the archive is
    missing, truncated or corrupt, or breaks any of the rules in the module docstring.
    """
    archive, target = Path(archive), Path(target)
    for name, value in (("max_members", max_members), ("max_total_bytes", max_total_bytes),
                        ("max_member_bytes", max_member_bytes), ("max_ratio", max_ratio)):
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value!r}")
    if not archive.is_file():
        raise InputError(f"{archive}: archive not found or not a regular file; check the path")
    kind = _sniff(archive)
    _check_target(target)
    digest = _sha256(archive)

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    done = False
    try:
        out = _Writer(archive, staging, archive.stat().st_size, max_members=max_members,
                      max_total_bytes=max_total_bytes, max_member_bytes=max_member_bytes,
                      max_ratio=max_ratio)
        try:
            if kind == "zip":
                _extract_zip(archive, out)
            else:
                _extract_tar(archive, out, plain=(kind == "tar"))
        except OSError as exc:  # e.g. a member name longer than the file system allows
            raise InputError(f"{archive}: a member cannot be written ({exc}); the archive does not fit this "
                             f"file system, repack it") from None
        os.chmod(staging, _DIR_MODE)  # mkdtemp makes it 0o700
        try:
            # rename(2) replaces an empty directory atomically; a non-empty one makes it fail.
            os.rename(staging, target)
        except OSError as exc:
            raise InputError(f"{target}: cannot move the extracted tree into place ({exc}); "
                             f"the target must not exist or be an empty directory") from exc
        done = True
    finally:
        if not done:
            shutil.rmtree(staging, ignore_errors=True)
    return ExtractResult(files=sorted(out.sizes), bytes=sum(out.sizes.values()), sha256=digest,
                         skipped=dict(sorted(out.skipped.items())))


def _sniff(archive: Path) -> str:
    """'zip', 'tar' (uncompressed) or 'tar-compressed', by magic bytes, else by file name."""
    with open(archive, "rb") as f:
        head = f.read(512)
    if head.startswith(_ZIP_MAGIC):
        return "zip"
    if head.startswith(_COMPRESSED_MAGIC):
        return "tar-compressed"
    if head[257:262] == b"ustar":
        return "tar"
    name = archive.name.lower()
    # Old (v7) tars carry no magic, and a damaged file may have lost it: fall back to the name
    # so that the reader can say what is wrong with it.
    if name.endswith(".zip"):
        return "zip"
    if name.endswith(_COMPRESSED_TAR_SUFFIXES):
        return "tar-compressed"
    if name.endswith(_TAR_SUFFIXES):
        return "tar"
    raise InputError(f"{archive}: not a recognised archive (expected tar, tar.gz/tgz, tar.bz2, "
                     f"tar.xz or zip); check the file or re-download it")


def _check_target(target: Path) -> None:
    if target.is_symlink():
        raise InputError(f"{target}: extraction target is a symlink; give a real directory path")
    if target.exists():
        if not target.is_dir():
            raise InputError(f"{target}: extraction target exists and is not a directory; "
                             f"remove it or choose another target")
        if any(target.iterdir()):
            raise InputError(f"{target}: extraction target is not empty; remove it or choose "
                             f"another target (archives are never merged into existing data)")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _corrupt(archive: Path, exc: BaseException | str) -> InputError:
    return InputError(f"{archive}: truncated or corrupt archive ({exc}); re-download it")


class _Writer:
    """Writes members under `root` and enforces the path, link and size rules."""

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
        self.total = 0                    # bytes written, overwritten duplicates included
        self.sizes: dict[str, int] = {}   # rel path -> size of the file now on disk
        self.dirs: set[str] = set()
        self.skipped: Counter[str] = Counter()

    def refuse(self, name: str, problem: str, fix: str) -> InputError:
        return InputError(f"{self.archive}: member {name!r} {problem}; refusing to extract the "
                          f"archive ({fix})")

    def count_member(self, name: str) -> None:
        self.members += 1
        if self.members > self.max_members:
            raise self.too_many(name)

    def too_many(self, name: str) -> InputError:
        return self.refuse(name, f"is beyond max_members={self.max_members}",
                           "raise max_members if the archive is trusted")

    def rel_path(self, name: str) -> str:
        """The member's normalised relative path ('' for the root), or refuse it."""
        if not name or "\x00" in name:
            raise self.refuse(name, "has an empty or NUL-containing name", "re-pack the archive")
        if name.startswith(("/", "\\")) or _DRIVE.match(name):
            raise self.refuse(name, "has an absolute path",
                              "re-pack it with paths relative to its root")
        if ".." in re.split(r"[/\\]", name):
            raise self.refuse(name, "escapes the target with '..'",
                              "re-pack it without '..' in member paths")
        if "\\" in name:
            # A separator on Windows, so such names are ambiguous wherever raw/ is read later.
            raise self.refuse(name, "contains a backslash",
                              "re-pack it with '/' as the only path separator")
        rel = "/".join(p for p in name.split("/") if p not in ("", "."))
        if rel and not self._inside(os.path.join(self.root, rel)):
            raise self.refuse(name, "resolves outside the target", "re-pack it")
        return rel

    def _inside(self, path: str) -> bool:
        real = os.path.realpath(path)
        return real == self.root or real.startswith(self.root + os.sep)

    def refuse_link(self, name: str, rel: str, link: str, *, hard: bool) -> InputError:
        what = "hard link" if hard else "symlink"
        # Hard link targets are archive-root relative; symlinks are relative to their directory.
        base = self.root if hard else os.path.join(self.root, os.path.dirname(rel))
        outside = (link.startswith("/") or not self._inside(
            os.path.normpath(os.path.join(base, link))))
        where = "outside the target" if outside else "(links are never extracted)"
        return self.refuse(name, f"is a {what} to {link!r} {where}",
                           "re-pack it with links dereferenced, e.g. tar --dereference "
                           "--hard-dereference")

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1

    def make_dir(self, rel: str, name: str) -> None:
        if rel:
            self._make_dirs(rel.split("/"), name)

    def _make_dirs(self, parts: list[str], name: str) -> None:
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub in self.dirs:
                continue
            if sub in self.sizes:
                raise self.refuse(name, f"needs {sub!r} to be a directory but it is a file",
                                  "re-pack it without conflicting entries")
            path = os.path.join(self.root, sub)
            os.mkdir(path, _DIR_MODE)
            os.chmod(path, _DIR_MODE)  # the umask may have removed bits
            self.dirs.add(sub)

    def write_file(self, rel: str, name: str, declared: int, read: Callable[[int], bytes]) -> None:
        if not rel:
            raise self.refuse(name, "is a file named like the archive root", "re-pack it")
        if rel in self.dirs:
            raise self.refuse(name, "is a file but an earlier member made it a directory",
                              "re-pack it without conflicting entries")
        # Headers can only make us refuse earlier; the streaming checks below are what count.
        self._check_sizes(name, declared, self.total + declared)
        parts = rel.split("/")
        self._make_dirs(parts[:-1], name)
        path = os.path.join(self.root, rel)
        if rel in self.sizes:
            os.unlink(path)  # a later duplicate wins, as with tar -x
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     _FILE_MODE)
        written = 0
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), _FILE_MODE)
            while chunk := read(_CHUNK):
                written += len(chunk)
                self.total += len(chunk)
                self._check_sizes(name, written, self.total)
                out.write(chunk)
        self.sizes[rel] = written

    def _check_sizes(self, name: str, member: int, total: int) -> None:
        if member > self.max_member_bytes:
            raise self.refuse(name, f"is larger than max_member_bytes={self.max_member_bytes}",
                              "raise max_member_bytes if the archive is trusted")
        if total > self.max_total_bytes:
            raise self.refuse(name, f"takes the archive past max_total_bytes="
                              f"{self.max_total_bytes} uncompressed",
                              "raise max_total_bytes if the archive is trusted")
        if total > _RATIO_FLOOR_BYTES and total > self.max_ratio * self.archive_size:
            raise self.refuse(name, f"takes the archive past max_ratio={self.max_ratio} "
                              f"({total} bytes out of a {self.archive_size}-byte archive: a "
                              f"decompression bomb?)", "raise max_ratio if the archive is trusted")


def _reader(archive: Path, src) -> Callable[[int], bytes]:
    def read(n: int) -> bytes:
        try:
            return src.read(n)
        except _READ_ERRORS as exc:
            raise _corrupt(archive, exc) from exc
    return read


def _extract_tar(archive: Path, out: _Writer, *, plain: bool) -> None:
    try:
        tf = tarfile.open(archive, mode="r:*")
    except _READ_ERRORS as exc:
        raise _corrupt(archive, exc) from exc
    with tf:
        while True:
            try:
                # next(), not getmembers(): a member flood is stopped at max_members, unread.
                member = tf.next()
            except _READ_ERRORS as exc:
                raise _corrupt(archive, exc) from exc
            if member is None:
                break
            name = member.name
            out.count_member(name)
            if member.ischr() or member.isblk():
                out.skip("device")
                continue
            if member.isfifo():
                out.skip("fifo")
                continue
            if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
                out.skip("unsupported type")
                continue
            rel = out.rel_path(name)
            if member.issym() or member.islnk():
                raise out.refuse_link(name, rel, member.linkname, hard=member.islnk())
            try:
                tarfile.data_filter(member, out.root)
            except tarfile.FilterError as exc:
                raise out.refuse(name, f"is rejected by tarfile's data filter ({exc})",
                                 "re-pack it") from exc
            if member.isdir():
                out.make_dir(rel, name)
                continue
            try:
                src = tf.extractfile(member)
            except _READ_ERRORS as exc:
                raise _corrupt(archive, exc) from exc
            with src:
                out.write_file(rel, name, member.size, _reader(archive, src))
        # A plain tar cut at a block boundary reads as a shorter valid archive; only the
        # missing end-of-archive zero block gives it away. (Compressed streams detect it.)
        if plain and tf.offset + tarfile.BLOCKSIZE > out.archive_size:
            raise _corrupt(archive, "no end-of-archive marker")


def _extract_zip(archive: Path, out: _Writer) -> None:
    try:
        zf = zipfile.ZipFile(archive)
    except _READ_ERRORS as exc:
        raise _corrupt(archive, exc) from exc
    with zf:
        infos = zf.infolist()
        if len(infos) > out.max_members:
            # The central directory is read already: refuse before writing anything.
            raise out.too_many(infos[out.max_members].filename)
        for info in infos:
            name = info.filename
            out.count_member(name)
            rel = out.rel_path(name)
            fmt = stat.S_IFMT(info.external_attr >> 16)
            if fmt == stat.S_IFLNK:
                link = _read_zip_link(archive, zf, info)
                raise out.refuse_link(name, rel, link, hard=False)
            if fmt in (stat.S_IFCHR, stat.S_IFBLK):
                out.skip("device")
                continue
            if fmt == stat.S_IFIFO:
                out.skip("fifo")
                continue
            if fmt == stat.S_IFSOCK:
                out.skip("socket")
                continue
            if info.is_dir() or fmt == stat.S_IFDIR:
                out.make_dir(rel, name)
                continue
            if info.flag_bits & 0x1:
                raise out.refuse(name, "is encrypted", "provide an unencrypted archive")
            if info.compress_type not in _ZIP_METHODS:
                raise out.refuse(name, f"uses unsupported compression method "
                                 f"{info.compress_type}", "re-pack it with deflate")
            try:
                src = zf.open(info)
            except _READ_ERRORS as exc:
                raise _corrupt(archive, exc) from exc
            with src:
                out.write_file(rel, name, info.file_size, _reader(archive, src))


def _read_zip_link(archive: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> str:
    """A zip symlink's target (its content), read only far enough to name it in the error."""
    try:
        with zf.open(info) as src:
            return src.read(4096).decode("utf-8", "replace")
    except (*_READ_ERRORS, RuntimeError, NotImplementedError):
        return "?"
