"""The ledger tables of the selection phase, from its resolve tasks' markers, checked against the
`select` step's own counts.

- `quality_thresholds`: per pool and group (language): documents that reached the step, kept,
  the threshold score, documents strictly above it, tied at it and tied kept, top_fraction, the
  score field and the tie rule;
- `quality_selected`: per pool, source and group: documents and kept;
- `quality_histogram`: per pool, group and score bin (50 over [0, 1]): documents and kept (the
  report's histograms).
"""
from __future__ import annotations

import pyarrow as pa

from curation.errors import ConservationError

TIE_RULE = "keep ceil(top_fraction*n) by score desc, ties by source order, shard, row"

_KEY = [("run", pa.string()), ("pool", pa.string()), ("language", pa.string())]
TABLES = {
    "quality_thresholds": pa.schema([*_KEY, ("field", pa.string()), ("documents", pa.int64()), ("kept", pa.int64()),
                                     ("threshold", pa.float64()), ("above", pa.int64()), ("tied", pa.int64()),
                                     ("tied_kept", pa.int64()), ("top_fraction", pa.float64()),
                                     ("tie_rule", pa.string())]),
    "quality_selected": pa.schema([("run", pa.string()), ("pool", pa.string()), ("source", pa.string()),
                                   ("language", pa.string()), ("documents", pa.int64()), ("kept", pa.int64())]),
    "quality_histogram": pa.schema([*_KEY, ("bin", pa.int32()), ("lower", pa.float64()), ("upper", pa.float64()),
                                    ("documents", pa.int64()), ("kept", pa.int64())]),
}


def ledger_rows(run: str, pools: dict[str, dict], totals: dict, step: str, reason: str) -> dict[str, list[dict]]:
    """`pools`: pool -> its resolve marker. Raises when the step's counts disagree with the selection."""
    rows: dict[str, list[dict]] = {name: [] for name in TABLES}
    for pool, m in pools.items():
        rows["quality_thresholds"] += [
            {"run": run, "pool": pool, "language": g["group"], "field": m["field"], "documents": g["documents"],
             "kept": g["kept"], "threshold": g["threshold"], "above": g["above"], "tied": g["tied"],
             "tied_kept": g["tied_kept"], "top_fraction": g["top_fraction"], "tie_rule": TIE_RULE}
            for g in m["groups"]]
        rows["quality_selected"] += [{"run": run, "pool": pool, "source": s["source"], "language": s["group"],
                                      "documents": s["documents"], "kept": s["kept"]} for s in m["sources"]]
        rows["quality_histogram"] += [{"run": run, "pool": pool, "language": h["group"], "bin": h["bin"],
                                       "lower": h["lower"], "upper": h["upper"], "documents": h["documents"],
                                       "kept": h["kept"]} for h in m["histogram"]]
    for source in {r["source"] for r in rows["quality_selected"]} | {s for m in pools.values() for s in m["covered"]}:
        mine = [r for r in rows["quality_selected"] if r["source"] == source]
        docs, kept = sum(r["documents"] for r in mine), sum(r["kept"] for r in mine)
        st = totals.get(source, {}).get(step)
        if st is None or st.records_in != docs or st.dropped.get(reason, 0) != docs - kept:
            got = "no step" if st is None else f"{st.records_in} in, {st.dropped.get(reason, 0)} dropped"
            raise ConservationError(f"source {source!r}: the `{step}` step saw {got}, but the selection ranked "
                                    f"{docs} documents and kept {kept}; the drop lists and the shards disagree "
                                    f"(re-run the recipe; a stale work/select/ is recomputed)")
    return rows
