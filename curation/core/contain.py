"""Containment: a source reads only files inside its declared input tree, or inside roots the recipe names.

The tree is the folder a source declares (the `path` of an `image_folder` or `audio_folder`
acquisition, the folder of a clip manifest); `input.allow_roots` adds further roots. Whether a file may
be read is judged on the file the bytes really come from, never on the name alone:

* a name (a clip manifest's `file`) that is absolute or climbs out with `..`: `path_outside_input`,
  unless it lands in an allowed root;
* a symbolic link (the file itself or a folder on its way) whose real path lies outside every root:
  `link_outside_input`. Links that stay inside are followed;
* hard links. A hard link has no target: its names are equal names of one inode, and nothing says
  which came first, so a file linked from outside the tree looks exactly like one that is linked
  from inside. A regular file with `st_nlink` > 1 is read only when all of its names are found in the
  roots: the roots are walked once (metadata only, no link followed), the first time such a file is
  met, counting names per (st_dev, st_ino). A file with a name elsewhere is `link_outside_input`.

`open` decides on the file it has opened (its path from `/proc/self/fd` where there is one, and its
`fstat`), so a link swapped in between the check and the read is refused, not followed. Special
files (fifos, devices, sockets) are never opened (`not_a_file`).

    tree = InputTree(Path("clips"), allow_roots=[Path("/data/shared-audio")])
    got = tree.open_name("a/b.wav")          # a binary file object, or a Refusal with reason and detail
"""
from __future__ import annotations

import io
import os
import stat
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

LINK_OUTSIDE = "link_outside_input"
PATH_OUTSIDE = "path_outside_input"
NOT_A_FILE = "not_a_file"
_PROC_FD = Path("/proc/self/fd")


@dataclass(frozen=True)
class Refusal:
    """Why a file may not be read: `reason` (a ledger reason) and a `detail` naming the path."""
    reason: str
    detail: str


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


class InputTree:
    """The input tree rooted at `root` (a link to the root itself is the recipe's own choice and is
    followed), plus the `allow_roots`."""

    def __init__(self, root: Path, allow_roots: Iterable[Path] = ()):
        given = [Path(root), *(Path(a) for a in allow_roots)]
        self.root = Path(os.path.realpath(root))
        self._lexical = [os.path.normpath(os.path.abspath(p)) for p in given]
        self._real = [os.path.realpath(p) for p in given]
        self._names: dict[tuple[int, int], set[str]] | None = None

    # -- names from a manifest ---------------------------------------------------
    def locate(self, name: str, base: Path | None = None) -> Path | Refusal:
        """The path a manifest name means (relative to `base`, default the root), or a Refusal when the
        name itself leaves the roots (`..`, or an absolute path outside them)."""
        base = Path(base) if base is not None else Path(self._lexical[0])
        full = os.path.normpath(os.path.join(os.path.abspath(base), name))
        # the real path counts too: an allowed root may be named through a link, the manifest by its target
        if not _under(full, self._lexical) and not _under(os.path.realpath(full), self._real):
            return Refusal(PATH_OUTSIDE, f"{name!r} points outside the input tree {self._lexical[0]}; keep "
                                         f"files under it, or allow their folder with input.allow_roots")
        return Path(full)

    def open_name(self, name: str, base: Path | None = None) -> io.BufferedReader | Refusal:
        where = self.locate(name, base)
        return where if isinstance(where, Refusal) else self.open(where)

    # -- files -------------------------------------------------------------------
    def check(self, path: Path) -> Refusal | None:
        """Refusal when `path` resolves (through symlinks) outside the roots; None when it may be opened."""
        real = os.path.realpath(path)
        if not _under(real, self._real):
            return Refusal(LINK_OUTSIDE, f"{path} is a link to {real}, outside the input tree {self.root}")
        return None

    def open(self, path: Path) -> io.BufferedReader | Refusal:
        """Open `path` for reading, or say why not. Raises FileNotFoundError when nothing is there."""
        if (early := self.check(path)) is not None:
            return early
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return Refusal(NOT_A_FILE, f"{path} is not a regular file")
        # O_NONBLOCK: a fifo swapped in after the stat must not block the open
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            refusal = self._judge_open(fd, path)
        except BaseException:
            os.close(fd)
            raise
        if refusal is not None:
            os.close(fd)
            return refusal
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")

    def read_bytes(self, path: Path) -> bytes | Refusal:
        got = self.open(path)
        if isinstance(got, Refusal):
            return got
        with got:
            return got.read()

    def _judge_open(self, fd: int, path: Path) -> Refusal | None:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Refusal(NOT_A_FILE, f"{path} is not a regular file")
        try:
            real = os.readlink(_PROC_FD / str(fd))
        except OSError:                 # no /proc: the check before opening stands
            real = os.path.realpath(path)
        if not _under(real, self._real):
            return Refusal(LINK_OUTSIDE, f"{path} was opened as {real}, outside the input tree {self.root}")
        if st.st_nlink > 1:
            found = len(self._inode_names().get((st.st_dev, st.st_ino), ()))
            if found < st.st_nlink:
                return Refusal(LINK_OUTSIDE, f"{path} is a hard link with {st.st_nlink} names, {found} of them in "
                                             f"the input tree {self.root}: a file linked from elsewhere")
        return None

    def _inode_names(self) -> dict[tuple[int, int], set[str]]:
        """Names of every multiply-linked regular file under the roots (walked once, links not followed)."""
        if self._names is None:
            names: dict[tuple[int, int], set[str]] = defaultdict(set)
            for root in dict.fromkeys(self._real):
                for folder, _dirs, files in os.walk(root, followlinks=False):
                    for f in files:
                        p = os.path.join(folder, f)
                        try:
                            st = os.lstat(p)
                        except OSError:
                            continue
                        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                            names[(st.st_dev, st.st_ino)].add(p)
            self._names = dict(names)
        return self._names

    # -- walking a folder --------------------------------------------------------
    def walk(self, suffixes: Iterable[str]) -> list[tuple[Path, Refusal | None]]:
        """The files under the root whose suffix (lower-cased) is in `suffixes`, sorted, as (path, None),
        or (path, Refusal) for a link that leaves the roots or an entry that is not a regular file. A
        folder link that leaves the roots is (its path, Refusal) whatever its name: what it holds is
        unknown. A folder link that stays in the tree is not descended (its files are walked where they
        really are); one into an allowed root is, once per real folder."""
        wanted = {s.lower() for s in suffixes}
        out: list[tuple[Path, Refusal | None]] = []
        seen = {self._real[0]}
        todo = [Path(self._lexical[0])]
        while todo:
            folder = todo.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for e in entries:
                p = Path(e.path)
                link, is_dir = e.is_symlink(), e.is_dir()      # is_dir follows a link
                if link and (refusal := self.check(p)) is not None:
                    if is_dir or p.suffix.lower() in wanted:
                        out.append((p, refusal))
                elif is_dir:
                    real = os.path.realpath(p)
                    if not link or (not _under(real, [self._real[0]]) and real not in seen):
                        seen.add(real)
                        todo.append(p)
                elif p.suffix.lower() in wanted:
                    out.append((p, None if e.is_file() else Refusal(NOT_A_FILE, f"{p} is not a regular file")))
        return sorted(out, key=lambda item: item[0])


def name_digests(names: Iterable[str], base: Path, allow_roots: Iterable[Path] = ()) -> list[tuple[str, str | None]]:
    """(name, sha256 of its bytes) for each name (sorted) relative to `base`, the tree's root, for the
    fingerprint of an input shard that refers to other files: a name that is missing, or that the tree
    refuses, gets None (the reading step quarantines it later). Nothing outside the tree is read, not even
    to hash it."""
    import hashlib
    tree = InputTree(base, allow_roots)
    out: list[tuple[str, str | None]] = []
    for name in sorted(set(names)):
        try:
            got = tree.open_name(name, base)
        except (OSError, ValueError):
            got = None
        if got is None or isinstance(got, Refusal):
            out.append((name.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), None))
            continue
        with got:
            out.append((name.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
                        hashlib.file_digest(got, "sha256").hexdigest()))
    return out
