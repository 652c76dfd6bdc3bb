"""Open files: a task that streams many files at once asks the operating system for enough descriptors before it
opens them. The drop-list assemblies hold one open resolve part per partition (up to 4,096, `dedup.*.partitions`),
and a node's default soft limit is often 1,024 (systemd, most distributions): without asking, the assembly of a
run with about a thousand partitions would fail with `Too many open files` after every other phase had run."""
from __future__ import annotations

import resource

from curation.errors import CurateError

MARGIN = 256   # what the rest of the process holds besides (Python, pyarrow, Ray's sockets and logs)


def ensure_open_files(n: int, what: str) -> None:
    """Raise this process's soft limit on open files to `n` plus `MARGIN` where it is lower; where the hard limit
    does not allow it, refuse with what to change."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = n + MARGIN
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        raise CurateError(f"{what} opens {n:,} files at once, but this process may open at most {hard:,} (the hard "
                          f"limit, `ulimit -Hn`): raise it to {need:,} or more on every node (`ulimit -n {need}` "
                          f"before `ray start`, or LimitNOFILE= in its systemd unit), or lower the recipe's partitions")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
