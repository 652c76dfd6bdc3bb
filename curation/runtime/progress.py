"""Progress of a stage: a rich bar on a terminal, one summary line per stage otherwise."""
from __future__ import annotations

import sys


class Bar:
    def __init__(self, label: str, total: int, enabled: bool):
        self.label, self.total, self.done = label, total, 0
        self._progress = None
        if enabled and sys.stderr.isatty():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )
            self._progress = Progress(TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), transient=False)
            self._progress.start()
            self._task = self._progress.add_task(label, total=total)
        self.enabled = enabled

    def advance(self, key: str) -> None:
        self.done += 1
        if self._progress:
            self._progress.update(self._task, advance=1)

    def close(self) -> None:
        if self._progress:
            self._progress.stop()
        elif self.enabled and self.total:
            print(f"{self.label}: {self.done}/{self.total} tasks", file=sys.stderr)
