"""The peak resident memory of the process that imports this: what the memory tests' child processes report.

Not `getrusage(...).ru_maxrss`: Linux carries a process's high-water mark across `exec`, so a child that a
pytest worker holding 500 MB starts reports 500 MB whatever it does itself, and a growth measured as the
difference of two such readings is 0, a bound that passes whatever the code does. (A 20 MB record's
tokenization measured so grew "by 0 bytes" inside the suite and by 67 MiB alone.) VmHWM belongs to the
process's own address space, new at `exec`, and `reset` lowers it to the present RSS, so `peak() - before`
after a reset is what the process grew by since."""
from __future__ import annotations

from pathlib import Path


def reset() -> int:
    """Lower the high-water mark to the present RSS (clear_refs 5, Linux 4.0 on) and return it, in bytes."""
    Path("/proc/self/clear_refs").write_text("5")
    return peak()


def peak() -> int:
    """This process's RSS high-water mark in bytes: since its `exec`, or since the last `reset`."""
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024
