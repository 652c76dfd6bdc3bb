"""The run's graph: the phase table (`curation.plan.phases`) applied to one recipe.

`build_plan` makes one process node per input shard (its fingerprint covers the source's reader
and process-chain settings and the input's content), asks each corpus-wide phase the recipe uses to
plan its stages, then one tokenize node per shard (covering its process node, its encoder's
settings and the phases that cover its source; nothing else; it asks for the resources its encoder
declares, a GPU when the recipe puts the source's codec on one) and one merge node per source. A
setting only the mixture reads (weights, epochs, categories, stages) is in no fingerprint here, so
changing it recomputes no processing; a tokenize setting of one source reaches no other source.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from curation.core.extras import require_all
from curation.core.hashing import fingerprint, sha256_file
from curation.core.node import CODE_EPOCH, Node
from curation.core.vocab import Vocabulary
from curation.corpus.base import CorpusPhase, PlanContext
from curation.errors import RecipeError
from curation.plan.phases import applied
from curation.plan.pipeline import compliance, drop_names, encoder_spec, process_chain
from curation.plan.size import check_plan_size
from curation.recipe import LoadedRecipe, load_recipe
from curation.recipe.output import set_part_bytes
from curation.steps.compliance.optout import DEFAULT_AGENTS, OptOutIndex
from curation.steps.registry import MODALITIES
from curation.steps.text.filters.quality import check_source


@dataclass
class Stage:
    """One stage of the phase table: nodes of one phase. Every dep lies in an earlier stage, so running the
    stages in order is one valid schedule; the runtime starts each node when its own deps are done
    (`curation.runtime.schedule`), and the stages group the progress and the benchmark's barriers."""
    name: str
    nodes: list[Node]
    phase: CorpusPhase | None = None   # None: the record pipeline (process, tokenize, merge)


@dataclass
class Plan:
    recipe: LoadedRecipe
    vocab: Vocabulary
    stages: list[Stage]
    phases: list[tuple[CorpusPhase, list[Node]]] = field(default_factory=list)

    def nodes(self) -> list[Node]:
        return [n for s in self.stages for n in s.nodes]

    def _stage(self, name: str) -> list[Node]:
        return next(s.nodes for s in self.stages if s.name == name and s.phase is None)

    @property
    def process(self) -> list[Node]:
        return self._stage("process")

    @property
    def tokenize(self) -> list[Node]:
        return self._stage("tokenize")

    @property
    def merge(self) -> list[Node]:
        return self._stage("merge")


def codec(loaded: LoadedRecipe, kind: str, key: str, source: str) -> dict:
    """The `kind` codec the recipe key `key` names (for `source`, the first that needs it), with a content hash
    for fingerprints."""
    example = {"image": "../tokenizers/curate-demo-ibq.yaml", "audio": "../tokenizers/curate-demo-wavtokenizer.yaml"}
    if getattr(loaded.recipe, key) is None:
        raise RecipeError(f"{loaded.path}: source {source!r} runs the {kind} codec but the recipe has no `{key}`; "
                          f"name a codec configuration (e.g. {example.get(kind, 'a YAML file under tokenizers/')}) "
                          f"or checkpoint folder")
    path = loaded.resolve(getattr(loaded.recipe, key))
    files = sorted(path.glob("*")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise RecipeError(f"{loaded.path}: {key} {path} does not exist")
    return {f"{kind}_codec": str(path), f"{kind}_codec_sha256": fingerprint([sha256_file(f) for f in files])}


def encode_settings(loaded: LoadedRecipe, vocab: Vocabulary) -> dict:
    """What the encoders of this run read: the vocabulary, the text tokenizer and the codecs in use."""
    run = {"vocab": str(vocab.path), "vocab_sha256": vocab.sha256,
           "tokenizer_sha256": sha256_file(vocab.text_tokenizer_path), "batch_size": loaded.recipe.tokenize_batch_size}
    for src in loaded.recipe.sources:   # the codecs each source's encoder runs (a conversation's media too)
        for kind, key in MODALITIES[src.modality].codecs(src).items():
            if f"{kind}_codec" not in run:
                run |= codec(loaded, kind, key, src.name)
    return run


def optout_index(loaded: LoadedRecipe) -> OptOutIndex | None:
    """The recipe's robots.txt snapshots, loaded once at planning (a bad folder fails before any work)."""
    cfg = loaded.recipe.optout
    if cfg is None:
        return None
    return OptOutIndex.load(loaded.resolve(cfg.snapshots), agents=tuple(cfg.agents or DEFAULT_AGENTS))


def _process_nodes(loaded: LoadedRecipe) -> list[Node]:
    optout = optout_index(loaded)
    nodes = []
    for src in loaded.recipe.sources:
        modality = MODALITIES[src.modality]
        comp = compliance(loaded, src, optout)
        dumped = src.model_dump(mode="json")   # one dict shared by the source's nodes, not one per shard
        for f in loaded.inputs[src.name]:
            chain = process_chain(src, comp, f.path, loaded.base_dir)
            fp = fingerprint({"v": CODE_EPOCH, "phase": "process", "modality": src.modality,
                              "reader": modality.reader_settings(src), "steps": [[s.name, s.settings] for s in chain],
                              "input": f.sha256, "files": modality.input_files(src, f.path, loaded.base_dir),
                              "decisions": loaded.recipe.decisions})
            nodes.append(Node("process", src.name, f.shard_id, fp, spec={
                "source": dumped, "path": str(f.path), "rel": f.rel,
                "base_dir": str(loaded.base_dir), "compliance": comp, "decisions": loaded.recipe.decisions}))
    return nodes


def build_plan(loaded: LoadedRecipe, vocab: Vocabulary) -> Plan:
    r = loaded.recipe
    check_plan_size(r, {s: len(fs) for s, fs in loaded.inputs.items()}, str(loaded.path))   # before any node
    for i, src in enumerate(r.sources):   # a classifier asked to judge a language its card does not cover
        check_source(loaded.path, i, src, loaded.resolve)
    run = encode_settings(loaded, vocab)
    process = _process_nodes(loaded)
    ctx = PlanContext(loaded, process, {n.key: n for n in process})
    stages, phases, drop_nodes = [Stage("process", process)], [], {}
    for phase in applied(r):
        planned = phase.plan(ctx)
        for nodes in planned:
            ctx.planned.update((n.key, n) for n in nodes)
            if nodes:
                stages.append(Stage(nodes[0].phase, nodes, phase))
        phases.append((phase, [n for nodes in planned for n in nodes]))
        drop_nodes[phase.name] = (phase, planned)
    tokenize = []
    for p in process:
        assert p.source is not None, p.key   # a process node is one shard of one source
        src = loaded.source(p.source)
        drops = drop_names([ph for ph, _ in phases], src)
        read = [(name, drop_nodes[name][0].drop_node(drop_nodes[name][1], src)) for _, names in drops for name in names]
        reads = [[name, n.fingerprint] for name, n in read]
        encoder = encoder_spec(src, run)
        fp = fingerprint({"v": CODE_EPOCH, "phase": "tokenize", "process": p.fingerprint,
                          "encoder": encoder.settings, "reads": reads, "decisions": r.decisions})
        # its shard and the drop lists it reads (those nodes come after every node they read)
        deps = [p.key, *dict.fromkeys(n.key for _, n in read)]
        tokenize.append(Node("tokenize", p.source, p.shard, fp, deps=deps, spec={
            "source": p.spec["source"], "run": run, "drops": drops, "encoder": encoder.settings,
            "process_fingerprint": p.fingerprint, "decisions": r.decisions,
            "outputs": list(MODALITIES[src.modality].outputs(src))}, resources=encoder.resources.to_json()))
    merge = []
    # the vocabulary's layout: the merge counts each shard's tokens by modality as it writes them
    layout = {"blocks": [[b.name, b.start, b.size] for b in vocab.blocks], "reserved": dict(vocab.reserved)}
    for src in r.sources:
        parts = [t for t in tokenize if t.source == src.name]
        outputs = list(MODALITIES[src.modality].outputs(src))
        # a part size the recipe sets (`shards:`) is in the spec and fingerprint; unset, neither (as before it was)
        sized = {"max_part_bytes": set_part_bytes(r)} if set_part_bytes(r) is not None else {}
        merge.append(Node("merge", src.name, None, fingerprint(
            {"v": CODE_EPOCH, "phase": "merge", "parts": [t.fingerprint for t in parts], "outputs": outputs,
             **sized}),
            deps=[t.key for t in parts], spec={"shards": [t.shard for t in parts], "outputs": outputs,
                                               "vocab": layout, **sized}))
    stages += [Stage("tokenize", tokenize), Stage("merge", merge)]
    return Plan(loaded, vocab, stages, phases)


def load_plan(recipe_path, raw_root=None) -> Plan:
    """Load a recipe (inputs resolved, acquired ones under `raw_root`) and plan it."""
    loaded = load_recipe(recipe_path, raw_root=raw_root)
    # optional dependencies, all named in one error: modality -> the extra it needs
    used = [(m, extra) for m, extra in (("image", "images"), ("audio", "audio"))
            if any(s.modality == m for s in loaded.recipe.sources)]
    require_all([extra for _, extra in used], " and ".join(f"{m} sources" for m, _ in used))
    vocab = Vocabulary.load(loaded.resolve(loaded.recipe.vocabulary))
    vocab.tokenizer  # noqa: B018 - fail before any work if the tokenizer does not fit the vocabulary
    return build_plan(loaded, vocab)
