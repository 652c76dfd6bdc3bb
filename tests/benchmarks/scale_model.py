"""A cost model from the measured per-phase costs (scale.json) to a billion documents on a Ray cluster.

Per phase, the measured wall seconds on this machine (2 workers) are fitted as a + b·N over the corpus
sizes (least squares): `a` is the fixed part (models loading in each worker, Ray start-up), `b` the
cost per document. How a phase spreads over a cluster depends on its kind:

    shard     one task per input shard (process, exact keys, signatures, tokenize): b·W core-seconds
              per document on W measured workers, spread over every core; memory: the measured peak
              of one task, times the cores of a node
    shuffle   tasks per hash range (exact parts: one per 16 shards up to 1024; MinHash bands × partitions):
              compute spread over min(tasks, cores); plus the reads the file layout implies (below),
              at `NODE_IO` bytes/s per node
    single    one task (exact resolution, clustering, the driver's ledger, manifests and report): b·N as
              measured here, on one core and one stream of reads and writes; memory: what it holds per
              duplicate or document, measured
    parts     the merge: a task per output part spreads the copy; one stream per source hashes the whole
              set (its rate measured by bench_merge_spread.py, reports/benchmarks/merge_spread.json)

`predict` checks the model on this machine: fitted on the smaller runs, it predicts the largest one.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

KIND = {"start": "fixed", "process": "shard", "exact_keys": "shard", "signatures": "shard", "tokenize": "shard",
        "exact_part": "shuffle", "band": "shuffle", "cc_scatter": "shuffle", "cc_round": "shuffle",
        "cc_resolve": "shuffle", "cc_settle": "single", "exact": "single", "clusters": "single", "merge": "parts",
        "finish": "single", "exact_scatter": "shuffle", "exact_round": "shuffle", "exact_resolve": "shuffle",
        "exact_settle": "single"}
NODE_IO = 2e9        # bytes/s a node reads from the shared store (assumed: NVMe or a parallel file system)
BANDS, SIG_BYTES = 14, 14 * 8                 # MinHash band keys per document
KEY_BYTES = 2 * 32                            # exact dedup: content and URL key entries (4 × uint64 each)
# the driver's plan and scheduler graph per input shard: bench_plan_memory.py, 2,000 -> 8,000 shards (12-07):
# the plan's RSS grew 44 -> 76 MB and the scheduler's 23 -> 32 MB, 6.8 KB a shard (MinHash 63 partitions,
# exact dedup's default 1,024)
PLAN_BYTES_PER_SHARD = 6.8e3


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(a, b) of seconds = a + b·N by least squares; with one point, all of it per document."""
    if len(points) == 1:
        n, s = points[0]
        return 0.0, s / n
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    b = max(b, 0.0)
    return max(my - b * mx, 0.0), b


ORDER = ["start", "process", "exact_keys", "exact_part", "exact_scatter", "exact_round", "exact_settle", "exact_resolve",
         "exact", "signatures", "band", "cc_scatter", "cc_round",
         "cc_settle", "cc_resolve", "clusters", "tokenize", "merge", "finish"]


def ordered(phases) -> list[str]:
    """Phases in run order (the JSON file sorts them by name)."""
    return sorted(dict.fromkeys(phases), key=lambda p: ORDER.index(p) if p in ORDER else len(ORDER))


def phase_fits(runs: dict, sizes: list[int]) -> dict[str, tuple[float, float]]:
    phases = ordered(p for n in sizes for p in runs[str(n)]["phases"])
    return {p: fit([(n, runs[str(n)]["phases"].get(p, {}).get("seconds", 0.0)) for n in sizes]) for p in phases}


def predict(results: dict) -> list[str]:
    """Fit on all but the largest curate run; predict the largest; compare."""
    runs = results.get("curate", {})
    sizes = sorted(int(n) for n in runs)
    if len(sizes) < 3:
        return []
    train, target = sizes[:-1], sizes[-1]
    fits = phase_fits(runs, train)
    got = runs[str(target)]["phases"]
    lines = [f"Fitted on {', '.join(f'{n // 1000}k' for n in train)}; predicted for {target:,} documents on this "
             "machine (2 workers) against the measurement:", "",
             "| phase | predicted s | measured s | measured / predicted |", "|---|---|---|---|"]
    total_p = total_m = 0.0
    for p, (a, b) in fits.items():
        pred, meas = a + b * target, got.get(p, {}).get("seconds", 0.0)
        total_p, total_m = total_p + pred, total_m + meas
        lines.append(f"| {p} | {pred:,.1f} | {meas:,.1f} | {meas / pred:.2f} |" if pred > 0.05 else
                     f"| {p} | {pred:,.1f} | {meas:,.1f} | — |")
    lines.append(f"| **all** | **{total_p:,.1f}** | **{runs[str(target)]['wall']:,.1f}** (sum of phases "
                 f"{total_m:,.1f}) | **{runs[str(target)]['wall'] / total_p:.2f}** |")
    loads = ", ".join(f"{n // 1000}k {runs[str(n)].get('load', 0):.1f}" for n in (*train, target))
    lines += ["", f"15-minute load averages of these runs: {loads}. A gap beyond 20% is the shared machine's load "
              "(the fit's slope follows whichever run met the quietest machine), not a phase that grows faster than "
              "linearly: the memory side, which load does not move, is checked in Goals (every process at 1M within "
              "1.2× of its 100k peak)."]
    return lines


def _worker_peak(runs: dict, phase: str) -> float:
    return max((r["phases"].get(phase, {}).get("ray worker", 0.0) for r in runs.values()), default=0.0)


def cluster(results: dict, docs: float = 1e9, nodes: int = 16, cores: int = 64) -> tuple[list[str], str, float]:
    """The 1B table, the name of the phase that limits the time and the driver's GB at the finish."""
    runs = results.get("curate", {})
    sizes = sorted(int(n) for n in runs)
    if len(sizes) < 2:
        return [], "", 0.0
    largest = runs[str(sizes[-1])]
    fits = phase_fits(runs, sizes)
    workers = largest["workers"]
    total_cores = nodes * cores
    tok_per_doc = largest["tokenized_bytes"] / largest["documents"] / 2   # parts + merged file: half each
    edges_per_doc = largest["edges"] / largest["documents"]
    shared_per_doc = largest["exact_shared"] / largest["documents"]
    # MinHash: the recipe sets `partitions` (≤ 16M keys per band task); its default, one per 16 shards up to
    # 1024, would make 14 × 1024 band tasks each read a slice of every one of 200,000 shards at 1B
    band_parts = max(1, math.ceil(docs / 16e6))
    shards = docs / 5000
    exact_parts = min(math.ceil(shards / 16), 1024)   # the default (`corpus.partition.auto_partitions`)
    rows, worst, total, driver_gb = [], ("", 0.0), 0.0, 0.0
    for phase, (a, b) in fits.items():
        kind = KIND.get(phase, "single")
        peak = _worker_peak(runs, phase)
        if kind == "fixed":
            input_bytes = docs * largest["input_bytes"] / largest["documents"]
            hashing = input_bytes / NODE_IO   # the driver reads every local input once (sha256, 8 at a time)
            secs, mem, note = a + b * sizes[-1] + hashing, "—", "Ray start-up and planning: the driver plans " \
                f"{shards * 5 + BANDS * band_parts + exact_parts:,.0f} tasks and holds them with the scheduler's " \
                f"graph, ~{PLAN_BYTES_PER_SHARD / 1e3:.1f} KB per shard: {shards * PLAN_BYTES_PER_SHARD / 1e9:,.1f} " \
                "GB in the driver (bench_plan_memory.py; the partitioned tasks share one deps list, so no term " \
                f"grows as shards × partitions); and it hashes every local input for the plan's identities, " \
                f"{input_bytes / 1e12:,.2f} TB at {NODE_IO / 1e9:.0f} GB/s: {hashing / 60:,.0f} min, the one term " \
                "of the start that reads the corpus (inputs on an object store are identified by their ETag, " \
                "with no read)"
        elif kind == "shard":
            secs = a + b * workers * docs / total_cores
            mem = f"{cores * peak / 1024:,.0f} GB ({cores} tasks × {peak:,.0f} MB)"
            note = "embarrassingly parallel; a task's memory is bounded by its shard (5,000 documents)"
        elif phase == "band":
            tasks = BANDS * band_parts
            slices = tasks * shards             # each task preads its (band, partition) slice of every shard
            asked = docs * BANDS * 12 + slices * 56   # key + row per document and band; header, 2 table entries
            # from storage in 4 KiB pages (no readahead): the header's, the table entry's and the slice's
            reads = slices * 4096 * (2 + math.ceil(docs / shards / band_parts * 12 / 4096))
            row_major = tasks * docs * SIG_BYTES   # before: every task read every shard's whole file
            secs = b * workers * docs / min(tasks, total_cores) + reads / (nodes * NODE_IO)
            held = docs / band_parts * 16 * 3
            mem = f"{min(cores, tasks / nodes) * held / 1e9:,.1f} GB ({held / 1e9:,.2f} GB per task)"
            note = (f"{tasks} tasks ({band_parts} partitions); each preads its slice of every shard's band-major "
                    f"signature file: {asked / 1e12:,.2f} TB asked for, {reads / 1e12:,.2f} TB of 4 KiB pages "
                    f"({slices / 1e6:,.0f}M slices of ~{docs / shards / band_parts * 12:,.0f} bytes: the page floor); "
                    f"row-major it was {row_major / 1e12:,.0f} TB (reports/benchmarks/band_major.md)")
        elif phase == "exact_part":
            reads = docs * KEY_BYTES
            secs = b * workers * docs / min(exact_parts, total_cores) + reads / (nodes * NODE_IO) + \
                shards * exact_parts * 50e-6 / min(exact_parts, total_cores)
            held = docs * KEY_BYTES / exact_parts * 3
            mem = f"{min(cores, exact_parts / nodes) * held / 1e9:,.1f} GB ({held / 1e9:,.2f} GB per task)"
            note = (f"{exact_parts} hash ranges, each reads its slice of every shard's keys "
                    f"({shards * exact_parts:,.0f} slice reads); raise the cap of 1024 beyond 1B")
        elif phase == "exact":
            secs = b * docs
            repeated = shared_per_doc * docs
            mem, note = f"{repeated * 24 * 4 / exact_parts / 1e6:,.1f} MB per resolve task", (
                f"{repeated / 1e6:,.0f}M key entries repeat; resolved per connected component of the document-key "
                f"graph ({exact_parts} partitions: exact_scatter, rounds, exact_resolve, each ~1/parts of the rows; "
                "reports/benchmarks/cc.md), then one task writes the drop lists shard by shard (time linear in the "
                "duplicates, in one process; it streams every resolve part, holding a row group of 4,096 rows and "
                f"a batch of 1,024 of each: about {exact_parts * 0.15:,.0f} MB for {exact_parts:,} parts, "
                "`corpus/cc_files.ShardRuns`). Hours: fitted on runs where one task resolved everything")
        elif phase in ("exact_scatter", "exact_round", "exact_resolve", "exact_settle"):
            secs = b * workers * docs / min(exact_parts, total_cores)
            mem, note = f"{shared_per_doc * docs * 24 * 4 / exact_parts / 1e6:,.1f} MB per task", (
                "the exact phase's partitioned connected components (as MinHash's cc_*): 1/parts of the rows each")
        elif phase in ("cc_scatter", "cc_round", "cc_resolve"):
            # at 1B the recipe sets `partitions` (band_parts above), so each task holds 1/parts of the edges
            # (reports/benchmarks/cc.md); measured at the default, one partition per 16 shards
            edges = edges_per_doc * docs
            reads = edges * 16 * (band_parts if phase == "cc_scatter" else 1)
            secs = b * workers * docs / min(band_parts, total_cores) + reads / (nodes * NODE_IO)
            held = edges * 16 * 4 / band_parts
            mem = f"{min(cores, band_parts / nodes) * held / 1e9:,.1f} GB ({held / 1e9:,.2f} GB per task)"
            note = {"cc_scatter": f"{band_parts} tasks, each reads every band file's edges ({reads / 1e12:,.2f} TB "
                                  "in all) and keeps its hash partition's",
                    "cc_round": f"{band_parts} tasks per round (2 planned): labels of 1/parts of the documents "
                                "with an edge, proposals and look-ups from the others' files",
                    "cc_resolve": f"{band_parts} tasks: whole components by the range of their smallest node, "
                                  "the survivor rule, ids and scores (nodes only, no edges)"}[phase]
        elif phase == "cc_settle":
            secs = a + b * docs
            mem, note = "1/parts of the edges", (
                "one task that runs the rounds the plan lacks, one partition at a time; on band edges (stars "
                "round each bucket's first document) it finds nothing left to change; a long chain would make "
                "it the one serial term (time, not memory)")
        elif phase == "clusters":
            secs = b * docs
            mem, note = f"{_worker_peak(runs, phase):,.0f} MB (one task, streams the parts)", (
                f"one task concatenates the resolved parts ({edges_per_doc * docs / 1e6:,.0f}M edges' clusters) into "
                "duplicates.parquet and the drop lists, shard by shard: its time is linear in the near duplicates in "
                f"one process (one task per block of shards would spread it); it streams the {band_parts} resolve "
                "parts, a row group and a batch of each (`corpus/cc_files.ShardRuns`)")
        elif phase == "merge":
            secs, mem, note = _merge(b * docs, docs * tok_per_doc, nodes, total_cores)
        else:   # finish: the driver's ledger, manifests, hand-off, report
            d0, d1 = fit([(n, runs[str(n)]["phases"].get("finish", {}).get("driver", 0.0)) for n in sizes])
            driver_gb = (d0 + d1 * docs) / 1024
            mem = (f"driver {(d0 + d1 * docs) / 1024:,.1f} GB ({d1 * 1e3:,.3f} MB per 1,000 documents fitted; by "
                   f"what it holds: the stage's plan order, 16 bytes per planned occurrence ({docs * 16 / 1e9:,.0f} GB), "
                   "and a source's sampling arrays while drawn, ~32 bytes per document; the plan's nodes and markers "
                   "are per shard, the ledger's growing tables part files)")
            secs, note = _finish(results, docs, nodes, total_cores, b)
        if secs > worst[1]:
            worst = (phase, secs)
        total += secs
        rows.append(f"| {phase} | {kind} | {secs / 3600:,.2f} | {mem} | {note} |")
    head = ["| phase | kind | hours | memory per node | what bounds it |", "|---|---|---|---|---|"]
    return head + rows + [f"| **all** | | **{total / 3600:,.1f}** | | |"], worst[0], driver_gb


def _merge(one_task_s: float, nbytes: float, nodes: int, total_cores: int) -> tuple[float, str, str]:
    """The merge of a source's `nbytes` of tokens: a task per part (`runtime.merge`, measured on 2 cores by
    bench_merge_spread.py) spreads the copy over the cluster; the set's unsplit sha256 stays one stream."""
    path = Path(__file__).resolve().parents[2] / "reports" / "benchmarks" / "merge_spread.json"
    if not path.is_file():
        return one_task_s, "< 0.1 GB (streams)", "one task per source copies and hashes every byte in sequence"
    spread = json.loads(path.read_text())
    hashes = sorted(r["seconds"] for r in spread["runs"] if r["variant"] == "hash")
    per_byte = hashes[len(hashes) // 2] / (spread["tokens"] * 4)
    hash_s = per_byte * nbytes
    copy_s = max(one_task_s / total_cores, 2 * nbytes / (nodes * NODE_IO))
    parts = nbytes / 2**32
    return max(hash_s, copy_s), "< 0.1 GB per task (streams)", (
        f"{nbytes / 1e12:,.1f} TB into ~{parts:,.0f} parts of at most `shards.max_part_bytes` (4 GiB), each part "
        f"a task of its own (`runtime.fanout`): the copy and its counts spread over the cluster "
        f"({copy_s / 60:,.0f} min: the one-task slope over {total_cores:,} cores, or the store's I/O), while the "
        f"merge task streams the set once more for its `unsplit_sha256` ({1 / per_byte / 1e9:.2f} GB/s measured, "
        f"bench_merge_spread.py: {hash_s / 3600:,.2f} h), the one term that stays in one process (a digest "
        "as a tree of parts would change what identifies a split set; one task doing it all: "
        f"{one_task_s / 3600:,.2f} h)")


MAX_PREFIX_TOKENS = 2**31 - 1   # megatron-core's int32 document length: the default bound of a packed prefix


def _finish(results: dict, docs: float, nodes: int, total_cores: int, b: float) -> tuple[float, str]:
    """The finish at `docs` documents: the driver's own steps, fitted (bench_finish_parts.py), and the copy into
    the packed hand-off, which by default is a task per prefix of at most 2^31 - 1 tokens once a stage has more
    (below that the driver writes its one prefix). Without `finish_parts`, the in-run finish's slope `b`."""
    parts = results.get("finish_parts", {}).get("sizes", {})
    if len(parts) < 2:
        return b * docs, ("measured in one process (the driver): ledger, manifests, report and the hand-off's copy "
                          "of every planned token")
    sizes = sorted(int(n) for n in parts)
    a0, a1 = fit([(n, parts[str(n)]["tasks"]["driver_own"]) for n in sizes])
    big = parts[str(sizes[-1])]
    tokens = big["tokens"] / sizes[-1] * docs   # kept tokens, each planned once (the benchmark's one-stage recipe)
    per_token = 2 * big["tasks"]["prefix_tasks"] / big["tokens"]   # task-seconds per token on the 2 workers
    prefixes = math.ceil(tokens / MAX_PREFIX_TOKENS)
    waves = math.ceil(prefixes / total_cores)
    task_s = per_token * tokens / prefixes
    io_s = 2 * tokens * 4 / (nodes * NODE_IO)   # read the merged shards, write the prefixes
    copy_s = max(waves * task_s, io_s)
    # the large ledger tables' digests, hashed by tasks (`merkle.chunk_digests`): the 2 workers' measured wall is
    # at most twice the task-seconds, spread over the cluster's cores
    digest_s = 2 * big["tasks"].get("digest_tasks", 0.0) / sizes[-1] * docs / total_cores
    own_s = a0 + a1 * docs
    note = (f"the driver's own steps {own_s / 3600:,.2f} h (fitted on bench_finish_parts.py: "
            f"{a1 * 1e6:,.2f} s per million documents; linear in one process: DuckDB's copy of the part files "
            "into `ledger.duckdb`, the report, drawing the stage's order and slicing it per prefix) + the growing "
            f"ledger tables' digests as tasks ({digest_s:,.1f} s over the cluster) + the Megatron hand-off's copy of "
            f"{tokens * 4 / 1e12:,.1f} TB: by default {prefixes:,} prefixes of at most 2^31 - 1 tokens, each a "
            f"task ({task_s:,.0f} s each at the measured {per_token * 1e9:,.1f} task-s per billion tokens; "
            f"bound by the store's I/O, {io_s / 60:,.1f} min): a stage of more than one prefix is written by tasks, "
            "so the copy is not the driver's (this model counted it there until 2026-12-07: 2.42 h)")
    return own_s + digest_s + copy_s, note


def section(results: dict) -> list[str]:
    table, limit, driver_gb = cluster(results)
    if not table:
        return []
    check = predict(results)
    return [
        "## Cost model to a billion documents", "",
        "From the fitted per-phase costs (`tests/benchmarks/scale_model.py`): seconds = a + b·N per phase on "
        "this machine, then spread by the phase's kind over a Ray cluster of 16 nodes × 64 cores (1,024 "
        f"cores), assuming {NODE_IO / 1e9:.0f} GB/s of reads per node from the shared store for the shuffle "
        "phases; single tasks run at the speed measured here. The corpus keeps the benchmark's shape: "
        "5,000 documents per shard (200,000 shards), 10% planted copies.", "",
        *table, "",
        f"The phase that limits the time is **{limit}**; the driver at the finish holds about {driver_gb:,.1f} GB "
        "at a billion documents by the fitted growth of its peak (ledger, manifests, hand-off, report). The "
        "table's last column says what it would take to remove each limit.", "",
        *check,
    ]
