"""Upper bounds on what a recipe may ask for, so `curate validate` catches what would otherwise run out
of memory or overflow hours later (a budget of 1e30 tokens, 10^8 MinHash bands, a plan of 10^8 tasks).

Each bound is far above any real run and says why it is where it is:
- MAX_TOKENS = 2^53: token budgets and targets. The largest integer a float64 holds exactly; the
  mixture planner multiplies budgets by float shares, and the ledger stores int64 sums of them.
- MAX_EPOCHS = 1000, MAX_WEIGHT = 1e6: repetition and blending weights (ratios; larger ones are typos).
- MAX_PERMUTATIONS = 2048: MinHash bands × rows. datatrove uses 14 × 8 = 112; `signature()` holds a
  shingles × permutations uint64 matrix per document (10k shingles × 2048 = 160 MiB).
- MAX_SEED = 2^32 - 1: numpy's RandomState (the MinHash permutations) takes no larger seed.
- MAX_PLAN_NODES = 500,000 task nodes in the plan, counted by `curation.plan.size` (from each
  phase's own `node_count`) before any node is built, and bounding MinHash's bands × partitions here; the driver holds every node with its spec (3.4 KB each measured on the demo plan with
  tracemalloc, so ~1.7 GB at the bound) and submits each as a task. 80k input files plan ~400k nodes
  (process, exact keys, signatures, decontamination, tokenize per file).
"""
from __future__ import annotations

MAX_TOKENS = 2**53
MAX_EPOCHS = 1000.0
MAX_WEIGHT = 1e6
MAX_PERMUTATIONS = 2048
MAX_SEED = 2**32 - 1
MAX_SEQ_LENGTH = 2**20
MAX_PLAN_NODES = 500_000
