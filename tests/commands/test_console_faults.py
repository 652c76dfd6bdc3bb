"""Operator faults (OSError of the classes in `curation.core.faults`) are exit 1 with one sentence, wherever
they are raised: in the driver, in a task of the local executor, or in a Ray task (whose error wraps the
cause). Other exceptions stay exit 70 with their traceback. On 32447ae an OSError in the driver was exit 70."""
from __future__ import annotations

import errno

import pytest

from curation.commands.console import Session
from curation.errors import CurateError


def _raise(exc):
    def fn(_):
        raise exc
    return fn


@pytest.mark.parametrize("code, advice", [(errno.EROFS, "the file system is read-only"),
                                          (errno.ENOSPC, "no space left on the device"),
                                          (errno.EACCES, "permission denied"), (errno.ENOENT, "no such file"),
                                          (errno.EISDIR, "is a folder where a file is expected"),
                                          (errno.ENOTDIR, "a part of the path is a file")])
def test_an_os_error_in_the_driver_is_a_sentence(capsys, code, advice):
    assert Session().run(_raise(OSError(code, "x", "/data/out/ledger/t.parquet")), None, ["run"]) == 1
    err = capsys.readouterr().err
    assert f"curate: error: /data/out/ledger/t.parquet: {advice}" in err and f"(errno {code})" in err
    assert "Traceback" not in err and "internal error" not in err


def _task_error(cause: OSError, ray: bool) -> CurateError:
    """What the executors raise: `task K failed: <repr>`, from the cause (local) or from Ray's wrapper."""
    class RayTaskError(OSError):   # Ray's is of the cause's class too, and carries it as `.cause`
        def __init__(self, c):
            super().__init__(f"ray::run_node() ... OSError: [Errno 28] {c.strerror}: '{c.filename}'")
            self.cause = c
    err = CurateError(f"task tokenize/web/00001 failed: {cause!r}" + ("\nremote traceback ..." if ray else ""))
    if ray:
        err.__context__ = RayTaskError(cause)
        err.__suppress_context__ = True
    else:
        err.__cause__ = cause
    return err


@pytest.mark.parametrize("ray", [False, True])
def test_a_full_disk_in_a_task_is_a_sentence(capsys, ray):
    cause = OSError(errno.ENOSPC, "No space left on device", "/out/tokenized/web/parts/00001.bin.tmp")
    assert Session().run(_raise(_task_error(cause, ray)), None, ["run"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("curate: error: task tokenize/web/00001 failed: /out/tokenized/web/parts/00001.bin.tmp: no space "
                   "left on the device: free space or choose a larger disk, then run the command again (a run "
                   "keeps its completed tasks) (errno 28)")


def test_pyarrow_style_errno_in_the_message_counts(capsys):
    e = OSError("[Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device")
    assert Session().run(_raise(e), None, ["run"]) == 1
    assert "no space left on the device" in capsys.readouterr().err


def test_other_errors_stay_bugs(capsys):
    assert Session().run(_raise(OSError(errno.EBADF, "Bad file descriptor")), None, ["run"]) == 70
    assert Session().run(_raise(KeyError("x")), None, ["run"]) == 70
