"""The checks that make a run fail loudly instead of exiting 0 with nothing to train on.

A source fails the run when it keeps no document (unless every record it read was excluded by the
licence policy, which is an exclusion the sources table shows, or the source says `allow_empty`), or
when more of its input units than `max_quarantine_share` were quarantined. Items its acquisition
refused (a link out of the input tree, a hostile archive member) count as quarantined units: they are
bad input, not policy. URLs the network guard refused are policy, like a licence exclusion, and do not.
Each failure names the source, its top reasons and the setting that allows it.
"""
from __future__ import annotations

from collections import Counter

from curation.ledger.pools import main_pool


def _top(counter: Counter, n: int = 3) -> str:
    return ", ".join(f"{reason} ({count})" for reason, count in counter.most_common(n)) or "none"


def source_failures(recipe, rows: dict) -> list[str]:
    read = {r["source"]: r["records_in"] for r in rows["steps"] if r["position"] == 0}
    kept = {s: t["documents"] for s, t in main_pool(rows).items()}
    quarantined: dict[str, Counter] = {}
    dropped: dict[str, Counter] = {}
    for q in rows["quarantine"]:
        quarantined.setdefault(q["source"], Counter())[q["reason"]] += q["records"]
    for d in rows["drops"]:
        dropped.setdefault(d["source"], Counter())[d["reason"]] += d["records"]
    refused: dict[str, Counter] = {}
    for a in rows.get("acquisition", []):
        if a["outcome"] == "refused" and a["kind"] != "urls":
            refused.setdefault(a["source"], Counter())[f"refused:{a['reason']}"] += a["items"]
    problems = []
    for src in recipe.sources:
        q = quarantined.get(src.name, Counter()) + refused.get(src.name, Counter())
        units = read.get(src.name, 0) + sum(refused.get(src.name, Counter()).values())
        d = dropped.get(src.name, Counter())
        share = sum(q.values()) / units if units else 0.0
        if share > src.max_quarantine_share:
            problems.append(f"source {src.name!r}: {sum(q.values())} of {units} input units quarantined "
                            f"({share:.0%}, above max_quarantine_share {src.max_quarantine_share:.0%}); top reasons: "
                            f"{_top(q)}. Fix the input (see OUT/quarantine/{src.name}/ and the `refused` list of "
                            f"OUT/raw/{src.name}/acquired.json), or raise "
                            f"`max_quarantine_share` on the source if this is expected")
            continue
        licence_only = units and d and all(r.startswith("licence_") for r in d) and not q
        if kept.get(src.name, 0) == 0 and not src.allow_empty and not licence_only:
            reasons = _top(q + d) if units else "the source has no input records"
            problems.append(f"source {src.name!r} keeps no document ({units} input unit(s) read; top reasons: "
                            f"{reasons}). Fix its input or filters, or set `allow_empty: true` on the source "
                            f"if an empty source is expected")
    return problems
