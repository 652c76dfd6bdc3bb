"""Ordinary operator faults: a read-only or full disk, no permission, a missing path, a folder where a
file is expected. They are not bugs in curate, so the command says, in one sentence, which path and what
to do (exit 1) instead of printing a traceback as an internal error (exit 70).

`operator_fault(exc)` finds such an `OSError` in an exception's chain (`__cause__`, `__context__`, and the
`cause` a Ray task error carries), `describe(e)` is the sentence, and `named(path)` gives an error that
lost its path (a failed `write()` on an open file, pyarrow's and numpy's writers) the path back.
"""
from __future__ import annotations

import errno
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ADVICE = {
    errno.EROFS: "the file system is read-only: point the command at a writable location",
    errno.ENOSPC: "no space left on the device: free space or choose a larger disk, then run the command "
                  "again (a run keeps its completed tasks)",
    errno.EDQUOT: "the disk quota is exhausted: free space or raise the quota, then run the command again "
                  "(a run keeps its completed tasks)",
    errno.EACCES: "permission denied: fix the permissions or choose another location",
    errno.EPERM: "operation not permitted: fix the permissions or choose another location",
    errno.ENOENT: "no such file or folder: check the path",
    errno.EISDIR: "is a folder where a file is expected: give the file's path",
    errno.ENOTDIR: "a part of the path is a file where a folder is expected: check the path",
}
_ERRNO_IN_TEXT = re.compile(r"\[errno (\d+)\]", re.IGNORECASE)


def fault_errno(e: BaseException) -> int | None:
    """The errno of an OSError, also when a library only wrote it into the message (pyarrow: `[errno 28]`)."""
    if not isinstance(e, OSError):
        return None
    if e.errno is not None:
        return e.errno
    m = _ERRNO_IN_TEXT.search(str(e))
    return int(m.group(1)) if m else None


def operator_fault(exc: BaseException | None) -> OSError | None:
    """The first OSError of an operator-fault class in `exc`'s chain, else None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        wrapped = getattr(exc, "cause", None)   # Ray's task error (itself of the cause's class) wraps it
        if isinstance(wrapped, BaseException):
            exc = wrapped
            continue
        if isinstance(exc, OSError) and fault_errno(exc) in ADVICE:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def describe(e: OSError) -> str:
    """`PATH: what went wrong (errno N): what to do`."""
    code = fault_errno(e)
    where = e.filename if isinstance(e, OSError) and e.filename else "(path not reported)"
    if getattr(e, "filename2", None):
        where = f"{where} -> {e.filename2}"
    advice = ADVICE[code] if code is not None and code in ADVICE else (e.strerror or "an operating-system error")
    return f"{where}: {advice} (errno {code})"


@contextmanager
def named(path: Path | str) -> Iterator[None]:
    """Re-raise an operator-fault OSError without a path as one naming `path`."""
    try:
        yield
    except OSError as e:
        code = fault_errno(e)
        if code in ADVICE and not e.filename:
            raise OSError(code, ADVICE[code].split(":")[0], str(path)) from e
        raise
