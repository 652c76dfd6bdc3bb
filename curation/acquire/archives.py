"""Safe extraction of tar (plain, gz/tgz, bz2, xz) and zip archives into the raw/ layer, member by member.

Threat model: an archive is downloaded from somewhere we do not control, so its member names,
link targets, types and sizes are hostile until checked. A hostile *member* is refused, counted by
reason in `ExtractResult.refused` (listed, with its name and why, in `refused_members`) and never
written; the good members around it are kept. Member reasons:

* `absolute_path`, `path_traversal` (a `..` component, or a name that resolves outside the target),
  `bad_name` (empty, NUL, not UTF-8, or a backslash, which is a separator on Windows);
* `link`: every tar symlink and hard link and every zip entry with symlink mode bits, whether it
  points inside the target or not (the detail says which): a link that stays inside is legal but
  rarely needed in training data, and refusing them all removes the link-then-write-through-it
  attacks. Re-pack with links dereferenced if needed;
* `device`, `fifo`, `socket`, `unsupported_type`: special files are never created;
* `too_large` (one member above `max_member_bytes`, by header or by the bytes actually streamed: its
  partial file is removed), `conflict` (a file where an earlier member made a folder, or the reverse),
  `encrypted`, `unsupported_compression` (zip), `unsafe_member` (rejected by `tarfile.data_filter`).

What concerns the archive as a whole stops the extraction with an `InputError` and leaves nothing:
a truncated or corrupt archive, more than `max_members` members, more than `max_total_bytes` written,
or a decompression bomb (bytes written / archive size above `max_ratio`). Sizes are counted on the
bytes actually written, while streaming; header sizes only allow refusing earlier, never later.
Everything is written into a fresh hidden directory next to the target and renamed onto it in one
step at the end, so the target is either complete or absent (or left as the empty directory it was).

tar members also go through `tarfile.data_filter` (the `filter="data"` policy) as a backstop;
members are copied by this module rather than by `TarFile.extract` so that bytes can be counted
as they are written. Output is deterministic: `files` is sorted and modes are normalised to
0o644 for files and 0o755 for directories, whatever the archive says.
"""
from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from curation.acquire.members import _CHUNK, _DIR_MODE, Refused, Writer
from curation.errors import InputError

_Writer = Writer  # the name tests patch
_ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
_COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
_TAR_SUFFIXES = (".tar",)
_COMPRESSED_TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tbz2", ".tar.xz", ".txz")
# What decompressors and the archive readers raise on damaged input (gzip.BadGzipFile and bz2's
# "Invalid data stream" are OSErrors). Only reads are wrapped, so write failures are not
# misreported as a bad archive.
_READ_ERRORS = (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError, OSError)


@dataclass(frozen=True)
class ExtractResult:
    files: list[str]                 # relative POSIX paths of regular files written, sorted
    bytes: int                       # total size of those files
    sha256: str                      # hex digest of the archive file itself
    refused: dict[str, int] = field(default_factory=dict)   # reason -> members not extracted
    refused_members: list[dict] = field(default_factory=list)  # {member, reason, detail}, the first 1000


def extract(archive: Path, target: Path, *, max_members: int = 100_000,
            max_total_bytes: int = 20 * 2**30, max_member_bytes: int = 4 * 2**30,
            max_ratio: float = 200.0) -> ExtractResult:
    """Extract `archive` into `target`, which must not exist or be an empty directory.

    Hostile members are refused and counted (`ExtractResult.refused`); raises InputError, leaving no
    files from this extraction behind, when the archive is missing, truncated or corrupt, or breaks
    an archive-wide limit (module docstring).
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
        out = Writer(archive, staging, archive.stat().st_size, max_members=max_members,
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
                         refused=dict(sorted(out.refused.items())), refused_members=out.listed)


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


def _reader(archive: Path, src) -> Callable[[int], bytes]:
    def read(n: int) -> bytes:
        try:
            return src.read(n)
        except _READ_ERRORS as exc:
            raise _corrupt(archive, exc) from exc
    return read


def _tar_member(tf: tarfile.TarFile, member: tarfile.TarInfo, out: Writer) -> None:
    if member.ischr() or member.isblk():
        raise Refused("device", "a device node")
    if member.isfifo():
        raise Refused("fifo", "a fifo")
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        raise Refused("unsupported_type", f"tar member type {member.type!r}")
    rel = out.rel_path(member.name)
    if member.issym() or member.islnk():
        raise out.link(rel, member.linkname, hard=member.islnk())
    try:
        tarfile.data_filter(member, out.root)
    except tarfile.FilterError as exc:
        raise Refused("unsafe_member", f"rejected by tarfile's data filter ({exc})") from exc
    if member.isdir():
        out.make_dir(rel)
        return
    try:
        src = tf.extractfile(member)
    except _READ_ERRORS as exc:
        raise _corrupt(out.archive, exc) from exc
    with src:
        out.write_file(rel, member.name, member.size, _reader(out.archive, src))


def _extract_tar(archive: Path, out: Writer, *, plain: bool) -> None:
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
            out.member(member.name, lambda: _tar_member(tf, member, out))  # noqa: B023 - called at once
        # A plain tar cut at a block boundary reads as a shorter valid archive; only the
        # missing end-of-archive zero block gives it away. (Compressed streams detect it.)
        if plain and tf.offset + tarfile.BLOCKSIZE > out.archive_size:
            raise _corrupt(archive, "no end-of-archive marker")


_ZIP_SPECIAL = {stat.S_IFCHR: "device", stat.S_IFBLK: "device", stat.S_IFIFO: "fifo", stat.S_IFSOCK: "socket"}


def _zip_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, out: Writer) -> None:
    fmt = stat.S_IFMT(info.external_attr >> 16)
    if fmt in _ZIP_SPECIAL:
        raise Refused(_ZIP_SPECIAL[fmt], f"a {_ZIP_SPECIAL[fmt]} entry")
    rel = out.rel_path(info.filename)
    if fmt == stat.S_IFLNK:
        raise out.link(rel, _read_zip_link(out.archive, zf, info), hard=False)
    if info.is_dir() or fmt == stat.S_IFDIR:
        out.make_dir(rel)
        return
    if info.flag_bits & 0x1:
        raise Refused("encrypted", "encrypted; provide an unencrypted archive")
    if info.compress_type not in _ZIP_METHODS:
        raise Refused("unsupported_compression", f"compression method {info.compress_type}; re-pack with deflate")
    try:
        src = zf.open(info)
    except _READ_ERRORS as exc:
        raise _corrupt(out.archive, exc) from exc
    with src:
        out.write_file(rel, info.filename, info.file_size, _reader(out.archive, src))


def _extract_zip(archive: Path, out: Writer) -> None:
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
            out.member(info.filename, lambda: _zip_member(zf, info, out))  # noqa: B023 - called at once


def _read_zip_link(archive: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> str:
    """A zip symlink's target (its content), read only far enough to name it in the error."""
    try:
        with zf.open(info) as src:
            return src.read(4096).decode("utf-8", "replace")
    except (*_READ_ERRORS, RuntimeError, NotImplementedError):
        return "?"
