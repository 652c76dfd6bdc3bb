"""Simulated ranks: the image batch plan dealt to 8, 64 and 800 ranks (GPUs), on the demo's images and on a
100k-image synthetic manifest; writes the "## Simulated ranks" section of reports/benchmarks/cluster.md
(the rest of that file is left as it is).

For each data set the batches are planned once from the scanned sizes (`curation.steps.image.plan.plan`, the
tokenize step's own plan, ranks=1), then dealt to each rank count twice: whole batches, longest first to the
least loaded rank (the plan's `rank` column), and per rank (`Plan.for_ranks`: a batch may be split between
ranks, whole images of one shape). Imbalance = tokens per rank, max / mean - 1. "Bound" is the best any
assignment of whole images can do: max(one image's tokens, ceil(total / ranks)) / mean - 1.

    .venv/bin/python tests/benchmarks/bench_ranks.py [--out reports/benchmarks/cluster.md]
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
RANKS = (8, 64, 800)
SECTION = "## Simulated ranks"


def demo_sizes():
    """(width, height, document) of every image the demo's image sources read, and their area and budget."""
    from curation.recipe import load_recipe
    from curation.steps.image.declaration import image_settings
    from curation.steps.image.scan import scan_tar
    loaded = load_recipe(REPO / "recipes" / "demo.yaml")
    w, h, settings = [], [], set()
    for src in loaded.recipe.sources:
        if src.modality != "image":
            continue
        im = image_settings(src)
        settings.add((im.area, im.batch_tokens))
        for f in loaded.inputs[src.name]:
            for row in scan_tar(Path(f.path)):
                if row.width and row.height:
                    w.append(row.width)
                    h.append(row.height)
    (area, budget), = settings   # the demo's two image sources share their settings
    return np.asarray(w), np.asarray(h), np.arange(len(w)), area, budget


def synthetic(n: int, seed: int = 0):
    """Web-like sizes (the planner test's): widths 200-2048 px, common aspect ratios, one image per document."""
    rng = np.random.default_rng(seed)
    w = rng.integers(200, 2048, n)
    h = (w * rng.choice([0.5, 0.75, 1.0, 4 / 3, 1.5, 2.0], n)).astype(np.int64)
    return w, h, np.arange(n)


def best_max(items: list[int], ranks: int) -> int:
    """The lowest busiest-rank load any assignment of these whole images reaches (exhaustive; small sets only)."""
    items = sorted(items, reverse=True)
    lower = max(items[0], -(-sum(items) // ranks))
    for limit in range(lower, sum(items) + 1):
        bins = [0] * min(ranks, len(items))

        def place(i: int, bins: list[int] = bins, limit: int = limit) -> bool:   # bound: called in this iteration
            if i == len(items):
                return True
            tried = set()
            for j in range(len(bins)):
                if bins[j] + items[i] <= limit and bins[j] not in tried:
                    tried.add(bins[j])
                    bins[j] += items[i]
                    if place(i + 1):
                        return True
                    bins[j] -= items[i]
            return False
        if place(0):
            return limit
    return sum(items)


def rows(name: str, w, h, doc, area: int, budget: int) -> list[str]:
    from curation.steps.image.plan import plan
    t = time.perf_counter()
    p = plan(w, h, doc, area=area, budget=budget, ranks=1)
    t_plan = time.perf_counter() - t
    per_image = p.tokens // p.images
    out = []
    for r in RANKS:
        whole = plan(w, h, doc, area=area, budget=budget, ranks=r).imbalance(r)
        t = time.perf_counter()
        rp = p.for_ranks(r)
        t_rank = time.perf_counter() - t
        mean = p.tokens.sum() / r
        if p.images.sum() <= 32:   # exact
            bound = best_max(np.repeat(per_image, p.images).tolist(), r) / mean - 1
        else:                      # a lower bound: one image, or the even share
            bound = max(int(per_image.max()), -(-int(p.tokens.sum()) // r)) / mean - 1
        out.append(f"| {name} | {int(p.images.sum()):,} | {p.tokens.size:,} | {int(p.tokens.sum()):,} | {r} | "
                   f"{100 * whole:.2f}% | **{100 * rp.imbalance:.2f}%** | {100 * bound:.2f}% | {rp.batch.size:,} | "
                   f"{t_plan:.2f} / {t_rank:.2f} |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "reports" / "benchmarks" / "cluster.md")
    ap.add_argument("--images", type=int, default=100_000)
    a = ap.parse_args(argv)
    w, h, doc, area, budget = demo_sizes()
    table = rows(f"demo (area {area:,}, batches of {budget:,})", w, h, doc, area, budget)
    sw, sh, sdoc = synthetic(a.images)
    table += rows(f"synthetic {a.images // 1000}k (area 65,536, batches of 16,384)", sw, sh, sdoc, 256 * 256, 16384)
    table += rows(f"synthetic {a.images // 1000}k (area 262,144, batches of 65,536)", sw, sh, sdoc, 512 * 512, 65536)
    load = os.getloadavg()[0]
    section = [SECTION, "",
               f"Produced by `.venv/bin/python tests/benchmarks/bench_ranks.py` on {time.strftime('%Y-%m-%d')}: "
               f"{platform.machine()}, {os.cpu_count()} CPUs (load {load:.1f}), Python {platform.python_version()}. "
               "The image batch plan (`curation.steps.image.plan`) dealt to simulated ranks; nothing is encoded. "
               "Whole batches: longest first to the least loaded rank. Per rank: `Plan.for_ranks`, which may split "
               "a batch between ranks (whole images of one shape: codes do not depend on batching), then swaps images "
               "between the busiest and the idlest rank while that lowers the maximum. Bound: the best any "
               "assignment of whole images can reach (exhaustive search up to 32 images; above, the lower bound "
               "max(one image, the even share)). Pieces: batch parts after splitting. Seconds: "
               "planning from the sizes / re-planning for the rank count (no rescan). Goal: below 2%.", "",
               "| data | images | batches | tokens | ranks | whole batches | per rank | bound | pieces | seconds |",
               "|---|---|---|---|---|---|---|---|---|---|", *table, "",
               f"The demo has {int(len(w))} images of 60 to 70 tokens: at 8 ranks (two images each) the per-rank plan "
               "reaches the exhaustive optimum, which is above 2%; at 64 and 800 ranks most ranks get no image at "
               "all, so no plan can come near 2% there (the bound column). The goal is met wherever it can be: on 100k "
               "images the per-rank plan stays below 2% at every rank count, where whole batches do not at 800 ranks "
               "(two batches per rank). `curate run` prints the same figures for its own images and stores them in "
               "the ledger table `rank_plan` (at 8, 64, 800 ranks and at the run's own rank count).", ""]
    text = a.out.read_text() if a.out.is_file() else "# Cluster benchmarks\n\n"
    if SECTION in text:
        start = text.index(SECTION)
        nxt = text.find("\n## ", start + len(SECTION))
        text = text[:start] + "\n".join(section) + (text[nxt + 1:] if nxt != -1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(section)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    print("\n".join(section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
