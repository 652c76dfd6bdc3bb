"""Progress of a run: a rich row per stage on a terminal, one summary line per stage otherwise.

Stages run side by side (`curation.runtime.execute` schedules by dependencies), so there is one row
per stage, not one bar at a time; a stage's summary line is printed when its last task finishes.
"""
from __future__ import annotations

import sys


class Board:
    def __init__(self, totals: dict[str, int], enabled: bool):
        """`totals`: tasks per stage label, in the order the rows are shown."""
        self.totals, self.done = dict(totals), dict.fromkeys(totals, 0)
        self.enabled = enabled
        self._printed: set[str] = set()
        self._progress = None
        if enabled and sys.stderr.isatty() and any(totals.values()):
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )
            self._progress = Progress(TextColumn("{task.description:<14}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), transient=False)
            self._progress.start()
            self._rows = {label: self._progress.add_task(label, total=n) for label, n in totals.items() if n}

    def skip(self, label: str) -> None:
        """A task that needs no run (its outputs are current): it leaves the stage's total."""
        self.totals[label] -= 1
        if self._progress and label in self._rows:
            self._progress.update(self._rows[label], total=self.totals[label])
        self._maybe_print(label)

    def advance(self, label: str) -> None:
        self.done[label] += 1
        if self._progress and label in self._rows:
            self._progress.update(self._rows[label], advance=1)
        self._maybe_print(label)

    def _maybe_print(self, label: str) -> None:
        if (self.enabled and not self._progress and label not in self._printed and self.totals[label]
                and self.done[label] == self.totals[label]):
            self._printed.add(label)
            print(f"{label}: {self.done[label]}/{self.totals[label]} tasks", file=sys.stderr)

    def close(self) -> None:
        if self._progress:
            self._progress.stop()
            return
        for label in self.totals:   # a run that stopped early: what each stage got done
            if self.enabled and self.totals[label] and label not in self._printed:
                self._printed.add(label)
                print(f"{label}: {self.done[label]}/{self.totals[label]} tasks", file=sys.stderr)
