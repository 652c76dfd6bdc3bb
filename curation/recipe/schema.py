"""The typed recipe: what a `recipes/*.yaml` file may say.

Every model forbids unknown keys, so a typo is an error with a key path rather than a
silently ignored setting. Filter types form a closed, discriminated union on `type`:
a recipe selects from the steps `curate` ships and can never import code.

Example (the demo recipe, abbreviated):

    name: demo
    vocabulary: ../tokenizers/curate-demo-v1.yaml
    stages: [{name: pretrain, seq_length: 1024}]
    dedup: {exact: {scope: global}}
    sources:
      - name: web_en
        input: {paths: [demo/corpus/web_en/*.jsonl.gz], id_field: id, metadata_fields: [url]}
        filters:
          - {type: length, min_words: 50}
          - {type: language, languages: [en]}
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, field_validator, model_serializer, model_validator

import curation.recipe.registry as registry
from curation.recipe.base import NAME_PATTERN, Strict
from curation.recipe.compliance import (  # part of the schema
    PII,
    Constituents,
    LicenceClass,
    LicencePolicy,
    OptOut,
    missing_licence,
)
from curation.recipe.filters import (  # noqa: F401 - part of the schema
    C4QualityFilter,
    FilterBase,
    FilterConfig,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    LanguageFilter,
    LengthFilter,
    OnError,
)
from curation.recipe.inputs import Acquire, Input  # part of the schema
from curation.recipe.limits import MAX_EPOCHS, MAX_PERMUTATIONS, MAX_PLAN_NODES, MAX_SEED, MAX_WEIGHT
from curation.recipe.modalities import Conversations  # noqa: F401 - part of the schema
from curation.recipe.output import Shards
from curation.recipe.selection import Select, check_scores, check_select
from curation.recipe.stages import (  # noqa: F401 - part of the schema
    Ablation,
    HeldOut,
    LongContext,
    MixtureEntry,
    Stage,
    Trainer,
    check_ablation,
    check_extension_steps,
    check_trainers,
    default_trainers,
)
from curation.recipe.transparency import Transparency


class Normalize(Strict):
    """Unicode normalisation applied before any filter."""
    nfc: bool = True
    ftfy: bool = True


class Source(Strict):
    name: str = Field(pattern=NAME_PATTERN)
    input: Input
    acquire: Acquire | None = None
    category: str = "uncategorised"
    # What the source's samples are: its tokens, paired captions/transcripts included, count with this
    # modality in the per-stage modality table (Apertus 1.5 Table 3; interleaved documents count as vision data).
    # a registered modality (`curation.recipe.registry`): text, image, audio, interleaved, or a plug-in's
    modality: str = "text"
    # required in a recipe (Recipe checks it): an SPDX id or expression (`MIT OR Apache-2.0`), a licence
    # URL or the licence's text. None only where a Source is validated alone, from a plan's task spec.
    license: str | None = Field(default=None, min_length=1, max_length=2000)
    license_class: LicenceClass | None = None  # default: derived from `license`
    # a metadata field (listed in input.metadata_fields; `a.b` reaches into an object) holding each
    # record's own licence: a string, a list, or an object (see curation.steps.compliance.licence_fields).
    # It overrides the source's licence; a record without it keeps the source's.
    licence_field: str | None = Field(default=None, min_length=1)
    constituents: Constituents | None = None
    # robots.txt opt-out: `page_url` checks each record's `url_field`; `not_available` records that the
    # source keeps no page URL (only an image host, or another dataset's name) so it cannot be applied
    optout: Literal["page_url", "not_available"] = "page_url"
    url_field: str = "url"
    pii: PII | None = None
    revision: str | None = None       # the pinned revision of the data, when it has one
    # a run fails when more of this source's input units than this share are quarantined, or when the
    # source keeps nothing (unless the licence policy excluded it, or `allow_empty`): never a quiet pass
    max_quarantine_share: float = Field(default=0.5, ge=0, le=1)
    allow_empty: bool = False
    weight: float = Field(default=1.0, ge=0, le=MAX_WEIGHT)
    max_epochs: float = Field(default=4.0, ge=0, le=MAX_EPOCHS)  # allowed repetition; the planner flags more
    normalize: Normalize = Normalize()
    filters: list[FilterConfig] = []
    select: Select | None = None      # keep the top fraction per language by a score (`curation.recipe.selection`)
    # the settings registered modalities add (text's `reasoning:` and `synthetic_tasks:`, `images:`, `audio:`,
    # `interleaved:`, a plug-in's), given in a
    # recipe under their own keys (`SourceModality.settings`) and dumped under them; read with `settings_for`
    modality_settings: dict[str, Any] = Field(default_factory=dict, exclude=True)

    @field_validator("license")
    @classmethod
    def _licence_text(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("is blank; give an SPDX id (`CC-BY-4.0`), a licence URL or the licence text")
        return value

    @model_validator(mode="after")
    def _licence_field_is_read(self):
        if self.licence_field is not None and self.licence_field not in self.input.metadata_fields \
                and self.licence_field.split(".")[0] not in self.input.metadata_fields:
            raise ValueError(f"licence_field {self.licence_field!r} is never read: add "
                             f"{self.licence_field.split('.')[0]!r} to input.metadata_fields")
        return self

    @model_validator(mode="after")
    def _selection(self):
        check_select(self)   # a score it writes, a language it has (`curation.recipe.selection`)
        return self

    @model_validator(mode="before")
    @classmethod
    def _gather_modality_settings(cls, data):
        return registry.gather_settings(data, set(cls.model_fields))   # registered keys into `modality_settings`

    @field_validator("modality")
    @classmethod
    def _registered_modality(cls, value: str) -> str:
        registry.modality(value)   # the error lists the registered modalities
        return value

    @field_validator("modality_settings")
    @classmethod
    def _modality_settings_models(cls, value: dict) -> dict:
        return registry.validate_settings(value)

    @model_serializer(mode="wrap")
    def _dump_modality_settings(self, handler, info):
        """A dump (a plan's task spec) gives the modalities' settings back under their own keys."""
        data = handler(self)
        if self.modality_settings and isinstance(data, dict):
            data |= {k: v.model_dump(mode=info.mode) for k, v in self.modality_settings.items()}
        return data

    def settings_for(self, key: str) -> BaseModel:
        """The settings a registered modality keeps under `key` (its model's defaults when the recipe gives none)."""
        return self.modality_settings.get(key) or registry.settings_keys()[key].settings[key]()

    def gives(self, key: str) -> bool:
        """Whether the recipe gives this source settings under `key` (not only the defaults)."""
        return key in self.modality_settings

    @model_validator(mode="after")
    def _modality_rules(self):
        registry.check_source(self)
        return self


class ExactDedup(Strict):
    """Exact (content hash) dedup; `global` keeps the first copy in recipe source order.

    `url`: a metadata field holding the page URL; later records with the same normalised URL are
    dropped as re-crawls (`url_duplicate`), the cheap pass before MinHash.

    `partitions`: hash ranges the keys are matched in, and partitions of the document–key graph whose
    components the survivor rule resolves (default: one per 16 input shards of the modality, at most 1024);
    each task holds one range, or about 1/partitions of the repeated keys. The result is the same for
    any number (proved by the tests), so it is in no fingerprint."""
    scope: Literal["source", "global"] = "global"
    url: str | None = None
    partitions: int | None = Field(default=None, ge=1, le=4096, exclude=True)


class MinHashDedup(Strict):
    """Near-duplicate removal with MinHash-LSH (see `curation.steps.text.minhash`); defaults as datatrove's.

    Give `threshold` (estimated Jaccard) to derive bands × rows for 112 permutations, or set
    `bands` and `rows` directly. Survivor rule (`keep`): `earliest` keeps the cluster's document
    earliest in recipe source order, then shard order, then position in its shard; `highest_quality`
    the one with the highest `score_field` (a metadata field every text source scores), then earliest."""
    ngram: int = Field(default=5, ge=1, le=64)
    bands: int = Field(default=14, ge=1, le=MAX_PERMUTATIONS)
    rows: int = Field(default=8, ge=1, le=MAX_PERMUTATIONS)
    threshold: float | None = Field(default=None, gt=0, lt=1)
    scope: Literal["source", "global"] = "global"
    seed: int = Field(default=1, ge=0, le=MAX_SEED)
    # hash partitions of the band keys and of the clustering: each band task holds 1/partitions of one band
    # column, each clustering task about 1/partitions of the edges. Unset: one per 16 input shards of the
    # sources it covers, at most 1024 (`curation.corpus.partition.auto_partitions`). The result is the same for
    # any number (tests/corpus/test_minhash_cc.py), so an unset one fingerprints as 1 (`recipe.load`)
    partitions: int | None = Field(default=None, ge=1, le=4096)
    language: str = "eng"  # picks the word tokenizer for shingles, as datatrove's `language`
    index: list[str] = []  # output folders of earlier runs to deduplicate against (same MinHash settings)
    keep: Literal["earliest", "highest_quality"] = "earliest"
    score_field: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _threshold_or_bands(self):
        if self.threshold is not None and {"bands", "rows"} & self.model_fields_set:
            raise ValueError("give either threshold or bands and rows, not both")
        if self.bands * self.rows > MAX_PERMUTATIONS:
            raise ValueError(f"bands × rows = {self.bands * self.rows} permutations, more than {MAX_PERMUTATIONS} "
                             f"(datatrove uses 14 × 8 = 112)")
        bands = self.lsh()[0]
        if self.partitions is not None and bands * self.partitions > MAX_PLAN_NODES:   # known before any input
            raise ValueError(f"the plan would hold {bands * self.partitions:,} band tasks (bands {bands} × "
                             f"partitions {self.partitions}), more than {MAX_PLAN_NODES:,}; lower bands or partitions")
        return self

    def lsh(self) -> tuple[int, int]:
        from curation.recipe.lsh import params_for_threshold
        return params_for_threshold(self.threshold) if self.threshold is not None else (self.bands, self.rows)


class Dedup(Strict):
    exact: ExactDedup | None = ExactDedup()
    minhash: MinHashDedup | None = None


class ThreatFeed(Strict):
    """A feed file, or a URL fetched once per run (scheme and resolution checked like any download).
    `format: auto` (the default) detects the format from the content and prints it; a feed that
    reads as (almost) nothing in its format is an error (see `curation.acquire.feeds`).
    `min_entry_share`: the share of its rule lines that must block something."""
    path: str | None = None
    url: str | None = None
    format: Literal["auto", "netset", "spamhaus_json", "hosts", "domains", "adblock", "unbound", "rpz", "dnsmasq",
                    "urlhaus", "urlhaus_csv", "firehol", "spamhaus"] = "auto"  # = netguard.FEED_FORMATS
    min_entry_share: float = Field(0.5, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _one_origin(self):
        if (self.path is None) == (self.url is None):
            raise ValueError("give exactly one of path or url")
        return self


class Network(Strict):
    """Safeguards for every download (Apertus 1.5 §6.4): threat feeds compiled into access lists."""
    feeds: list[ThreatFeed] = []


class Benchmark(Strict):
    """An evaluation set as a local file (.jsonl(.gz), .csv(.gz), .parquet); `fields` make an item's text."""
    name: str = Field(pattern=NAME_PATTERN)
    path: str
    fields: list[str] = Field(min_length=1)
    id_field: str | None = None


class ImageBenchmark(Strict):
    """An image evaluation set: a folder (searched recursively) or tar of image files."""
    name: str = Field(pattern=NAME_PATTERN)
    path: str


class Decontamination(Strict):
    """Remove training samples that overlap benchmark items (Apertus 1.5 §4.2): a sample is flagged when
    it contains `threshold` of one item's distinct `ngram`-grams, and removed by its id alone. A source
    losing more than `max_removal_rate` of its documents stops the run unless listed in `acknowledge`.
    `false_positives`: "source/id" of flagged samples a reviewer cleared; they are kept (ids are unique per
    shard, so an id repeated in several shards of a source clears each of them)."""
    benchmarks: list[Benchmark] = []
    # training images within their domain's pHash radius of a benchmark image are removed; low-entropy
    # domains (satellite, medical, charts, documents) match only on equal hashes
    image_benchmarks: list[ImageBenchmark] = []
    image_radii: dict[str, Annotated[int, Field(ge=0, le=64)]] = {
        "natural": 4, "satellite": 0, "medical": 0, "charts": 0, "documents": 0}
    ngram: int = Field(default=13, ge=1, le=64)
    threshold: float = Field(default=0.5, gt=0, le=1)
    max_removal_rate: float = Field(default=0.2, ge=0, le=1)
    acknowledge: list[str] = []
    false_positives: list[str] = []
    index_shards: int = Field(default=4, ge=1, le=1024)

    @model_validator(mode="after")
    def _some_benchmark(self):
        if not self.benchmarks and not self.image_benchmarks:
            raise ValueError("name at least one benchmark (benchmarks or image_benchmarks)")
        return self


class Recipe(Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    vocabulary: str
    stages: list[Stage] = Field(default_factory=lambda: [Stage(name="pretrain")], min_length=1)
    dedup: Dedup = Dedup()
    licence_policy: LicencePolicy = LicencePolicy()
    optout: OptOut | None = None
    network: Network = Network()
    decontamination: Decontamination | None = None
    ablation: Ablation | None = None  # `curate ablate`: candidate mixtures of one stage, ranked by a proxy model
    # the image codec: a seeded configuration (tokenizers/curate-demo-ibq.yaml) or a checkpoint folder
    image_tokenizer: str | None = None
    # pHash near-duplicate radius per image domain (default 0: equal hashes); null disables the domain
    image_dedup: dict[str, Annotated[int, Field(ge=0, le=64)] | None] = {"documents": None, "ocr": None,
                                                                         "web_ui": None}
    # the audio codec: a seeded configuration (tokenizers/curate-demo-wavtokenizer.yaml) or a checkpoint
    audio_tokenizer: str | None = None
    # one row per dropped or quarantined record (source, shard, id, step, reason, evidence) in
    # OUT/ledger/decisions/ and the ledger view `decisions`; turn off for very large runs
    decisions: bool = True
    tokenize_batch_size: int = Field(default=256, ge=1, le=65536)
    # merged shards as parts of at most `max_part_bytes` each (`curation.recipe.output`); unset: 4 GiB
    shards: Shards | None = None
    # the Megatron-LM hand-off of every stage that sets none (`Stage.handoff`): `packed` (each planned token
    # drawn once) or `blend` (Megatron's own sampling; sources under one sequence cannot be drawn)
    handoff: Literal["packed", "blend"] = "packed"
    # the trainer formats every stage that sets none (`Stage.trainers`) is written in: megatron (always), and
    # e.g. olmo_core (token-id arrays and a NumpyFSLDatasetConfig per stage, `curation.mixture.olmo_core`)
    trainers: Annotated[list[Trainer], AfterValidator(check_trainers)] = Field(default_factory=default_trainers,
                                                                               min_length=1)
    # how often a task lost with its worker or node (a killed or preempted machine) is run again; a task that
    # raises is never retried. How a run executes, not what it writes: in no fingerprint (`curate run --retries`)
    task_retries: int = Field(default=3, ge=0, le=100, exclude=True)
    # who provides which model, the crawler, the collection period: for the EU AI Act public summary
    # (`curation.recipe.transparency`); it describes the publication, not the data, so no fingerprint has it
    transparency: Transparency = Field(default_factory=Transparency, exclude=True)
    sources: list[Source] = Field(min_length=1)

    @field_validator("sources")
    @classmethod
    def _unique_sources(cls, sources: list[Source]) -> list[Source]:
        seen: set[str] = set()
        for s in sources:
            if s.license is None:
                raise ValueError(missing_licence(s.name))
            if s.name in seen:
                raise ValueError(f"source name {s.name!r} appears twice; names must be unique")
            seen.add(s.name)
        return sources

    @field_validator("stages")
    @classmethod
    def _unique_stages(cls, stages: list[Stage]) -> list[Stage]:
        names = [s.name for s in stages]
        if len(set(names)) != len(names):
            raise ValueError(f"stage names must be unique, got {names}")
        return stages

    @model_validator(mode="after")
    def _stage_references(self):
        names = {s.name for s in self.sources}
        categories = {s.category for s in self.sources}
        for st in self.stages:
            named = set(st.mixture or {})
            if st.long_context is not None:
                named |= set(st.long_context.priority) | set(st.long_context.top_up)
            if st.extension is not None:
                named |= {s for c in st.extension.classes.values() for s in c.sources}
            unknown = sorted(named - names)
            if unknown:
                raise ValueError(f"stage {st.name!r} mixes unknown source(s) {unknown}; sources: {sorted(names)}")
            bad = sorted(set(st.category_targets) - categories)
            if bad:
                raise ValueError(f"stage {st.name!r} targets unknown categor(ies) {bad}; "
                                 f"categories: {sorted(categories)}")
            if st.mixture and all((e.weight if e.weight is not None else e.epochs) == 0 for e in st.mixture.values()):
                raise ValueError(f"stage {st.name!r}: every mixture entry is weight 0 or epochs 0, so the stage "
                                 f"would draw nothing; give at least one source a weight or epochs above 0")
            entries = st.mixture.values() if st.mixture else [None]
            weighted = st.mixture is None or any(e.weight is not None for e in entries)
            if weighted and st.budget_tokens is None and (st.mixture is not None or st.category_targets):
                raise ValueError(f"stage {st.name!r} blends by weight, so it needs budget_tokens")
        check_extension_steps(self.stages)
        if self.ablation is not None:
            check_ablation(self.ablation, self.stages, self.sources)
        if unknown := sorted(set(self.transparency.sources) - names):
            raise ValueError(f"transparency.sources names unknown source(s) {unknown}; sources: {sorted(names)}")
        check_scores(self)   # select and dedup.minhash.keep: highest_quality need scored sources
        return self
