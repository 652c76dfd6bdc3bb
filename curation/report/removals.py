"""Why records were removed: the ledger's drop and quarantine reasons, grouped, the long tail folded.

- Reason families: a reason that names one of many values (`language_es`, `language_fr`, ... from
  the language filter) joins one row per step, "language (other)", with the number of values and
  the largest ones in its detail. `language_low_score` and `language_unknown` stay rows of their own.
- Folding: a reason that is under `FOLD_SHARE` of the removals of every source is folded, with the
  other small reasons of its step, into one "other (N reasons)" row listing them. A reason that
  matters to one source only (a small source's near duplicates) keeps its row. A step with a single
  small reason keeps it (folding one row into one row hides it for nothing).

Every record stays counted: the rows of a source sum to its removals. The full list is the ledger
view `drop_reasons` (`curate ledger OUT --table drop_reasons`).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

FOLD_SHARE = 0.02
# (reason prefix, suffixes that are reasons of their own, row label, what the suffixes are)
FAMILIES = (("language_", ("low_score", "unknown"), "language (other)", "languages"),)
TOP = 3   # values named in a grouped row's detail


@dataclass
class Removal:
    step: str
    reason: str
    kind: str                       # "dropped" or "quarantined"
    records: dict[str, int] = field(default_factory=dict)     # per source
    members: dict[str, int] = field(default_factory=dict)     # grouped reasons (or family values) -> records
    detail: str = ""
    folded: bool = False

    @property
    def total(self) -> int:
        return sum(self.records.values())


def _family(reason: str):
    for prefix, own, label, what in FAMILIES:
        if reason.startswith(prefix) and reason[len(prefix):] not in own:
            return label, what, reason[len(prefix):]
    return None


def _listing(members: dict[str, int], what: str) -> str:
    top = sorted(members.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{k} {v:,}" for k, v in top[:TOP])
    return f"{len(members)} {what}: {shown}{', …' if len(top) > TOP else ''}"


def _entries(rows: dict):
    for kind, table in (("dropped", "drops"), ("quarantined", "quarantine")):
        for r in rows.get(table, []):
            yield r["source"], r["step"], r["reason"], kind, r["records"]


def group_removals(rows: dict, fold_share: float = FOLD_SHARE) -> list[Removal]:
    """The removal rows of a run in pipeline order (steps by position, then records, largest first)."""
    groups: dict[tuple[str, str, str], Removal] = {}
    for source, step, reason, kind, n in _entries(rows):
        fam = _family(reason)
        label = fam[0] if fam else reason
        g = groups.setdefault((step, kind, label), Removal(step, label, kind))
        g.records[source] = g.records.get(source, 0) + n
        if fam:
            g.members[fam[2]] = g.members.get(fam[2], 0) + n
            g.detail = _listing(g.members, fam[1])
    per_source: dict[str, int] = defaultdict(int)
    for g in groups.values():
        for s, n in g.records.items():
            per_source[s] += n

    def small(g: Removal) -> bool:
        return all(n < fold_share * per_source[s] for s, n in g.records.items())

    by_step: dict[tuple[str, str], list[Removal]] = defaultdict(list)
    for g in groups.values():
        by_step[(g.step, g.kind)].append(g)
    out: list[Removal] = []
    for (step, kind), gs in by_step.items():
        tail = [g for g in gs if small(g)]
        keep = [g for g in gs if not small(g)] if len(tail) > 1 else gs
        keep.sort(key=lambda g: (-g.total, g.reason))
        out += keep
        if len(tail) > 1:
            other = Removal(step, f"other ({len(tail)} reasons)", kind, folded=True)
            for g in tail:
                other.members[g.reason] = g.total
                for s, n in g.records.items():
                    other.records[s] = other.records.get(s, 0) + n
            other.detail = _listing(other.members, "reasons")
            out.append(other)
    position = _step_positions(rows)
    return sorted(out, key=lambda g: (position.get(g.step, len(position)), g.kind, g.folded))   # stable


def pipeline_order(rows: dict) -> list[str]:
    """Every step of the run in pipeline order: each source's chain (the `steps` table's positions) merged so
    that a step comes after every step before it in any chain. A step's smallest position is not that order:
    chains differ in length (a text source's ninth step is a corpus-wide phase, an image source's third),
    so sorting by it put exact dedup between the text filters. Among steps that may come next, the one a
    source earlier in the ledger reaches first goes first; contradicting chains (none are planned) fall
    back to that rule."""
    import heapq

    chains: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for r in rows.get("steps", []):
        chains[r["source"]].append((r["position"], r["step"]))
    first: dict[str, tuple[int, int]] = {}
    after: dict[str, set[str]] = defaultdict(set)
    before: dict[str, int] = defaultdict(int)
    for i, chain in enumerate(chains.values()):
        steps = [st for _, st in sorted(chain)]
        for p, st in enumerate(steps):
            first.setdefault(st, (i, p))
        for a, b in zip(steps, steps[1:]):
            if b not in after[a]:
                after[a].add(b)
                before[b] += 1
    ready = [(first[st], st) for st in first if before[st] == 0]
    heapq.heapify(ready)
    order: list[str] = []
    placed: set[str] = set()
    while len(order) < len(first):
        if not ready:       # a cycle between chains: take the earliest-reached step left
            st = min((first[s], s) for s in first if s not in placed)[1]
        else:
            st = heapq.heappop(ready)[1]
            if st in placed:
                continue
        order.append(st)
        placed.add(st)
        for b in sorted(after[st]):
            before[b] -= 1
            if before[b] == 0 and b not in placed:
                heapq.heappush(ready, (first[b], b))
    return order


def _step_positions(rows: dict) -> dict[str, int]:
    return {st: i for i, st in enumerate(pipeline_order(rows))}
