"""The ledger's `rank_plan` table: the run's image batches dealt to ranks (GPUs), and the imbalance predicted.

Every tokenize task that encodes images returns its planned batches ([tokens, images] each) in its
marker; here they are dealt again to 8, 64 and 800 ranks and to the run's own rank count
(`curation.steps.image.plan.rank_plan`: no rescan, no re-batching), per source and for all sources
together (source `(all)`). Imbalance is tokens per rank, max / mean - 1.

    run, source, batches, images, tokens     what was planned
    imbalance_8, imbalance_64, imbalance_800 predicted at those rank counts (the same for any executor)
    run_ranks, run_imbalance                 at this run's rank count: the GPUs its codec tasks were
                                             given, else its CPU slots (1 for the local executor); volatile
                                             columns, as they depend on where the run ran

Like `encoders` it describes how the work is spread, not what the shards hold, so it is not among the
manifests' ledger digests.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from curation.steps.image.plan import rank_plan

SIMULATED = (8, 64, 800)
RANK_PLAN = pa.schema([("run", pa.string()), ("source", pa.string()), ("batches", pa.int64()), ("images", pa.int64()),
                       ("tokens", pa.int64()), *[(f"imbalance_{n}", pa.float64()) for n in SIMULATED],
                       ("run_ranks", pa.int64()), ("run_imbalance", pa.float64())])
VOLATILE = ("run_ranks", "run_imbalance")
ALL = "(all)"


def _row(run: str, source: str, batches: list[list[int]], ranks: int) -> dict:
    tokens = np.asarray([b[0] for b in batches], dtype=np.int64)
    images = np.asarray([b[1] for b in batches], dtype=np.int64)
    return {"run": run, "source": source, "batches": int(tokens.size), "images": int(images.sum()),
            "tokens": int(tokens.sum()),
            **{f"imbalance_{n}": round(rank_plan(tokens, images, n).imbalance, 6) for n in SIMULATED},
            "run_ranks": ranks, "run_imbalance": round(rank_plan(tokens, images, ranks).imbalance, 6)}


def rank_rows(run: str, tokenize_nodes, markers: dict, ranks: int) -> list[dict]:
    by_source: dict[str, list[list[int]]] = {}
    for node in tokenize_nodes:
        batches = (markers.get(node.key) or {}).get("image_batches")
        if batches:
            by_source.setdefault(node.source, []).extend(batches)
    if not by_source:
        return []
    rows = [_row(run, s, b, ranks) for s, b in sorted(by_source.items())]
    return rows + [_row(run, ALL, [b for s in sorted(by_source) for b in by_source[s]], ranks)]


def describe(rows: list[dict]) -> str:
    """The line `curate run` prints: the whole run's predicted imbalance at its rank count and the simulated ones."""
    total = next(r for r in rows if r["source"] == ALL)
    sims = ", ".join(f"{n}: {100 * total[f'imbalance_{n}']:.2f}%" for n in SIMULATED)
    return (f"image batch plan: {total['batches']} batch(es), {total['images']} image(s), {total['tokens']:,} tokens; "
            f"predicted imbalance over {total['run_ranks']} rank(s) {100 * total['run_imbalance']:.2f}% "
            f"(max/mean - 1; simulated {sims})")
