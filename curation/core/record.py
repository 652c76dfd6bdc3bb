"""Records and the bookkeeping every step keeps: `Record`, `Drop`, `StepStats`, `QuarantineSink`.

For every step, `records_in == records_out + sum(dropped) + sum(quarantined)`; the ledger
checks this for every step, source and shard. Besides the counts, every dropped or quarantined record
(and every record a step passed without doing its work, `passed`, with its reason) is a decision (source, step, id, outcome, reason, detail) that the sink keeps for auditors
(`OUT/ledger/decisions/`).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Record:
    """One sample. `id` is stable and unique within its source."""
    id: str
    source: str
    text: str
    meta: dict[str, Any] = field(default_factory=dict)
    # token sequences this record writes, by shard suffix ("" = the source's own shards; see
    # `curation.core.layout` for the others), set by the tokenize step
    shards: dict[str, list] = field(default_factory=dict)
    # what a sample holds besides its text, by processed column, so that no modality is a field here
    # (`Modality.extra_row` writes them, `record_columns` reads them back): `image`, the encoded image of an
    # image sample (its caption is `text`); `audio`, the float32 24 kHz mono PCM of a clip (its transcript is
    # `text`); `media`, the encoded files of a record that holds several, in the order its `meta` lists them
    # (an interleaved document's `meta["images"]`, a conversation's `meta["media"]`); a plug-in's own values
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Drop:
    """Returned by `keep`/`process` to drop a record on purpose (counted by `reason`); `detail` names the
    evidence where there is one (the kept duplicate, the cluster, the matched benchmark item)."""
    reason: str
    detail: str = ""


@dataclass
class StepStats:
    step: str
    records_in: int = 0
    records_out: int = 0
    dropped: Counter = field(default_factory=Counter)
    quarantined: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    notes: Counter = field(default_factory=Counter)  # counts that are no record flow (PII replaced by kind, ...)

    def balanced(self) -> bool:
        return self.records_in == self.records_out + sum(self.dropped.values()) + sum(self.quarantined.values())

    def __add__(self, other: StepStats) -> StepStats:
        """The counts of one step over two shards (summing a source's shards: `ledger.rows`). Counters are
        added with `update`, which keeps zero counts (`Counter.__add__` would drop them)."""
        if other.step != self.step:
            raise ValueError(f"cannot add the counts of step {other.step!r} to those of {self.step!r}")
        total = StepStats(self.step, self.records_in + other.records_in, self.records_out + other.records_out,
                          Counter(self.dropped), Counter(self.quarantined), self.seconds + other.seconds,
                          Counter(self.notes))
        total.dropped.update(other.dropped)
        total.quarantined.update(other.quarantined)
        total.notes.update(other.notes)
        return total

    def to_json(self) -> dict:
        return {"step": self.step, "records_in": self.records_in, "records_out": self.records_out,
                "dropped": dict(sorted(self.dropped.items())),
                "quarantined": dict(sorted(self.quarantined.items())), "seconds": self.seconds,
                **({"notes": dict(sorted(self.notes.items()))} if self.notes else {})}

    @classmethod
    def from_json(cls, d: dict) -> StepStats:
        return cls(d["step"], d["records_in"], d["records_out"], Counter(d["dropped"]),
                   Counter(d["quarantined"]), d["seconds"], Counter(d.get("notes", {})))


class QuarantineSink:
    """Collects a task's quarantined records (written to `quarantine/`) and every drop and quarantine
    decision (written to the ledger's `decisions` dataset); the runtime writes both out atomically."""

    def __init__(self) -> None:
        self.entries: list[dict] = []
        self.decisions: list[tuple[str, str, str, str, str]] = []   # (step, id, outcome, reason, detail)

    def add(self, *, source: str, step: str, record_id: str, reason: str, detail: str, raw: str = "") -> None:
        self.entries.append({"source": source, "step": step, "id": record_id, "reason": reason,
                             "detail": detail[:500], "raw": raw[:2000]})
        self.decisions.append((step, record_id, "quarantined", reason, detail[:500]))

    def dropped(self, *, step: str, record_id: str, reason: str, detail: str = "") -> None:
        self.decisions.append((step, record_id, "dropped", reason, detail[:500]))

    def passed(self, *, step: str, record_id: str, reason: str, detail: str = "") -> None:
        """A record the step kept without doing its work on it, on purpose (a classifier that does not cover
        the record's language): counted in records_out, its reason recorded as a `passed` decision."""
        self.decisions.append((step, record_id, "passed", reason, detail[:500]))
