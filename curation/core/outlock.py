"""One run at a time per output: the lock `<out>/.curate-lock` (a lock object for an output URL).

The lock names its holder: host (and machine id: containers may share a host name), pid (with the
process's start time, so a reused pid is not taken for the holder), recipe, recipe fingerprint (filled
in once planning has computed it) and start time. A second run is refused with that holder's description. A lock whose holder is gone (this host, no such
process) is stale and taken over, with a note; one from another host is never taken over, because this
machine cannot see whether that run still lives: the message says how to remove it.

A local lock is created with `O_CREAT | O_EXCL`, atomic on local file systems (and on NFSv3+). An S3
lock object is created with a conditional PUT (`If-None-Match: *`), atomic on AWS S3 and S3-compatible
servers that implement it (moto does); on a store that ignores the condition, two runs started at the
same moment could both take it. Taking over a stale lock object (delete, then create) is not atomic
either: two runs that find the same stale lock at the same moment may both proceed.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import time
from pathlib import Path

from curation.core.outloc import Remote, is_remote
from curation.errors import CurateError

LOCK = ".curate-lock"


def _machine() -> str:
    """This machine: its host name and, where there is one, its machine id (containers may share names)."""
    try:
        return f"{socket.gethostname()}/{Path('/etc/machine-id').read_text().strip()}"
    except OSError:
        return socket.gethostname()


def _started(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux `/proc`), else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass   # someone else's process: it exists
    now = _started(pid)
    return started is None or now is None or now == started


class OutputLock:
    """`with OutputLock(out, recipe=..., started_at=...) as lock:`; `lock.update(fingerprint=...)`."""

    def __init__(self, out: Path | str, notes: bool = True, **fields):
        self.out, self.notes = out, notes
        self.remote = Remote(out) if is_remote(out) else None
        self.where = f"{out}/{LOCK}" if self.remote else str(Path(out) / LOCK)
        self.holder = {"host": socket.gethostname(), "machine": _machine(), "pid": os.getpid(),
                       "pid_started": _started(os.getpid()),
                       "token": secrets.token_hex(8), "recipe": None, "fingerprint": None, "started_at": None,
                       **fields}

    # -- storage ------------------------------------------------------------------------------------
    def _create(self) -> bool:
        data = (json.dumps(self.holder, indent=1, sort_keys=True) + "\n").encode()
        if self.remote:
            try:
                self.remote.pipe(LOCK, data, create=True)
                return True
            except FileExistsError:
                return False
        try:
            fd = os.open(self.where, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return True

    def _read(self) -> dict | None:
        try:
            data = self.remote.cat(LOCK) if self.remote else Path(self.where).read_bytes()
        except FileNotFoundError:
            return None
        if data is None:
            return None
        try:
            return json.loads(data)
        except ValueError:
            return {}   # being written by its creator, or damaged: held, by an unknown holder

    def _remove(self) -> None:
        if self.remote:
            self.remote.rm([LOCK])
        else:
            Path(self.where).unlink(missing_ok=True)

    # -- protocol -----------------------------------------------------------------------------------
    def _here(self, other: dict) -> bool:
        return other.get("host") == self.holder["host"] and other.get("machine", self.holder["machine"]) == \
            self.holder["machine"]

    def acquire(self) -> None:
        for attempt in range(5):
            if self._create():
                return
            other = self._read()
            if other is None:
                continue   # released in between: try again
            if other == {} and attempt < 4:
                time.sleep(0.2)   # its creator is still writing it
                continue
            if self._here(other) and isinstance(other.get("pid"), int) \
                    and not _alive(other["pid"], other.get("pid_started")):
                if self.notes:
                    print(f"note: {self.out}: taking over the stale lock of {describe(other)} (that process is "
                          f"no longer running)", file=sys.stderr)
                self._remove()
                continue
            raise CurateError(self._refusal(other))
        raise CurateError(f"{self.where}: could not take the output lock (it changed hands repeatedly); try again")

    def _refusal(self, other: dict) -> str:
        held = f"{self.out} is in use by another curate run: {describe(other)}"
        if self._here(other):
            return f"{held}; wait for it to finish (or stop it), then run again"
        how = f"delete the object {self.where}" if self.remote else f"remove the file {self.where}"
        return (f"{held}. This machine cannot tell whether that run is still going; if it is not, {how} and "
                f"run again")

    def update(self, **fields) -> None:
        """Fill in fields (the recipe fingerprint once known) in the lock this run holds."""
        self.holder.update(fields)
        data = (json.dumps(self.holder, indent=1, sort_keys=True) + "\n").encode()
        if self.remote:
            self.remote.pipe(LOCK, data)
            return
        tmp = Path(f"{self.where}.{self.holder['token']}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.where)

    def release(self) -> None:
        other = self._read()
        if other and other.get("token") == self.holder["token"]:
            self._remove()

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def describe(holder: dict) -> str:
    if not holder:
        return "an unreadable lock (being written, or damaged)"
    fp = f", fingerprint {holder['fingerprint']}" if holder.get("fingerprint") else ""
    return (f"pid {holder.get('pid')} on host {holder.get('host')}, recipe {holder.get('recipe')!r}{fp}, "
            f"started {holder.get('started_at')}")
