"""The MinHash clustering tasks in hash partitions (`curation.corpus.minhash_cc`) write exactly what the single
clustering task wrote before (kept here as the reference: `reference`, main's `run_clusters` at 6625ab0 with its
file writing left out): the same duplicates, clusters and drop lists, row for row and in order, whatever the
partition count, for both survivor rules, on random and adversarial band edges."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation.core.atomic import atomic_write_parquet, save_array
from curation.core.graph import cluster_row, clustered_roots
from curation.core.layout import drops_path, edges_path, processed_path, sig_path, work_dir
from curation.core.partitioned_graph import NotConverged, owner
from curation.corpus import minhash_cc
from curation.corpus.minhash import MinHashPhase
from curation.corpus.minhash_cc import _names, _scores, corpus_shards, highest_quality
from curation.corpus.minhash_sig import documents, sig_file, write_signatures
from curation.recipe.schema import MinHashDedup

SHARDS = [("a", "00000"), ("a", "00001"), ("b", "00000"), ("c", "00000")]
SIZES = [300, 250, 400, 50]
BANDS = 3


def reference(out: Path, shards, index, cfg: dict, edges: np.ndarray):
    """Today's single-task clustering (6625ab0 `run_clusters`): duplicate rows and cluster rows."""
    entries = corpus_shards(out, shards, index)
    sizes = [documents(sig_file(root, source, shard)) for root, source, shard in entries]
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    n_index = len(index)
    indexed = int(offsets[n_index])
    nodes, roots = clustered_roots(edges)
    kept = roots
    if cfg["keep"] == "highest_quality":
        kept = highest_quality(roots, nodes, _scores(entries, n_index, offsets, nodes, cfg["score_field"]), indexed)
    removed = (nodes != kept) & (nodes >= indexed)
    keep = np.isin(roots, roots[removed])
    nodes, roots, kept, removed = nodes[keep], roots[keep], kept[keep], removed[keep]
    names = _names(entries, n_index, offsets, nodes)

    def name(g: int) -> str:
        return f"{names[g][0]}/{names[g][2]}"

    dup_rows = [{"source": names[g][0], "shard": names[g][1], "id": names[g][2], "cluster": name(k)}
                for g, k in zip(nodes[removed].tolist(), kept[removed].tolist())]
    members: dict[int, tuple[int, list[int]]] = {}
    for g, r, k in zip(nodes.tolist(), roots.tolist(), kept.tolist()):
        members.setdefault(r, (k, []))[1].append(g)
    labels = {g: (source, rid) for g, (source, _, rid) in names.items()}
    return dup_rows, [cluster_row(labels, k, m) for _, (k, m) in sorted(members.items())]


def corpus(out: Path, rng, ties: bool) -> None:
    """Processed shards (ids, scores) and signature files (only their length is read) of SHARDS."""
    for (source, shard), n in zip(SHARDS, SIZES):
        scores = rng.integers(0, 4, n) / 4 if ties else rng.random(n)
        meta = [json.dumps({"q": float(s)}) for s in scores]
        atomic_write_parquet(processed_path(out, source, shard),
                             pa.table({"id": [f"{source}{shard}-{i}" for i in range(n)], "meta": meta}))
        write_signatures(sig_path(out, source, shard), np.zeros((n, BANDS), np.uint64), 1, "0" * 16)


def band_files(out: Path, edges: np.ndarray, parts: int, rng) -> None:
    """Spread the edges over BANDS × parts band files (each edge at least once, some in several bands)."""
    chunks = [[] for _ in range(BANDS * parts)]
    for e in edges:
        for k in {int(x) for x in rng.integers(0, BANDS * parts, 1 + int(rng.integers(0, 2)))}:
            chunks[k].append(e)
    for k, c in enumerate(chunks):
        save_array(edges_path(out, k // parts, k % parts), np.array(c, np.int64).reshape(-1, 2))


def run_phase(out: Path, cfg: MinHashDedup, edges: np.ndarray, rng, index=()) -> dict:
    parts = cfg.partitions
    band_files(out, edges, parts, rng)
    band_spec = {"cfg": cfg.model_dump(mode="json"), "bands": BANDS, "rows": 2, "index": list(index),
                 "partitions": parts, "scope": cfg.scope, "shards": SHARDS}
    phase = MinHashPhase()
    stages = phase.plan_clusters(cfg, band_spec, [], [], [])
    runners = phase.runners()
    markers = {}
    for stage in stages:
        for node in stage:
            markers[node.key] = runners[node.phase](out, node)
            for rel in markers[node.key]["outputs"]:     # every file a task lists exists
                assert (out / rel).is_file(), (node.key, rel)
    return markers


def graph(kind: str, rng, total: int) -> np.ndarray:
    """Band edges (first, other), first < other, over global indices 0..total-1."""
    if kind == "random":
        e = rng.integers(0, total, size=(int(rng.integers(50, 600)), 2))
    elif kind == "chain":        # one path through every partition, in random node order
        order = rng.permutation(total)[:600]
        e = np.stack([order[:-1], order[1:]], axis=1)
    elif kind == "stars":        # buckets: each document joined to its bucket's first one
        centers = rng.choice(total, 12, replace=False)
        e = np.concatenate([np.stack([np.full(40, c), rng.integers(0, total, 40)], axis=1) for c in centers])
    else:                        # cliques across shards and sources, joined by one edge
        k = [rng.choice(total, 15, replace=False) for _ in range(4)]
        e = np.concatenate([np.stack(np.meshgrid(c, c), axis=-1).reshape(-1, 2) for c in k] +
                           [np.array([[k[0].max(), k[1].max()]])])
    e = e[e[:, 0] != e[:, 1]]
    return np.stack([e.min(axis=1), e.max(axis=1)], axis=1).astype(np.int64)


def written(out: Path):
    base = work_dir(out, "minhash")
    drops = {s: pq.read_table(drops_path(out, "minhash", *s)).to_pylist() for s in SHARDS}
    return (pq.read_table(base / "duplicates.parquet").to_pylist(), pq.read_table(base / "clusters.parquet").to_pylist(),
            drops)


@pytest.mark.parametrize("kind", ["random", "chain", "stars", "cliques"])
@pytest.mark.parametrize("keep", ["earliest", "highest_quality"])
@pytest.mark.parametrize("parts", [1, 3, pytest.param(8, marks=pytest.mark.slow)])
def test_partitioned_clustering_writes_what_one_task_wrote(tmp_path, kind, keep, parts):
    rng = np.random.default_rng(hash((kind, keep, parts)) % 2**32)
    corpus(tmp_path, rng, ties=keep == "highest_quality")
    edges = graph(kind, rng, sum(SIZES))
    cfg = MinHashDedup(partitions=parts, keep=keep, score_field="q" if keep == "highest_quality" else None)
    markers = run_phase(tmp_path, cfg, edges, rng)
    want_dups, want_clusters = reference(tmp_path, SHARDS, [], cfg.model_dump(mode="json"), edges)
    dups, clusters, drops = written(tmp_path)
    assert want_dups and dups == want_dups and clusters == want_clusters
    for s in SHARDS:
        assert drops[s] == [{"id": d["id"], "reason": "near_duplicate", "detail": d["cluster"], "image": None}
                            for d in want_dups if (d["source"], d["shard"]) == s]
    final = markers["clusters"]
    assert final["duplicates"] == len(want_dups) and final["clusters"] == len(want_clusters)
    band = sum(np.load(edges_path(tmp_path, b, p)).shape[0] for b in range(BANDS) for p in range(parts))
    assert final["edges"] == band and final["indexed"] == 0
    assert final["outputs"][:3] == ["work/minhash/duplicates.parquet", "work/minhash/clusters.parquet",
                                    "work/minhash/params.json"]
    assert final["outputs"][3:] == [str(drops_path(tmp_path, "minhash", *s).relative_to(tmp_path)) for s in SHARDS]
    # a resolve part's row groups follow its rows, not the shards (`cc_files.write_resolved`)
    from curation.corpus.minhash_cc import _resolve_paths
    assert all(pq.ParquetFile(_resolve_paths(tmp_path, q)[0]).num_row_groups <= 1 for q in range(parts))


def test_no_partition_task_holds_more_than_about_one_part_of_the_edges(tmp_path):
    rng = np.random.default_rng(7)
    corpus(tmp_path, rng, ties=False)
    edges = graph("random", np.random.default_rng(8), sum(SIZES))
    edges = np.unique(np.concatenate([edges, graph("random", rng, sum(SIZES)), graph("random", rng, sum(SIZES))]),
                      axis=0)
    markers = run_phase(tmp_path, MinHashDedup(partitions=4), edges, rng)
    held = [m["edges"] for k, m in markers.items() if k.startswith("cc_scatter/")]
    registrations = [m["nodes"] for k, m in markers.items() if k.startswith("cc_scatter/")]
    assert sum(held) - sum(registrations) <= len(edges) <= sum(held)
    assert max(held) < 1.5 * sum(held) / 4


def test_the_settle_task_runs_the_rounds_the_plan_lacks_and_stops_at_the_limit(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    corpus(tmp_path, rng, ties=False)
    total = sum(SIZES)
    nodes = np.arange(total)
    mixed = np.concatenate([nodes[owner(nodes, 8) == p] for p in range(8)])   # a path crossing partitions at every step
    chain = np.sort(np.stack([mixed[:-1], mixed[1:]], axis=1), axis=1)
    markers = run_phase(tmp_path, MinHashDedup(partitions=8), chain, rng)
    assert markers["cc_settle"]["rounds"] > minhash_cc.CC_ROUNDS
    dups, clusters, _ = written(tmp_path)
    assert len(clusters) == 1 and clusters[0]["size"] == total and len(dups) == total - 1
    monkeypatch.setattr(minhash_cc, "MAX_ROUNDS", minhash_cc.CC_ROUNDS + 1)
    with pytest.raises(NotConverged, match=f"did not settle in {minhash_cc.CC_ROUNDS + 1} rounds over 8 partitions"):
        run_phase(tmp_path / "again", MinHashDedup(partitions=8), chain, rng)


@pytest.mark.slow
def test_a_run_with_partitioned_clustering_gives_the_same_outputs(tmp_path):
    """A whole run: near-duplicates across three shards and two sources; 1 and 4 partitions write the same
    ledger rows, drop lists and token shards (the recipe text differs, so manifests are not compared)."""
    from curation.commands.run import run
    from tests.benchmarks.compare_outputs import compare
    from tests.conftest import make_recipe, write_jsonl
    from tests.steps.text.test_minhash import _demo_docs

    texts = _demo_docs(30)
    variants = texts[:12] + ["Cookie settings | Log in\n" + t + "\nAll rights reserved." for t in texts[:12]]
    files = {}
    for k, source in enumerate(("web", "news")):
        files[source] = []
        for s in range(2 - k):
            rows = [{"id": f"{source}{s}-{i}", "text": t} for i, t in enumerate(variants[(k * 2 + s)::3])]
            files[source].append(write_jsonl(tmp_path / f"{source}{s}.jsonl", rows))
    outs = []
    for parts in (1, 4):
        recipe = make_recipe(tmp_path, files, extra=f"dedup: {{exact: null, minhash: {{partitions: {parts}}}}}")
        outs.append((run(recipe, tmp_path / f"out{parts}", progress=False), tmp_path / f"out{parts}"))
    (one, out1), (four, out4) = outs

    def rows(res, table):   # the run id follows the recipe text, which names the partitions
        return [{k: v for k, v in r.items() if k != "run"} for r in res.rows[table]]

    assert rows(one, "near_duplicates") and rows(one, "clusters") == rows(four, "clusters")
    assert rows(one, "near_duplicates") == rows(four, "near_duplicates")
    problems = [p for p in compare(out1, out4) if not p.startswith(("manifests/", "ledger/", "ledger.duckdb"))]
    assert problems == []
    assert (out4 / "work" / "minhash" / "cc" / "final.json").is_file()


def test_a_round_task_of_an_output_url_fetches_its_own_edges_and_the_proposals_addressed_to_it(tmp_path, monkeypatch):
    """On an output URL a round task downloads what it reads (`cc_files.round_reads`): every partition's previous
    state, of their proposals only its own rows (ranged reads), its own edges, no `.json`; a round run on those
    files writes what the local round wrote."""
    import fsspec

    from curation.core.outloc import Remote
    from curation.corpus import cc_files
    from curation.runtime.publish import fetch
    monkeypatch.setenv("CURATE_STAGING", str(tmp_path / "staging"))
    rng = np.random.default_rng(11)
    out = tmp_path / "local"
    corpus(out, rng, ties=False)
    parts = 4
    cfg = MinHashDedup(partitions=parts)
    markers = run_phase(out, cfg, graph("chain", rng, sum(SIZES)), rng)
    fs, root = fsspec.filesystem("memory"), f"cc-{tmp_path.name}/run"
    for path in out.rglob("*"):
        if path.is_file():
            fs.pipe_file(f"{root}/{path.relative_to(out)}", path.read_bytes())
    for key, marker in markers.items():
        fs.pipe_file(f"{root}/work/markers/{key}.json", json.dumps(marker).encode())
    got_whole, got_ranged = [], []
    cat, get = type(fs).cat_file, type(fs).get_file
    monkeypatch.setattr(type(fs), "cat_file", lambda self, p, start=None, end=None, **kw: (
        got_ranged.append((p, start, end)) if not p.endswith(".json") else None) or cat(self, p, start=start, end=end, **kw))
    monkeypatch.setattr(type(fs), "get_file", lambda self, p, *a, **kw: got_whole.append(p) or get(self, p, *a, **kw))
    band_spec = {"cfg": cfg.model_dump(mode="json"), "bands": BANDS, "rows": 2, "index": [], "partitions": parts,
                 "scope": cfg.scope, "shards": SHARDS}
    rounds = [n for stage in MinHashPhase().plan_clusters(cfg, band_spec, [], [], []) for n in stage
              if n.phase == "cc_round"]
    assert len(rounds) >= 2 * parts
    sliced = 0
    for node in rounds:
        got_whole.clear()
        got_ranged.clear()
        here = tmp_path / "task" / node.key
        fetch(Remote(f"memory://{root}"), node, here, lambda rel, node=node: cc_files.round_reads(node, rel))
        r, q = node.spec["round"], node.spec["part"]
        written, _ = cc_files.run_round(here, cc_files_base(here), r, q, parts)
        for rel in written:
            assert (here / rel).read_bytes() == (out / rel).read_bytes(), rel
        names = [p.rsplit("/", 2)[-2:] for p in got_whole]
        assert not [n for n in names if n[1].endswith(".json") or n[1].endswith(".out.npy")]
        assert [n for n in names if n[0] == "edges"] == [["edges", f"{q:03d}.npy"]]
        assert {n[1] for n in names if n[0] == f"r{r - 1:03d}"} == {f"{p:03d}{k}.npy" for p in range(parts)
                                                                     for k in ("", ".off")}
        ranged = {p.rsplit("/", 1)[-1] for p, *_ in got_ranged if p.endswith(".out.npy")}
        assert ranged <= {f"{p:03d}.out.npy" for p in range(parts)}
        sliced += sum(e - s for p, s, e in got_ranged if p.endswith(".out.npy") and s >= 128)
    assert sliced > 0   # proposals were fetched, by their rows


def cc_files_base(out: Path) -> Path:
    return minhash_cc.cc_dir(out)


def test_unset_partitions_follow_the_corpus_and_fingerprint_as_one(tmp_path):
    """Unset `partitions`: one per 16 input shards of the covered sources (at most 1024), so what a band or
    clustering task holds stays about 16 shards' worth as the corpus grows (reports/benchmarks/scale.md: one
    partition at 1M documents put every component in one resolve task). The result does not depend on it,
    so the recipe's fingerprint is that of `partitions: 1`, as before the automatic default; a set number is
    the plan's, and the plan-size estimate counts the same nodes."""
    from curation.corpus.minhash import auto_partitions
    from curation.plan.graph import load_plan
    from curation.plan.size import plan_nodes
    from tests.conftest import make_recipe, write_jsonl

    assert [auto_partitions(n) for n in (0, 1, 16, 17, 200, 10**6)] == [1, 1, 1, 2, 13, 1024]
    files = {"web": [write_jsonl(tmp_path / f"w{k:02d}.jsonl", [{"id": f"w{k}", "text": f"text {k}"}])
                     for k in range(33)]}
    plans = {}
    for name, minhash in (("unset", "{}"), ("one", "{partitions: 1}"), ("five", "{partitions: 5}")):
        folder = tmp_path / name
        folder.mkdir()
        plans[name] = load_plan(make_recipe(folder, files, extra=f"dedup: {{exact: null, minhash: {minhash}}}"))
    for name, parts in (("unset", 3), ("one", 1), ("five", 5)):
        nodes = plans[name].nodes()
        assert sum(n.phase == "cc_resolve" for n in nodes) == parts
        assert sum(n.phase == "band" for n in nodes) == 14 * parts
        assert sum(plan_nodes(plans[name].recipe.recipe, {"web": 33}).values()) == len(nodes)
    assert plans["unset"].recipe.fingerprint == plans["one"].recipe.fingerprint != plans["five"].recipe.fingerprint
