"""The step contract: a step is a generator over records; the base class owns the bookkeeping.

A subclass implements one of
- `keep(record) -> bool | Drop` (a `Filter`), or
- `process(record) -> Record | Drop` (a `Step` that may rewrite the record), or
- `run(records)` itself, for batching steps, calling `self.emit`, `self.drop`, `self.quarantine`.

The base counts records in/out, drops by reason and quarantines by reason, times itself and
applies the step's `on_error` policy to exceptions raised on a record:

    class MinWords(Filter):
        name = "min_words"
        def keep(self, record):
            return len(record.text.split()) >= 5 or Drop("too_few_words")

For every step, `records_in == records_out + sum(dropped) + sum(quarantined)`; the ledger
checks this for every step, source and shard.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from curation.core.record import Drop, QuarantineSink, Record, StepStats
from curation.errors import RecordError, StepFailed


class Step:
    name = "step"

    def __init__(self, *, on_error: str = "quarantine", source: str = "", sink: QuarantineSink | None = None):
        self.on_error = on_error
        self.source = source
        self.sink = sink if sink is not None else QuarantineSink()
        self.stats = StepStats(self.name)

    # -- helpers for subclasses -------------------------------------------------
    def drop(self, record: Record, reason: str) -> None:
        self.stats.dropped[reason] += 1

    def quarantine(self, record_id: str, reason: str, detail: str = "", raw: str = "") -> None:
        self.stats.quarantined[reason] += 1
        self.sink.add(source=self.source, step=self.name, record_id=record_id, reason=reason,
                      detail=detail, raw=raw)

    def fail(self, record: Record, exc: Exception) -> None:
        """Apply `on_error` to an exception raised while handling `record`."""
        reason = exc.reason if isinstance(exc, RecordError) else f"error:{type(exc).__name__}"
        if self.on_error == "raise":
            raise StepFailed(f"step {self.name!r} failed on record {record.id!r} of source {self.source!r}: "
                             f"{exc!r}; set on_error: quarantine (or skip) on this step to continue") from exc
        if self.on_error == "skip":
            self.drop(record, reason)
        else:
            self.quarantine(record.id, reason, repr(exc), record.text)

    # -- the contract -----------------------------------------------------------
    def process(self, record: Record) -> Record | Drop:
        raise TypeError(f"{type(self).__name__} must implement process() or run()")

    def run(self, records: Iterable[Record]) -> Iterator[Record]:
        stats = self.stats
        for record in records:
            start = time.perf_counter()
            stats.records_in += 1
            try:
                result = self.process(record)
            except Exception as exc:  # noqa: BLE001 - the on_error policy decides
                self.fail(record, exc)
                result = None
            stats.seconds += time.perf_counter() - start
            if isinstance(result, Drop):
                self.drop(record, result.reason)
            elif result is not None:
                stats.records_out += 1
                yield result


class BatchStep(Step):
    """A step that handles records `batch_size` at a time: subclasses implement `_flush(batch)`, which
    yields the kept records and counts its own `records_out`, drops and time."""
    batch_size = 256

    def _flush(self, batch: list[Record]) -> Iterator[Record]:
        raise TypeError(f"{type(self).__name__} must implement _flush()")

    def run(self, records: Iterable[Record]) -> Iterator[Record]:
        batch: list[Record] = []
        for record in records:
            self.stats.records_in += 1
            batch.append(record)
            if len(batch) >= self.batch_size:
                yield from self._flush(batch)
                batch = []
        if batch:
            yield from self._flush(batch)


class Filter(Step):
    """A step that keeps or drops records without changing them (unless `keep` edits text)."""

    def keep(self, record: Record) -> bool | Drop:
        raise TypeError(f"{type(self).__name__} must implement keep()")

    def process(self, record: Record) -> Record | Drop:
        verdict = self.keep(record)
        if verdict is True:
            return record
        return verdict if isinstance(verdict, Drop) else Drop(self.name)
