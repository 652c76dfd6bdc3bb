"""The task graph of a run: sources × phases, one node per input shard, each with a fingerprint.

Phases, joined by files on disk:
    process(source, shard)  read → normalize → filters → content hash   → processed/<source>/<shard>.parquet
    dedup                   exact-duplicate resolution over all shards  → work/dedup/exact.parquet
    tokenize(source, shard) drop duplicates → tokenize                   → tokenized/<source>/parts/<shard>.bin|idx
    merge(source)           concatenate the parts in shard order         → tokenized/<source>/<source>.bin|idx

A node's fingerprint covers its configuration, its inputs' content and the fingerprints of
the nodes it reads from, so a completion marker with the same fingerprint means the node's
outputs are current and a re-run may skip it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from curation import __version__
from curation.core.hashing import fingerprint
from curation.core.vocab import Vocabulary
from curation.recipe import LoadedRecipe

CODE_EPOCH = __version__  # outputs of a different curate version are recomputed


@dataclass
class Node:
    phase: str
    source: str | None
    shard: str | None
    fingerprint: str
    deps: list[str] = field(default_factory=list)
    spec: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return "/".join(p for p in (self.phase, self.source, self.shard) if p)


@dataclass
class Plan:
    recipe: LoadedRecipe
    vocab: Vocabulary
    process: list[Node]
    dedup: Node
    tokenize: list[Node]
    merge: list[Node]
    signatures: list[Node] = field(default_factory=list)  # near-dup phases, empty without `dedup.minhash`
    bands: list[Node] = field(default_factory=list)
    clusters: Node | None = None
    decont_index: Node | None = None  # decontamination phases, empty without `decontamination`
    decont: list[Node] = field(default_factory=list)
    decont_resolve: Node | None = None

    def nodes(self) -> list[Node]:
        near = [*self.signatures, *self.bands, *([self.clusters] if self.clusters else [])]
        decont = [*([self.decont_index] if self.decont_index else []), *self.decont,
                  *([self.decont_resolve] if self.decont_resolve else [])]
        return [*self.process, self.dedup, *near, *decont, *self.tokenize, *self.merge]

    def step_names(self, source: str) -> list[str]:
        src = self.recipe.source(source)
        optout = self.recipe.recipe.optout and src.optout == "page_url"
        image, audio = src.modality == "image", src.modality == "audio"
        check = ["image_check"] if image else ["audio_check"] if audio else ["normalize", *[f.type for f in src.filters]]
        names = ["read", *(["constituents"] if src.constituents else []), "licence",
                 *(["robots_optout"] if optout else []), *check, *(["pii"] if src.pii else [])]
        if self.recipe.recipe.dedup.exact is not None or image or audio:
            names.append("exact_dedup")
        if self.recipe.recipe.dedup.minhash is not None and src.modality == "text":
            names.append("near_dedup")
        if self.recipe.recipe.decontamination is not None:
            names.append("decontaminate")
        return [*names, "tokenize"]


def build_plan(loaded: LoadedRecipe, vocab: Vocabulary) -> Plan:
    r = loaded.recipe
    process, tokenize, merge = [], [], []
    optout = _optout(loaded)
    for src in r.sources:
        cfg = src.model_dump(mode="json", exclude={"weight", "category", "license"})
        compliance = compliance_spec(loaded, src, optout)
        # the snapshots' content fingerprint stands for them: a checkout elsewhere plans the same work
        portable = compliance | {"optout": compliance["optout"] and
                                 {k: v for k, v in compliance["optout"].items() if k != "snapshots"}}
        for f in loaded.inputs[src.name]:
            spec = {"source": cfg, "path": str(f.path), "rel": f.rel, "shard": f.shard_id,
                    "base_dir": str(loaded.base_dir), "compliance": compliance}
            audio = None
            if src.modality == "audio":  # the clips the manifest names are inputs too; transcripts are tokenized
                spec["vocab"] = str(vocab.path)
                audio = {"files": _manifest_files_sha(f.path, src), "vocab": vocab.sha256}
            fp = fingerprint({"v": CODE_EPOCH, "phase": "process", "source": cfg, "input": f.sha256,
                              "compliance": portable, **({"audio": audio} if audio else {})})
            process.append(Node("process", src.name, f.shard_id, fp, spec=spec))
    dedup_cfg = r.dedup.exact.model_dump(mode="json") if r.dedup.exact else None
    images = {"sources": {s.name: s.image_settings().domain for s in r.sources if s.modality == "image"},
              "radii": r.image_dedup}
    audio_dedup = {s.name: s.audio_settings().near_dup_ber for s in r.sources if s.modality == "audio"}
    dedup = Node("dedup", None, None,
                 fingerprint({"v": CODE_EPOCH, "phase": "dedup", "cfg": dedup_cfg, "images": images,
                              **({"audio": audio_dedup} if audio_dedup else {}),
                              "deps": [n.fingerprint for n in process]}),
                 deps=[n.key for n in process], spec={"cfg": dedup_cfg, "images": images, "audio": audio_dedup})
    text_process = [p for p in process if loaded.source(p.source).modality == "text"]
    signatures, bands, clusters = _near_dup_nodes(loaded, text_process)
    codec = _codec(loaded) if images["sources"] else None
    audio_codec = _codec(loaded, "audio_tokenizer", "audio", "../tokenizers/curate-demo-wavtokenizer.yaml") \
        if audio_dedup else None
    decont_index, decont, decont_resolve = _decont_nodes(loaded, process)
    tokenizer_sha = _file_sha(vocab)
    for p in process:
        src = loaded.source(p.source)
        image = None if src.modality != "image" else {
            "codec": codec["path"], "area": src.image_settings().area, "caption": src.image_settings().caption,
            "batch_tokens": src.image_settings().batch_tokens}
        audio = None if src.modality != "audio" else {
            "codec": audio_codec["path"], "max_batch_seconds": src.audio_settings().max_batch_seconds,
            "interleave": src.audio_settings().interleave}
        fp = fingerprint({"v": CODE_EPOCH, "phase": "tokenize", "process": p.fingerprint,
                          "dedup": dedup.fingerprint, "vocab": vocab.sha256,
                          "near": clusters.fingerprint if clusters else None,
                          "decont": decont_resolve.fingerprint if decont_resolve else None,
                          "tokenizer": tokenizer_sha,
                          "image": image and {**image, "codec": codec["sha256"]},
                          **({"audio": {**audio, "codec": audio_codec["sha256"]}} if audio else {})})
        tokenize.append(Node("tokenize", p.source, p.shard, fp, deps=[p.key, dedup.key],
                             spec={"source": p.source, "shard": p.shard,
                                   "vocab": str(vocab.path), "batch_size": r.tokenize_batch_size,
                                   "dedup": dedup_cfg is not None or bool(images["sources"]) or bool(audio_dedup),
                                   "near_dedup": clusters is not None and src.modality == "text",
                                   "decont": decont_resolve is not None, "image": image, "audio": audio,
                                   "reasoning": src.reasoning.model_dump() if src.reasoning else None}))
    for src in r.sources:
        parts = [t for t in tokenize if t.source == src.name]
        suffixes = {"reasoning": src.reasoning is not None, "audio": src.modality == "audio"}
        fp = fingerprint({"v": CODE_EPOCH, "phase": "merge", "deps": [t.fingerprint for t in parts],
                          **({"also": suffixes} if any(suffixes.values()) else {})})
        merge.append(Node("merge", src.name, None, fp, deps=[t.key for t in parts],
                          spec={"source": src.name, "shards": [t.shard for t in parts], **suffixes}))
    return Plan(loaded, vocab, process, dedup, tokenize, merge, signatures, bands, clusters,
                decont_index, decont, decont_resolve)


def _decont_nodes(loaded: LoadedRecipe, process: list[Node]) -> tuple[Node | None, list[Node], Node | None]:
    """index (1 task) → match (per processed shard) → resolve (guard, review, removal list)."""
    cfg = loaded.recipe.decontamination
    if cfg is None:
        return None, [], None
    from curation.core.hashing import sha256_file
    benchmarks = []
    for b in cfg.benchmarks:
        path = loaded.resolve(b.path)
        if not path.is_file():
            from curation.errors import RecipeError
            raise RecipeError(f"decontamination.benchmarks[{b.name}]: file {path} does not exist; give a local "
                              f"copy of the benchmark (nothing is downloaded at run time)")
        benchmarks.append(b.model_dump(mode="json") | {"path": str(path), "sha256": sha256_file(path)})
    image_benchmarks = []
    for b in cfg.image_benchmarks:
        path = loaded.resolve(b.path)
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        if not path.exists() or not files:
            from curation.errors import RecipeError
            raise RecipeError(f"decontamination.image_benchmarks[{b.name}]: {path} holds no files; give a "
                              f"local folder or tar of the benchmark's images")
        image_benchmarks.append({"name": b.name, "path": str(path),
                                 "sha256": fingerprint([sha256_file(f) for f in files])})
    index_cfg = {"benchmarks": benchmarks, "image_benchmarks": image_benchmarks, "ngram": cfg.ngram,
                 "shards": cfg.index_shards}
    index = Node("decont_index", None, None, fingerprint({"v": CODE_EPOCH, "phase": "decont_index",
                                                           "cfg": [{k: v for k, v in b.items() if k != "path"}
                                                                   for b in benchmarks + image_benchmarks],
                                                           "ngram": cfg.ngram, "shards": cfg.index_shards}),
                 spec=index_cfg)
    match = [Node("decont", p.source, p.shard,
                  fingerprint({"v": CODE_EPOCH, "phase": "decont", "index": index.fingerprint,
                               "process": p.fingerprint, "threshold": cfg.threshold,
                               "radii": cfg.image_radii}),
                  deps=[p.key, index.key], spec={"source": p.source, "shard": p.shard, "ngram": cfg.ngram,
                                                 "shards": cfg.index_shards, "threshold": cfg.threshold,
                                                 "image_radii": cfg.image_radii,
                                                 "image": loaded.source(p.source).modality == "image"})
             for p in process]
    policy = {"max_removal_rate": cfg.max_removal_rate, "acknowledge": sorted(cfg.acknowledge),
              "false_positives": sorted(cfg.false_positives), "ngram": cfg.ngram}
    resolve = Node("decont_resolve", None, None,
                   fingerprint({"v": CODE_EPOCH, "phase": "decont_resolve", "policy": policy,
                                "match": [n.fingerprint for n in match]}),
                   deps=[n.key for n in match], spec=policy)
    return index, match, resolve


def _manifest_files_sha(manifest: Path, src) -> str:
    """Content hash of the audio files an audio manifest names (missing ones are quarantined later)."""
    import json

    from curation.core.hashing import sha256_file
    names = set()
    for line in Path(manifest).read_bytes().splitlines():
        try:
            obj = json.loads(line)
            names.add(str(obj[src.audio_settings().audio_field]))
        except (ValueError, KeyError, TypeError):
            continue
    base = Path(manifest).parent
    return fingerprint([(n, sha256_file(base / n) if (base / n).is_file() else None) for n in sorted(names)])


def _codec(loaded: LoadedRecipe, field: str = "image_tokenizer", kind: str = "image",
           example: str = "../tokenizers/curate-demo-ibq.yaml") -> dict:
    """The codec named by `image_tokenizer` / `audio_tokenizer`, with a content hash for fingerprints."""
    from curation.core.hashing import sha256_file
    from curation.errors import RecipeError
    if getattr(loaded.recipe, field) is None:
        raise RecipeError(f"{loaded.path}: the recipe has {kind} sources but no `{field}`; name a "
                          f"codec configuration (e.g. {example}) or checkpoint folder")
    path = loaded.resolve(getattr(loaded.recipe, field))
    files = sorted(path.glob("*")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise RecipeError(f"{loaded.path}: {field} {path} does not exist")
    return {"path": str(path), "sha256": fingerprint([sha256_file(f) for f in files])}


def _optout(loaded: LoadedRecipe):
    """The recipe's robots.txt snapshots, loaded once at planning (a bad folder fails before any work)."""
    if loaded.recipe.optout is None:
        return None
    from curation.steps.compliance.optout import DEFAULT_AGENTS, OptOutIndex
    cfg = loaded.recipe.optout
    return OptOutIndex.load(loaded.resolve(cfg.snapshots), agents=tuple(cfg.agents or DEFAULT_AGENTS))


def compliance_spec(loaded: LoadedRecipe, src, optout) -> dict:
    """What the process task needs to apply the licence policy, the opt-out and PII for one source."""
    from curation.steps.compliance.licences import licence_class
    r = loaded.recipe
    return {
        "licence": {"class": src.license_class or licence_class(src.license),
                    "exclude": sorted(r.licence_policy.exclude), "field": src.licence_field},
        "optout": None if optout is None or src.optout != "page_url" else {
            "snapshots": str(loaded.resolve(r.optout.snapshots)), "agents": list(optout.agents),
            "fingerprint": optout.fingerprint, "url_field": src.url_field},
        "pii": src.pii.kinds if src.pii else None,
        "constituents": src.constituents.model_dump(mode="json") if src.constituents else None,
    }


def _index_shards(loaded: LoadedRecipe, cfg, bands: int, rows: int) -> list[list[str]]:
    """The signature shards of earlier runs named in `dedup.minhash.index`, checked for matching settings."""
    import json

    from curation.errors import RecipeError

    want = {"ngram": cfg.ngram, "seed": cfg.seed, "language": cfg.language, "bands": bands, "rows": rows}
    shards = []
    for folder in cfg.index:
        root = loaded.resolve(folder)
        params = root / "work" / "minhash" / "params.json"
        if not params.is_file():
            raise RecipeError(f"dedup.minhash.index: {root} holds no MinHash index (no {params.name}); name the "
                              f"output folder of a run that used dedup.minhash")
        got = json.loads(params.read_text())
        if got != want:
            raise RecipeError(f"dedup.minhash.index: {root} was built with {got}, this recipe uses {want}; "
                              f"the settings must match")
        for sig in sorted((root / "work" / "minhash" / "sig").glob("*/*.npy")):
            shards.append([str(root), sig.parent.name, sig.stem])
    return shards


def _near_dup_nodes(loaded: LoadedRecipe, process: list[Node]) -> tuple[list[Node], list[Node], Node | None]:
    r = loaded.recipe
    cfg = r.dedup.minhash
    if cfg is None:
        return [], [], None
    n_bands, rows = cfg.lsh()
    index = _index_shards(loaded, cfg, n_bands, rows)
    from curation.core.hashing import sha256_file
    from curation.core.layout import sig_path
    index_fp = [sha256_file(sig_path(Path(root), s, sh)) for root, s, sh in index]
    common = {"cfg": cfg.model_dump(mode="json"), "bands": n_bands, "rows": rows, "index": index}
    sig_cfg = fingerprint({"ngram": cfg.ngram, "seed": cfg.seed, "bands": n_bands, "rows": rows,
                           "language": cfg.language})
    signatures = [Node("signatures", p.source, p.shard,
                       fingerprint({"v": CODE_EPOCH, "phase": "signatures", "cfg": sig_cfg, "process": p.fingerprint}),
                       deps=[p.key], spec={**common, "source": p.source, "shard": p.shard}) for p in process]
    all_sigs = [n.fingerprint for n in signatures] + index_fp
    common["partitions"] = cfg.partitions
    bands = [Node("band", None, f"{b:03d}-{p:03d}",
                  fingerprint({"v": CODE_EPOCH, "phase": "band", "band": b, "part": p, "parts": cfg.partitions,
                               "scope": cfg.scope, "sigs": all_sigs}),
                  deps=[n.key for n in signatures], spec={**common, "band": b, "part": p, "scope": cfg.scope})
             for b in range(n_bands) for p in range(cfg.partitions)]
    clusters = Node("clusters", None, None,
                    fingerprint({"v": CODE_EPOCH, "phase": "clusters", "bands": [n.fingerprint for n in bands]}),
                    deps=[n.key for n in bands], spec=common)
    return signatures, bands, clusters


def _file_sha(vocab: Vocabulary) -> str:
    from curation.core.hashing import sha256_file
    return sha256_file(vocab.text_tokenizer_path)


def explain(plan: Plan) -> str:
    r = plan.recipe
    lines = [f"recipe {r.recipe.name}  fingerprint {r.fingerprint}  vocabulary {plan.vocab.id}",
             f"stages: {', '.join(f'{s.name} (seq {s.seq_length})' for s in r.recipe.stages)}", ""]
    for src in r.recipe.sources:
        files = r.inputs[src.name]
        where = f" (acquired at run time: {src.acquire.kind} {src.acquire.path} → OUT/raw/{src.name}/)" \
            if src.acquire else ""
        lines.append(f"source {src.name}: {len(files)} shard(s){where}, weight {src.weight}, "
                     f"category {src.category}")
        lines.append(f"  steps: {' → '.join(plan.step_names(src.name))} → shards")
        for p, t in zip([n for n in plan.process if n.source == src.name],
                        [n for n in plan.tokenize if n.source == src.name]):
            lines.append(f"  shard {p.shard} {p.spec['rel']}")
            lines.append(f"    process  {p.fingerprint}")
            lines.append(f"    tokenize {t.fingerprint}")
        m = next(n for n in plan.merge if n.source == src.name)
        lines.append(f"  merge      {m.fingerprint}")
    lines.append(f"dedup (exact, {r.recipe.dedup.exact.scope if r.recipe.dedup.exact else 'off'}) "
                 f"{plan.dedup.fingerprint}  ← all process nodes")
    if plan.clusters is not None:
        mh = r.recipe.dedup.minhash
        b, rows = mh.lsh()
        lines.append(f"near-dup (MinHash {mh.ngram}-grams, {b} bands × {rows} rows, {mh.scope}): "
                     f"{len(plan.signatures)} signature tasks → {len(plan.bands)} band tasks → "
                     f"clusters {plan.clusters.fingerprint}")
    if plan.decont_resolve is not None:
        d = r.recipe.decontamination
        lines.append(f"decontamination ({', '.join(b.name for b in d.benchmarks)}; {d.ngram}-grams, flag at "
                     f"{d.threshold:.0%} of an item, cap {d.max_removal_rate:.0%} per source): index "
                     f"{plan.decont_index.fingerprint} → {len(plan.decont)} match tasks → resolve "
                     f"{plan.decont_resolve.fingerprint}")
    return "\n".join(lines)
