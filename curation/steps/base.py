"""The step contract: a step is a generator over records; the base class owns the bookkeeping.

A subclass implements one of
- `keep(record) -> bool | Drop` (a `Filter`),
- `process(record) -> Record | Drop` (a `Step` that may rewrite the record),
- `handle(batch) -> [Record | Drop | Exception, ...]`, one result per record (a `BatchStep`),
- `parse() -> Iterator[Record | Reject]` (a `Reader`: one item per input unit: line, row, sample),
- `encode(records) -> Iterator[Record]` over the whole shard (a `ShardStep`: encoders that plan
  batches over every record of the shard, such as the image and audio tokenizers).

The base counts records in/out, drops by reason and quarantines by reason, times itself and
applies the step's `on_error` policy to exceptions raised on a record, so no subclass counts by
hand:

    class MinWords(Filter):
        name = "min_words"
        def keep(self, record):
            return len(record.text.split()) >= 5 or Drop("too_few_words")

For every step, `records_in == records_out + sum(dropped) + sum(quarantined)`; the ledger
checks this for every step, source and shard.

A `StepSpec` is a step as a recipe declares it: its name, the settings it reads (what its node's
fingerprint covers) and how to build it inside a task. Plans, `explain` and tasks all compose the
same specs (`curation.plan.pipeline`), so the chain a user is shown is the chain that runs. Its
`resources` (`curation.core.resources`) are what its task asks the scheduler for: one CPU, unless an
encoder runs a codec the recipe put on a GPU.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curation.core.io import is_url
from curation.core.record import Drop, QuarantineSink, Record, StepStats
from curation.core.resources import Resources
from curation.errors import RecordError, StepFailed


@dataclass(frozen=True)
class StepSpec:
    name: str
    settings: dict                           # JSON-able: every setting the step reads
    build: Callable[..., Step]               # build(source=..., sink=...) -> the step
    resources: Resources = Resources()       # what its task asks the scheduler for


@dataclass(frozen=True, slots=True)
class Reject:
    """Yielded by a reader's `parse` for an input unit that becomes no record: damaged input is
    quarantined with its location, detail and (a preview of) the raw bytes; `quarantine=False` is a drop
    by design (a WARC request record, a non-HTML response, a page without main text), counted by reason."""
    loc: str
    reason: str
    detail: str = ""
    raw: str = ""
    quarantine: bool = True


class Step:
    name = "step"

    def __init__(self, *, on_error: str = "quarantine", source: str = "", sink: QuarantineSink | None = None):
        self.on_error = on_error
        self.source = source
        self.sink = sink if sink is not None else QuarantineSink()
        self.stats = StepStats(self.name)

    # -- helpers for subclasses -------------------------------------------------
    def drop(self, record: Record, reason: str, detail: str = "") -> None:
        self.stats.dropped[reason] += 1
        self.sink.dropped(step=self.name, record_id=record.id, reason=reason, detail=detail)

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
            self.drop(record, reason, repr(exc))
        else:
            self.quarantine(record.id, reason, repr(exc), record.text)

    def _settle(self, record: Record, result) -> Record | None:
        """Count one record's outcome: a kept record is returned, a drop or failure is counted."""
        if isinstance(result, Exception):
            self.fail(record, result)
            return None
        if isinstance(result, Drop):
            self.drop(record, result.reason, result.detail)
            return None
        if result is None:
            return None
        self.stats.records_out += 1
        return result

    # -- the contract -----------------------------------------------------------
    def process(self, record: Record) -> Record | Drop:
        raise TypeError(f"{type(self).__name__} must implement process() or run()")

    def run(self, records: Iterable[Record]) -> Iterator[Record]:
        stats = self.stats
        for record in records:
            start = time.perf_counter()
            stats.records_in += 1
            result: Record | Drop | Exception
            try:
                result = self.process(record)
            except Exception as exc:  # noqa: BLE001 - the on_error policy decides
                result = exc
            kept = self._settle(record, result)
            stats.seconds += time.perf_counter() - start
            if kept is not None:
                yield kept


class Filter(Step):
    """A step that keeps or drops records without changing them (unless `keep` edits text)."""

    def keep(self, record: Record) -> bool | Drop:
        raise TypeError(f"{type(self).__name__} must implement keep()")

    def process(self, record: Record) -> Record | Drop:
        verdict = self.keep(record)
        if verdict is True:
            return record
        return verdict if isinstance(verdict, Drop) else Drop(self.name)


class BatchStep(Step):
    """A step that handles `batch_size` records at a time: `handle(batch)` returns one result per
    record (the record, a `Drop`, or the exception it raised)."""
    batch_size = 256

    def handle(self, batch: list[Record]) -> list[Record | Drop | Exception]:
        raise TypeError(f"{type(self).__name__} must implement handle()")

    def _flush(self, batch: list[Record]) -> Iterator[Record]:
        start = time.perf_counter()
        results = self.handle(batch)
        if len(results) != len(batch):
            raise TypeError(f"{type(self).__name__}.handle returned {len(results)} results for {len(batch)} records")
        kept = [k for r, res in zip(batch, results) if (k := self._settle(r, res)) is not None]
        self.stats.seconds += time.perf_counter() - start
        yield from kept

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


class ShardStep(Step):
    """A step that needs every record of its shard before it can emit (batch plans over the shard).

    `encode(records)` yields the records it keeps, in the order it writes them; a record it does not
    yield must have been dropped or quarantined through `self.drop` / `self.quarantine`."""

    def encode(self, records: list[Record]) -> Iterator[Record]:
        raise TypeError(f"{type(self).__name__} must implement encode()")

    def run(self, records: Iterable[Record]) -> Iterator[Record]:
        start = time.perf_counter()
        batch = list(records)
        self.stats.records_in += len(batch)
        for record in self.encode(batch):
            self.stats.records_out += 1
            self.stats.seconds += time.perf_counter() - start
            yield record
            start = time.perf_counter()
        self.stats.seconds += time.perf_counter() - start


class Reader(Step):
    """Reads one input shard. `parse()` yields one item per input unit: a `Record`, or a `Reject`
    that is quarantined with its reason. The base counts every unit, quarantines records whose id
    repeats within the shard (`duplicate_id`: ids must be unique), and makes a file that holds no
    unit one `empty_file` unit, so that it shows in the ledger."""
    name = "read"

    def __init__(self, path: Path | str, *, shard_label: str, **kw):
        super().__init__(**kw)
        self.path = path if is_url(path) else Path(path)   # a local file, or an fsspec URL read in place
        self.shard_label = shard_label

    def parse(self) -> Iterator[Record | Reject]:
        raise TypeError(f"{type(self).__name__} must implement parse()")

    def portable(self, detail: str) -> str:
        """`detail` with this input's location written as the recipe names it (`shard_label`): the evidence a
        parser writes names the file it read, and the ledger must not depend on where the checkout lives
        (the same recipe and inputs give the same decisions in any folder)."""
        where = str(self.path)
        return detail.replace(where, self.shard_label) if where and where != self.shard_label else detail

    def run(self, records: Iterable[Record] = ()) -> Iterator[Record]:
        stats, seen = self.stats, set()
        start = time.perf_counter()
        for item in self.parse():
            stats.records_in += 1
            if isinstance(item, Reject) and item.quarantine:
                self.quarantine(item.loc, item.reason, self.portable(item.detail), item.raw)
            elif isinstance(item, Reject):
                self.stats.dropped[item.reason] += 1
                self.sink.dropped(step=self.name, record_id=item.loc, reason=item.reason,
                                  detail=self.portable(item.detail))
            elif item.id in seen:
                self.quarantine(item.id, "duplicate_id", f"{self.shard_label}: id {item.id!r} already seen in this shard")
            else:
                seen.add(item.id)
                stats.records_out += 1
                stats.seconds += time.perf_counter() - start
                yield item
                start = time.perf_counter()
        if stats.records_in == 0:
            stats.records_in += 1
            self.quarantine(f"{self.shard_label}:0", "empty_file", f"{self.shard_label}: file has no records; "
                            f"remove it from the source or check how it was produced")
        stats.seconds += time.perf_counter() - start


def settings_of(cfg: Any, *exclude: str) -> dict:
    """The JSON-able settings of a recipe model (a step's declared settings)."""
    return cfg.model_dump(mode="json", exclude=set(exclude)) if cfg is not None else {}
