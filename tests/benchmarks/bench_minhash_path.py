"""The MinHash path, curate vs datatrove, with identical kept documents and token sequences.

Same corpus as `bench_scale.py` (`scale_corpus`: real sentences recombined, 10% planted copies: 8% near,
1% exact, 1% re-crawls; 5,000 documents per shard), but the same work on both sides:

- curate: a recipe of MinHash dedup only (5-grams, 14 bands × 8 rows, `keep: earliest`; no exact or URL
  dedup, no filters, NFC and ftfy off) and tokenization into Megatron shards
  (`tokenizers/curate-demo-v1.yaml`: `curate-demo-bpe.json`, `<|endoftext|>` appended to every document),
  `curate run --executor ray --workers 2`;
- datatrove: MinhashDedupSignature → MinhashDedupBuckets → MinhashDedupCluster → MinhashDedupFilter +
  MegatronDocumentTokenizer (`curate-demo-bpe.json`, `eos_token="<|endoftext|>"`, batches of 1000), each a
  LocalPipelineExecutor(workers=2) stage, MinhashConfig() (5-grams, 14 × 8). Its cluster step runs with
  `save_cluster_id` and its `.remove` files are rewritten from its own `.clusters` files to keep each
  cluster's earliest member (shard, row): curate's `keep: earliest` (`bench_text.earliest_survivors`, timed
  inside the cluster stage).

Checked: the kept ids (curate: processed rows less the MinHash drops; datatrove: corpus rows less the
rewritten `.remove` files) and each kept id's token sequence (its slice of `.bin` named by `.idx`) must be
identical; the clusters are compared as in `bench_text.compare`. Reported: wall seconds, datatrove s /
curate s, curate's phase windows (`scale_sampling.phase_windows`) with its summed task seconds per step
(ledger table `steps`), datatrove's stage seconds, the share of tokenization on each side and the ratio
that would be reached if curate's signature phase cost nothing.

Usage (the machine is shared: run under nice; figures go to reports/benchmarks/minhash_path.json, the
report reports/benchmarks/minhash_path.md is rendered from it after every size):

    nice -n 10 .venv/bin/python tests/benchmarks/bench_minhash_path.py --sizes 30000
    nice -n 10 .venv/bin/python tests/benchmarks/bench_minhash_path.py --sizes 300000
    .venv/bin/python tests/benchmarks/bench_minhash_path.py --render

Needs the bench extra (psutil, datatrove): pip install -e '.[test,bench]'.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_corpus
from scale_sampling import per_phase, phase_windows, sample_run

REPO = scale_corpus.REPO
sys.path.insert(0, str(REPO))
from tests.benchmarks.bench_text import compare, earliest_survivors, per_document  # noqa: E402

VOCAB = REPO / "tokenizers" / "curate-demo-v1.yaml"
TOKENIZER = REPO / "tokenizers" / "curate-demo-bpe.json"
RESULTS = REPO / "reports" / "benchmarks" / "minhash_path.json"
REPORT = REPO / "reports" / "benchmarks" / "minhash_path.md"
SCALE = REPO / "reports" / "benchmarks" / "scale.json"   # bench_scale's datatrove runs (curate-only sizes)
SOURCE = "web"
DEDUP = "{exact: null, minhash: {keep: earliest}}"   # exact dedup is on by default (`Dedup.exact`): off here
# the plan's stages for this recipe, in run order (`curate explain`)
STAGES = ["process", "signatures", "band", "cc_scatter", "cc_round", "cc_settle", "cc_resolve", "clusters",
          "tokenize", "merge"]
# the report's phase groups: curate's phase windows summed
GROUPS = {"start": ["start"], "process (read → parquet)": ["process"], "signatures": ["signatures"],
          "band + clustering": ["band", "cc_scatter", "cc_round", "cc_settle", "cc_resolve", "clusters"],
          "tokenize": ["tokenize"], "merge": ["merge"], "finish": ["finish"]}
DT_ORDER = ["start", "signatures", "buckets", "cluster", "filter+tokenize", "finish"]   # datatrove's stages


def recipe(folder: Path, corpus: Path) -> Path:
    path = folder / f"minhash-path-{corpus.name}.yaml"
    path.write_text(f"name: minhash_path\nvocabulary: {VOCAB}\ndedup: {DEDUP}\n"
                    f"tokenize_batch_size: 1000\nsources:\n  - name: {SOURCE}\n    license: MIT\n"
                    f"    input: {{paths: ['{corpus}/*.jsonl.gz'], id_field: id}}\n"
                    f"    normalize: {{nfc: false, ftfy: false}}\n")
    return path


def _env() -> dict:
    ray_tmp = Path(tempfile.mkdtemp(prefix="cmh-", dir="/tmp"))   # short: Ray's socket paths are limited
    return {**os.environ, "PYTHONPATH": str(REPO), "RAY_TMPDIR": str(ray_tmp), "TMPDIR": str(ray_tmp)}


def _commit() -> str:
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", "HEAD", "--", "curation"]).returncode
    return (head.stdout.strip() or "?") + ("+" if dirty else "")


def corpus_ids(corpus: Path) -> list[list[str]]:
    """Per corpus shard (sorted: datatrove's rank = curate's shard), the ids in row order."""
    return [[json.loads(line)["id"] for line in gzip.open(p, "rt", encoding="utf-8")]
            for p in sorted(corpus.glob("*.jsonl.gz"))]


def run_curate(corpus: Path, work: Path, n: int, workers: int) -> tuple[dict, dict]:
    import pyarrow.parquet as pq

    from curation.steps.droplist import read_drops
    out = work / f"curate-{n}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "curation.commands.cli", "run", str(recipe(work, corpus)), "--out", str(out),
           "--executor", "ray", "--workers", str(workers)]
    load_before = os.getloadavg()
    res = sample_run(cmd, env=_env())
    load_after = os.getloadavg()
    if res.returncode != 0:
        raise SystemExit(f"curate run failed at {n} documents:\n{res.output[-3000:]}")
    windows = phase_windows(out, STAGES, res.start, res.ready(), res.start + res.wall)
    phases = {k: v["seconds"] for k, v in per_phase(res, windows).items()}
    steps: dict[str, float] = {}
    for row in pq.read_table(out / "ledger" / "steps.parquet").to_pylist():
        steps[row["step"]] = steps.get(row["step"], 0.0) + row["seconds"]
    ids = [i for p in sorted((out / "processed" / SOURCE).glob("*.parquet")) for i in pq.read_table(p).column("id").to_pylist()]
    gone = {i for p in (out / "work").glob(f"*/drops/{SOURCE}/*.parquet") for i in read_drops(p)}
    kept = [i for i in ids if i not in gone]
    rows = pq.read_table(out / "work" / "minhash" / "clusters.parquet").to_pylist()
    clusters = {frozenset(m.split("/", 1)[1] for m in r["members"]): r["kept_id"] for r in rows}
    side = {"kept": kept, "tokens": per_document(kept, [out / "tokenized" / SOURCE / SOURCE]), "clusters": clusters,
            "exact": set()}
    shutil.rmtree(out, ignore_errors=True)
    return {"wall": res.wall, "phases": phases, "steps": steps, "kept": len(kept), "commit": _commit(),
            "load_before": load_before, "load_after": load_after}, side


DATATROVE = r"""
import sys, time
from pathlib import Path
import numpy as np
corpus, work, tokenizer, workers = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
if __name__ == "__main__":
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import MegatronDocumentTokenizer
    from tests.benchmarks.bench_text import earliest_survivors
    cfg, shards = MinhashConfig(), len(list(corpus.glob("*.jsonl.gz")))

    def align():   # curate's `keep: earliest`: each cluster keeps its smallest (shard, row)
        earliest_survivors(work / "remove", work / "remove-earliest")
        for rank in range(shards):   # a shard without removals: an empty file (the filter keeps all)
            (work / "remove-earliest" / f"{rank:06d}.remove").touch()

    stages = [
        ("signatures", [JsonlReader(str(corpus), glob_pattern="*.jsonl.gz"), MinhashDedupSignature(str(work / "sigs"), config=cfg)], shards, None),
        ("buckets", [MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=cfg)], cfg.num_buckets, None),
        ("cluster", [MinhashDedupCluster(str(work / "buckets"), str(work / "remove"), config=cfg, save_cluster_id=True)], 1, align),
        ("filter+tokenize", [JsonlReader(str(corpus), glob_pattern="*.jsonl.gz"), MinhashDedupFilter(str(work / "remove-earliest")),
                             MegatronDocumentTokenizer(str(work / "tok"), tokenizer_name_or_path=tokenizer,
                                                       eos_token="<|endoftext|>", batch_size=1000)], shards, None),
    ]
    for name, pipeline, tasks, after in stages:
        print(f"stage {name}", flush=True)
        LocalPipelineExecutor(pipeline, tasks=tasks, workers=min(workers, tasks), logging_dir=str(work / "logs" / name),
                              skip_completed=False).run()
        if after:
            after()
    print("stage done", flush=True)
"""


def run_datatrove(corpus: Path, work: Path, n: int, workers: int) -> tuple[dict, dict]:
    dt = work / f"datatrove-{n}"
    shutil.rmtree(dt, ignore_errors=True)
    dt.mkdir(parents=True)
    script = dt / "run.py"
    script.write_text(DATATROVE)
    load_before = os.getloadavg()
    res = sample_run([sys.executable, str(script), str(corpus), str(dt), str(TOKENIZER), str(workers)], env=_env())
    load_after = os.getloadavg()
    if res.returncode != 0:
        raise SystemExit(f"datatrove failed at {n} documents:\n{res.output[-3000:]}")
    marks = [(t, line.split(" ", 1)[1].strip()) for t, line in res.lines if line.startswith("stage ")]
    windows = [("start", res.start, marks[0][0])] + [(name, t, marks[k + 1][0]) for k, (t, name) in
                                                      enumerate(marks[:-1])] + [("finish", marks[-1][0], res.start + res.wall)]
    phases = {name: hi - lo for name, lo, hi in windows}
    # what the MinHash steps saw: (file, doc) = rows[file][doc]; file = rank = corpus shard
    rows = corpus_ids(corpus)
    members = earliest_survivors(dt / "remove", dt / "members")    # the cluster step's own .clusters files
    removed = {(int(p.stem), int(d)) for p in (dt / "remove").glob("*.remove") for d in np.fromfile(p, dtype="<u4").tolist()}
    aligned = {(int(p.stem), int(d)) for p in (dt / "remove-earliest").glob("*.remove")
               for d in np.fromfile(p, dtype="<u4").tolist()}
    clusters, native = {}, {}
    for m in members.values():
        names = frozenset(rows[f][d] for f, d in m)
        clusters[names] = rows[m[0][0]][m[0][1]]
        native[names] = [rows[f][d] for f, d in m if (f, d) not in removed]
    kept = [i for f, rank in enumerate(rows) for d, i in enumerate(rank) if (f, d) not in aligned]
    native_kept = {i for f, rank in enumerate(rows) for d, i in enumerate(rank) if (f, d) not in removed}
    prefixes = [p.with_suffix("") for p in sorted((dt / "tok").glob("*.idx"))]
    side = {"kept": kept, "tokens": per_document(kept, prefixes), "clusters": clusters, "native": native,
            "native_kept": native_kept}
    shutil.rmtree(dt, ignore_errors=True)
    return {"wall": res.wall, "phases": phases, "kept": len(kept), "load_before": load_before,
            "load_after": load_after}, side


def derived(c: dict, d: dict) -> dict:
    """The ratio, the share of tokenization on each side and the bounds it sets."""
    ph = c["phases"]
    sig = ph.get("signatures", 0.0)
    tok_c = ph.get("tokenize", 0.0) + ph.get("merge", 0.0)
    tok_d = d["phases"].get("filter+tokenize", 0.0)
    return {"ratio": d["wall"] / c["wall"],
            "curate_tokenize_share": tok_c / c["wall"], "datatrove_tokenize_share": tok_d / d["wall"],
            "curate_signature_share": sig / c["wall"],
            "datatrove_signature_share": d["phases"].get("signatures", 0.0) / d["wall"],
            # curate's signature phase at zero, all else as measured
            "ratio_signatures_free": d["wall"] / max(c["wall"] - sig, 1e-9),
            # curate doing nothing but its own tokenize + merge phases
            "ratio_curate_tokenize_only": d["wall"] / max(tok_c, 1e-9),
            # curate doing nothing but datatrove's own filter+tokenize stage (identical work)
            "ratio_tokenize_only": d["wall"] / max(tok_d, 1e-9)}


def load_results(path: Path = RESULTS) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def save_results(results: dict, path: Path = RESULTS) -> None:
    results["machine"] = {"cpus": os.cpu_count(), "platform": platform.machine(),
                          "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}
    path.write_text(json.dumps(results, indent=1, sort_keys=True))
    if path == RESULTS:
        REPORT.write_text(render(results))


def _f(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{x:,.{digits}f}"


def render(results: dict) -> str:
    m = results.get("machine", {})
    lines = ["# The MinHash path: curate vs datatrove, identical kept documents", "",
             ("Produced by `tests/benchmarks/bench_minhash_path.py` (figures in `minhash_path.json`) on "
              f"{m.get('date', '?')}, {m.get('platform', '?')}, {m.get('cpus', '?')} CPUs, Python {m.get('python', '?')}. "
              "**The machine is shared with other sessions** (load averages per run below, from `os.getloadavg()`, "
              "1 / 5 / 15 min, before → after each side), so absolute times carry their noise; both sides run "
              "one after the other in the same command."), "",
             ("Corpus: `scale_corpus` (as `bench_scale.py`): documents of 8-24 real sentences from "
              "`../shared/data/web_text/` recombined, 10% planted copies (8% near: 1-3% of words replaced; 1% "
              "exact; 1% re-crawls: a changed first line), 5,000 documents per input shard (`.jsonl.gz`)."), "",
             ("Same work on both sides: MinHash dedup only (5-grams, 14 bands × 8 rows; no exact or URL dedup, "
              "no filters, NFC/ftfy off), every cluster keeping its earliest member (shard, row), then "
              "tokenization with `tokenizers/curate-demo-bpe.json`, `<|endoftext|>` appended to every document, "
              "into Megatron `.bin`/`.idx`. curate: `curate run --executor ray --workers 2` (embedded Ray, "
              f"start-up included), recipe `dedup: {DEDUP}`. datatrove: "
              "MinhashDedupSignature → MinhashDedupBuckets → MinhashDedupCluster(save_cluster_id) → "
              "MinhashDedupFilter + MegatronDocumentTokenizer(batch_size=1000), each a "
              "LocalPipelineExecutor(workers=2) stage; its survivor rule (union-find root) is aligned with "
              "curate's by rewriting the `.remove` files from the cluster step's own `.clusters` files to keep "
              "each cluster's smallest (shard, row), timed inside its cluster stage (as `bench_text.py`)."), ""]
    for n in sorted(results.get("runs", {}), key=int):
        r = results["runs"][n]
        c, d, same, x = r["curate"], r["datatrove"], r["same"], r["derived"]
        lines += [f"## {int(n):,} documents", "",
                  f"Command: `{r['command']}`; curate's recipe `dedup: {r.get('dedup', '?')}`; code: commit {c['commit']}; "
                  f"{r['shards']} input shards, "
                  f"{r['input_bytes'] / 1e6:.0f} MB gzipped; run at {r['when']}.", "",
                  "| side | wall s | docs/s | kept | load before (1/5/15 min) | load after |", "|---|---|---|---|---|---|",
                  (f"| curate | {c['wall']:.1f} | {int(n) / c['wall']:,.0f} | {c['kept']:,} | "
                   f"{' / '.join(f'{v:.1f}' for v in c['load_before'])} | {' / '.join(f'{v:.1f}' for v in c['load_after'])} |"),
                  (f"| datatrove | {d['wall']:.1f} | {int(n) / d['wall']:,.0f} | {d['kept']:,} | "
                   f"{' / '.join(f'{v:.1f}' for v in d['load_before'])} | {' / '.join(f'{v:.1f}' for v in d['load_after'])} |"), "",
                  f"- **datatrove s / curate s: {x['ratio']:.2f}×** (goal ≥ 5×)"
                  + "".join(f"; an earlier run ({e['when']}): {e['curate']:.1f} s vs {e['datatrove']:.1f} s, "
                            f"{e['datatrove'] / e['curate']:.2f}×, curate's recipe dedup: {e['dedup']}; ids and tokens "
                            f"{'identical' if e['identical'] else 'DIFFERENT'}" for e in r.get("earlier", [])),
                  (f"- kept documents: curate {same['kept_curate']:,}, datatrove {same['kept_datatrove']:,}: "
                   + ("**identical ids**" if same["kept_identical"] else "**ids DIFFER**")),
                  ("- token sequences per kept id: " + (f"**identical** ({same['tokens_total']:,} tokens)"
                   if same["tokens_identical"] else f"**differ in {same['tokens_differ']:,} documents**")),
                  (f"- clusters: curate {same['clusters_curate']:,}, datatrove {same['clusters_datatrove']:,}, membership "
                   f"{'identical' if same['same_membership'] else 'DIFFERENT'}; under datatrove's native survivor rule "
                   f"{same['native_survivor_differs']:,} clusters would keep another member than curate "
                   f"({same['native_diff']:,} ids kept by one side only, {same['native_diff_explained']:,} of them in a "
                   "cluster of identical membership where each side keeps one member)"), "",
                  ("Per phase. curate: wall windows of its phases (`scale_sampling.phase_windows`: from the last "
                   "completion marker of the previous phase to the last of its own; `start` is recipe, plan, input "
                   "hashing and Ray start-up until the first worker, `finish` the ledger, manifests and report), and "
                   "the seconds its steps spent summed over their tasks (ledger table `steps`; the signature phase "
                   "and the band/clustering tasks record no step seconds). datatrove: wall seconds of each "
                   "LocalPipelineExecutor stage (`start`: interpreter and imports)."), "",
                  "| curate phase | wall s | share | | datatrove stage | wall s | share |", "|---|---|---|---|---|---|---|"]
        left = [(g, sum(c["phases"].get(p, 0.0) for p in ps)) for g, ps in GROUPS.items()]
        tok_c = c["phases"].get("tokenize", 0.0) + c["phases"].get("merge", 0.0)
        right = sorted(d["phases"].items(), key=lambda kv: DT_ORDER.index(kv[0]) if kv[0] in DT_ORDER else 99)
        for i in range(max(len(left), len(right))):
            a = (f"{left[i][0]} | {left[i][1]:.1f} | {100 * left[i][1] / c['wall']:.0f}%" if i < len(left) else " | | ")
            b = (f"{right[i][0]} | {right[i][1]:.1f} | {100 * right[i][1] / d['wall']:.0f}%" if i < len(right) else " | | ")
            lines.append(f"| {a} | | {b} |")
        lines += ["", "curate's step seconds, summed over tasks (two run at a time): "
                  + ", ".join(f"{k} {v:.1f}" for k, v in sorted(c["steps"].items(), key=lambda kv: -kv[1])), "",
                  "What bounds the ratio:", "",
                  (f"- tokenization (tokenize + merge on curate's side, filter+tokenize on datatrove's: the same "
                   f"tokenizer over the same {same['kept_curate']:,} documents) is {100 * x['curate_tokenize_share']:.0f}% "
                   f"of curate's wall time and {100 * x['datatrove_tokenize_share']:.0f}% of datatrove's; "
                   f"signatures are {100 * x['curate_signature_share']:.0f}% of curate's and "
                   f"{100 * x['datatrove_signature_share']:.0f}% of datatrove's"),
                  (f"- if curate's signature phase cost **zero**, all else as measured: {d['wall']:.1f} / "
                   f"{c['wall'] - c['phases'].get('signatures', 0.0):.1f} s = **{x['ratio_signatures_free']:.2f}×**"),
                  (f"- if curate cost nothing but its own tokenize and merge phases (no start-up, reading, "
                   f"signatures, clustering or ledger): {d['wall']:.1f} / {tok_c:.1f} s = "
                   f"**{d['wall'] / max(tok_c, 1e-9):.2f}×**"),
                  (f"- for reference, if curate's whole run cost what datatrove's filter+tokenize stage costs (reading "
                   f"the `.jsonl.gz`, the filter, the same tokenization): {d['wall']:.1f} / "
                   f"{d['phases'].get('filter+tokenize', 0.0):.1f} s = **{x['ratio_tokenize_only']:.2f}×**"),
                  (f"- the two sides run one after the other, not interleaved: the 1-minute load was "
                   f"{c['load_before'][0]:.1f} → {c['load_after'][0]:.1f} during curate's run and "
                   f"{d['load_before'][0]:.1f} → {d['load_after'][0]:.1f} during datatrove's; a load change between "
                   "them moves the ratio"), "",
                  "Phase against stage:", "",
                  (f"- signatures: datatrove {d['phases'].get('signatures', 0.0):.1f} s, curate "
                   f"{c['phases'].get('signatures', 0.0):.1f} s: "
                   f"**{d['phases'].get('signatures', 0.0) / max(c['phases'].get('signatures', 0.0), 1e-9):.1f}×**"),
                  (f"- tokenization: datatrove's filter+tokenize {d['phases'].get('filter+tokenize', 0.0):.1f} s (reads "
                   f"the `.jsonl.gz` again, filters, `encode_batch` with offsets), curate's tokenize + merge {tok_c:.1f} s "
                   f"(reads its processed parquet, drops, `encode_batch_fast`, int32 arrays): "
                   f"{d['phases'].get('filter+tokenize', 0.0) / max(tok_c, 1e-9):.1f}×. The token ids are identical "
                   "(above), the cost is not: the tokenize bound to use is curate's own"),
                  (f"- the rest of curate (start, process, band + clustering, finish): "
                   f"{c['wall'] - c['phases'].get('signatures', 0.0) - tok_c:.1f} s"), ""]
    scale = json.loads(SCALE.read_text()) if SCALE.is_file() else {}
    for n in sorted(results.get("curate_only", {}), key=int):
        r = results["curate_only"][n]
        c = r["curate"]
        ref = scale.get("datatrove", {}).get(n)
        sig = c["phases"].get("signatures", 0.0)
        tok_c = c["phases"].get("tokenize", 0.0) + c["phases"].get("merge", 0.0)
        lines += [f"## {int(n):,} documents: curate only", "",
                  (f"Command: `{r['command']}`; code: commit {c['commit']}; {r['shards']} input shards, "
                   f"{r['input_bytes'] / 1e6:.0f} MB gzipped; run at {r['when']}. datatrove was **not** run at this "
                   "size in this benchmark: it could not have finished in the session's time (its signature stage "
                   "grows linearly with the documents"
                   + "".join(f"; its {int(m):,}-document run above took {results['runs'][m]['datatrove']['wall']:.0f} s"
                             for m in sorted(results.get("runs", {}), key=int)[:1])
                   + "). The datatrove figure below is bench_scale's (`scale.json`): another day, another load, "
                   "datatrove's native survivor rule (which changes which member survives, not how many): a "
                   "cross-run estimate, not this benchmark's figure."), "",
                  (f"- curate: **{c['wall']:.1f} s**, {int(n) / c['wall']:,.0f} docs/s, kept {c['kept']:,}; load "
                   f"{' / '.join(f'{v:.1f}' for v in c['load_before'])} before, "
                   f"{' / '.join(f'{v:.1f}' for v in c['load_after'])} after"),
                  "", "| curate phase | wall s | share |", "|---|---|---|",
                  *[f"| {g} | {sum(c['phases'].get(p, 0.0) for p in ps):.1f} | "
                    f"{100 * sum(c['phases'].get(p, 0.0) for p in ps) / c['wall']:.0f}% |" for g, ps in GROUPS.items()], "",
                  "curate's step seconds, summed over tasks: "
                  + ", ".join(f"{k} {v:.1f}" for k, v in sorted(c["steps"].items(), key=lambda kv: -kv[1])), "",
                  *[f"- an earlier run ({e['when']}, 1-minute load {e['load'][0]:.1f}): {e['wall']:.1f} s, signatures "
                    f"{e['phases'].get('signatures', 0.0):.1f} s, tokenize {e['phases'].get('tokenize', 0.0):.1f} s"
                    for e in r.get("earlier", [])], ""]
        if ref:
            lines += [(f"- bench_scale's datatrove at {int(n):,} ({ref['wall']:.1f} s at a 15-minute load of "
                       f"{ref['load']:.1f}, kept {ref['kept']:,}"
                       + (", the same count as curate here" if ref["kept"] == c["kept"] else ", NOT curate's count")
                       + f"): {ref['wall'] / c['wall']:.2f}× curate's wall time here; with curate's signature phase at "
                       f"zero {ref['wall'] / max(c['wall'] - sig, 1e-9):.2f}×; with curate reduced to its tokenize and "
                       f"merge phases {ref['wall'] / max(tok_c, 1e-9):.2f}×; datatrove's filter+tokenize stage was "
                       f"{100 * ref['phases']['filter+tokenize']['seconds'] / ref['wall']:.0f}% of its wall time"), ""]
    if results.get("notes"):
        lines += ["## Reading these figures", ""] + [f"- {note}" for note in results["notes"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="30000")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "curate-minhash-path"))
    ap.add_argument("--source", default="", help="a scale_corpus folder to link shards from (default: WORK/corpus)")
    ap.add_argument("--no-datatrove", action="store_true", help="curate only (where datatrove cannot finish in "
                    "time): its figures go to `curate_only`, set against bench_scale's datatrove run of that size")
    ap.add_argument("--render", action="store_true", help="only rewrite minhash_path.md from minhash_path.json")
    ap.add_argument("--results", default=str(RESULTS))
    args = ap.parse_args()
    out = Path(args.results).resolve()
    results = load_results(out)
    if args.render:
        REPORT.write_text(render(results))
        return
    if not scale_corpus.SHARED.is_dir():
        print(f"skipped: {scale_corpus.SHARED} is absent (the benchmark needs ../shared/data)")
        return
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    source = Path(args.source) if args.source else work / "corpus"
    scale_corpus.build(source, max(sizes))
    for n in sizes:
        corpus = scale_corpus.link_prefix(source, work / f"corpus-{n}", n)
        c, c_side = run_curate(corpus, work, n, args.workers)
        print(f"curate {n}: {c['wall']:.1f} s, kept {c['kept']}", flush=True)
        meta = {"dedup": DEDUP, "command": "nice -n 10 .venv/bin/python tests/benchmarks/bench_minhash_path.py " + " ".join(sys.argv[1:]),
                "shards": len(list(corpus.glob("*.jsonl.gz"))), "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "input_bytes": sum(p.stat().st_size for p in corpus.glob("*.jsonl.gz"))}
        if args.no_datatrove:
            before = results.setdefault("curate_only", {}).get(str(n))
            earlier = (before.get("earlier", []) + [{"when": before["when"], "wall": before["curate"]["wall"],
                                                     "load": before["curate"]["load_before"],
                                                     "phases": before["curate"]["phases"]}]) if before else []
            results["curate_only"][str(n)] = {"curate": c, "earlier": earlier, **meta}
            save_results(results, out)
            continue
        d, d_side = run_datatrove(corpus, work, n, args.workers)
        print(f"datatrove {n}: {d['wall']:.1f} s, kept {d['kept']}", flush=True)
        same = compare(c_side, d_side)
        print(json.dumps(same, indent=1), flush=True)
        before = results.setdefault("runs", {}).get(str(n))   # an earlier run of this size: kept as a repeat
        earlier = (before.get("earlier", []) + [{"when": before["when"], "curate": before["curate"]["wall"],
                                                 "datatrove": before["datatrove"]["wall"],
                                                 "dedup": before.get("dedup", "?"),
                                                 "identical": before["same"]["kept_identical"]
                                                 and before["same"]["tokens_identical"]}]) if before else []
        results["runs"][str(n)] = {"curate": c, "datatrove": d, "same": same, "derived": derived(c, d),
                                   "earlier": earlier, **meta}
        save_results(results, out)
        assert same["kept_identical"] and same["tokens_identical"], f"kept documents or tokens differ at {n}"


if __name__ == "__main__":
    main()
