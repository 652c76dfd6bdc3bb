"""Benchmark decontamination (Apertus 1.5 §4.2) as a corpus-wide phase of three stages, joined by
files under `<out>/work/decont/`:

    decont_index           benchmark items → n-gram index shards     (`curation.corpus.decont.match`)
    decont(source, shard)  documents and images matched, flags       (`curation.corpus.decont.match`)
    decont_resolve         reviewed false positives re-admitted; the guard (removal rate per source);
                           the review export and one drop list per shard (`contaminated:<benchmark>`)

Removal is by (source, shard, id): the tokenize task of a shard drops exactly the ids listed for it,
so a flagged sample can never take anything else with it. The ledger gets `decontamination` (Apertus
Table H.2 per source and benchmark, plus flagged and re-admitted) and `benchmarks`.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.hashing import fingerprint, sha256_file
from curation.core.layout import flags_path, is_processed_table, processed_path, review_dir
from curation.core.node import CODE_EPOCH, Node
from curation.corpus.base import CorpusPhase, PlanContext
from curation.corpus.decont.benchmarks import check_fields
from curation.corpus.decont.match import run_decont, run_decont_index
from curation.corpus.decont.review import write_review
from curation.errors import DecontaminationGuard, InputError, RecipeError
from curation.steps.image.declaration import image_settings
from curation.steps.image.phash import default_reductions, domain_reduce

IMAGE_MODALITIES = ("image", "interleaved")   # sources whose images are matched by pHash (every image of a document)


def _flagged_text_only(remote, rel: str, local: Path) -> None:
    """How `decont_resolve`, on an output URL, fetches a processed shard: it counts every shard's documents
    but reads the text only of shards with flags (the review page shows them), so of a shard its match task
    flagged nothing it takes the id column. The flags are there already (`runtime.publish.fetch` brings the
    files read whole before the parts); a shard whose flags are missing is fetched whole."""
    root = Path(str(local)[:-len(rel)])
    source, shard = rel.removeprefix("processed/").removesuffix(".parquet").split("/", 1)
    flags = flags_path(root, source, shard)
    if flags.is_file() and pq.ParquetFile(flags).metadata.num_rows == 0:
        remote.get_columns(rel, local, ["id"])
    else:
        remote.get(rel, local)


def _benchmarks(loaded, cfg) -> tuple[list[dict], list[dict]]:
    """Text and image benchmarks as local files with their content hashes (nothing is downloaded)."""
    text = []
    for b in cfg.benchmarks:
        path = loaded.resolve(b.path)
        if not path.is_file():
            raise RecipeError(f"decontamination.benchmarks[{b.name}]: file {path} does not exist; give a local "
                              f"copy of the benchmark (nothing is downloaded at run time)")
        try:
            check_fields(b.name, path, b.fields)
        except InputError as e:
            raise RecipeError(f"decontamination.benchmarks[{b.name}].fields: {e}") from None
        text.append(b.model_dump(mode="json") | {"path": str(path), "sha256": sha256_file(path)})
    images = []
    for b in cfg.image_benchmarks:
        path = loaded.resolve(b.path)
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        if not path.exists() or not files:
            raise RecipeError(f"decontamination.image_benchmarks[{b.name}]: {path} holds no files; give a "
                              f"local folder or tar of the benchmark's images")
        images.append({"name": b.name, "path": str(path), "sha256": fingerprint([sha256_file(f) for f in files])})
    return text, images


class DecontPhase(CorpusPhase):
    name = "decont"
    step = "decontaminate"
    tables: ClassVar[dict[str, pa.Schema]] = {
        "decontamination": pa.schema([("run", pa.string()), ("source", pa.string()), ("benchmark", pa.string()),
                                      ("original", pa.int64()), ("flagged", pa.int64()), ("readmitted", pa.int64()),
                                      ("removed", pa.int64()), ("final", pa.int64()), ("pct_removed", pa.float64())]),
        "benchmarks": pa.schema([("run", pa.string()), ("benchmark", pa.string()), ("sha256", pa.string()),
                                 ("fields", pa.string()), ("items", pa.int64()), ("unindexable", pa.int64())]),
    }

    def applies(self, recipe) -> bool:
        return recipe.decontamination is not None

    def covers(self, src) -> bool:
        return True

    def plan(self, ctx: PlanContext) -> list[list[Node]]:
        cfg = ctx.loaded.recipe.decontamination
        benchmarks, image_benchmarks = _benchmarks(ctx.loaded, cfg)
        # benchmark images are hashed at every pHash reduction the image sources use (one per domain setting)
        reductions = sorted({*default_reductions(), *(domain_reduce(image_settings(s).domain,
                                                                      image_settings(s).phash_reduce)
                                                        for s in ctx.loaded.recipe.sources
                                                        if s.modality in IMAGE_MODALITIES)})
        index = Node("decont_index", None, None, fingerprint(
            {"v": CODE_EPOCH, "phase": "decont_index", "ngram": cfg.ngram, "shards": cfg.index_shards,
             "phash_reductions": reductions,
             "cfg": [{k: v for k, v in b.items() if k != "path"} for b in benchmarks + image_benchmarks]}),
            spec={"benchmarks": benchmarks, "image_benchmarks": image_benchmarks, "ngram": cfg.ngram,
                  "shards": cfg.index_shards, "phash_reductions": reductions})
        match = [Node("decont", p.source, p.shard, fingerprint(
            {"v": CODE_EPOCH, "phase": "decont", "index": index.fingerprint, "process": p.fingerprint,
             "threshold": cfg.threshold, "radii": cfg.image_radii}),
            deps=[p.key, index.key], spec={"ngram": cfg.ngram, "shards": cfg.index_shards, "threshold": cfg.threshold,
                                           "image_radii": cfg.image_radii, "modality": ctx.source(p.source).modality,
                                           "image": ctx.source(p.source).modality in IMAGE_MODALITIES})
            for p in ctx.process]
        policy = {"max_removal_rate": cfg.max_removal_rate, "acknowledge": sorted(cfg.acknowledge),
                  "false_positives": sorted(cfg.false_positives), "ngram": cfg.ngram}
        resolve = Node("decont_resolve", None, None, fingerprint(
            {"v": CODE_EPOCH, "phase": "decont_resolve", "policy": policy, "match": [n.fingerprint for n in match]}),
            # reads the flags, the benchmark items (review) and the shards' document counts
            deps=[n.key for n in [*match, index, *ctx.process]], spec={**policy, "shards": ctx.shards(),
                                               "modalities": {s.name: s.modality for s in ctx.loaded.recipe.sources}})
        return [[index], match, [resolve]]

    def node_count(self, recipe, files: dict[str, int]) -> int:
        return 1 + self.covered_files(recipe, files) + 1   # the index, a match per shard, the resolution

    def runners(self):
        return {"decont_index": run_decont_index, "decont": run_decont, "decont_resolve": self.resolve}

    def partial_reads(self):
        return {"decont_resolve": lambda node, rel: _flagged_text_only if is_processed_table(rel) else None}

    def resolve(self, out: Path, node: Node) -> dict:
        """Streams over the shards' flags (read again per pass, never all held): the counts the guard needs,
        the review export, then each shard's drop list. Nothing here relates one flag to another, so
        there is nothing to partition: memory is one shard's flags, the `_CAP` samples the review page
        shows and a count per source and benchmark."""
        spec, shards = node.spec, [tuple(s) for s in node.spec["shards"]]
        cleared = set(spec["false_positives"])

        def shard_flags(s: str, sh: str) -> list[dict]:
            flags = pq.read_table(flags_path(out, s, sh)).to_pylist()
            for f in flags:
                f["status"] = "readmitted" if f"{f['source']}/{f['id']}" in cleared else "removed"
            return flags

        flagged, removed, by_bench = 0, Counter(), {}
        statuses: dict[str, dict[str, Counter]] = {}   # source -> benchmark -> review status -> flags (the ledger's)
        for s, sh in shards:
            for f in shard_flags(s, sh):
                flagged += 1
                statuses.setdefault(f["source"], {}).setdefault(f["benchmark"], Counter())[f["status"]] += 1
                if f["status"] == "removed":
                    removed[f["source"]] += 1
                    by_bench.setdefault(f["source"], Counter())[f["benchmark"]] += 1
        documents = Counter()
        for s, sh in shards:
            documents[s] += pq.ParquetFile(processed_path(out, s, sh)).metadata.num_rows
        review = write_review(out, ((s, sh, shard_flags(s, sh)) for s, sh in shards), spec["ngram"],
                              spec.get("modalities", {}))
        for source, n in sorted(removed.items()):
            rate = n / max(documents[source], 1)
            if rate > spec["max_removal_rate"] and source not in spec["acknowledge"]:
                top = by_bench[source].most_common(3)
                raise DecontaminationGuard(
                    f"decontamination would remove {rate:.1%} of source {source!r} ({n} of {documents[source]} "
                    f"documents), above the cap of {spec['max_removal_rate']:.0%}; top matched benchmarks: "
                    f"{', '.join(f'{b} ({c})' for b, c in top)}. Review {review}: if the matches are real, add "
                    f"{source!r} to decontamination.acknowledge; if not, list the cleared samples in "
                    f"decontamination.false_positives (as source/id)")
        drops = []
        for s, sh in shards:
            drops += self.write_drops(out, [(s, sh)], [
                f | {"reason": f"contaminated:{f['benchmark']}",
                     "detail": f"{f['benchmark']}:{f['item_id']} ({f['ratio']:.0%} of the item)"}
                for f in shard_flags(s, sh) if f["status"] == "removed"])
        total = sum(removed.values())
        return {"flagged": flagged, "removed": total, "readmitted": flagged - total,
                "statuses": {src: {b: dict(sorted(c.items())) for b, c in sorted(by.items())}
                             for src, by in sorted(statuses.items())},
                "outputs": [*drops, str(review.relative_to(out)), "review/decontamination.parquet"]}

    def ledger_rows(self, run: str, nodes: list[Node], markers: dict, out: Path, totals: dict) -> dict:
        index = next(n for n in nodes if n.phase == "decont_index")
        benchmarks = [{"run": run, "benchmark": b["name"], "sha256": b["sha256"], "fields": ", ".join(b["fields"]),
                       "items": b.get("items", 0), "unindexable": b.get("unindexable", 0)}
                      for b in markers[index.key]["benchmarks"]]
        resolve = next(n for n in nodes if n.phase == "decont_resolve")
        counts: dict[str, dict[str, Counter]] = {}   # source -> benchmark -> status -> flags
        if "statuses" in markers[resolve.key]:       # counted by the resolve task as it read the flags
            counts = {src: {b: Counter(c) for b, c in by.items()} for src, by in markers[resolve.key]["statuses"].items()}
        else:   # a resolve marker of an earlier curate: counted from the review export, a row group at a time
            review = pq.ParquetFile(review_dir(out) / "decontamination.parquet")
            for group in range(review.num_row_groups):
                t = review.read_row_group(group, columns=["source", "benchmark", "status"]).to_pydict()
                for source, bench, status in zip(t["source"], t["benchmark"], t["status"]):
                    counts.setdefault(source, {}).setdefault(bench, Counter())[status] += 1
        rows = [r for source, steps in totals.items() if self.step in steps
                for r in table_h2(run, source, steps[self.step], counts.get(source, {}))]
        return {"benchmarks": benchmarks, "decontamination": rows}


def table_h2(run: str, source: str, step, flags: dict[str, Counter]) -> list[dict]:
    """Apertus 1.5 Table H.2 per source and benchmark, plus the review: flagged, re-admitted, removed.

    `flags`: benchmark -> counts by review status of the source's flags. `original` counts the documents
    that reached the step (after dedup); `flagged` and `readmitted` count over all processed documents of
    the source (a flagged duplicate may already be gone)."""
    removed = {r.removeprefix("contaminated:"): n for r, n in step.dropped.items()}
    out = []
    for bench in sorted(set(flags) | set(removed)):
        mine = flags.get(bench, Counter())
        n = removed.get(bench, 0)
        out.append({"run": run, "source": source, "benchmark": bench, "original": step.records_in,
                    "flagged": sum(mine.values()), "readmitted": mine["readmitted"],
                    "removed": n, "final": step.records_in - n,
                    "pct_removed": round(100 * n / max(step.records_in, 1), 4)})
    total = sum(removed.values())
    out.append({"run": run, "source": source, "benchmark": "(all)", "original": step.records_in,
                "flagged": sum(sum(c.values()) for c in flags.values()),
                "readmitted": sum(c["readmitted"] for c in flags.values()),
                "removed": total, "final": step.records_out,
                "pct_removed": round(100 * total / max(step.records_in, 1), 4)})
    return out
