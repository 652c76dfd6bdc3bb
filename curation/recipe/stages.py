"""Training stages in a recipe: budgets, per-source mixture entries, category targets, long-context buckets
and long-context extension steps."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from curation.recipe.base import NAME_PATTERN, Strict
from curation.recipe.filters import declared_languages
from curation.recipe.limits import (
    MAX_EPOCHS,
    MAX_SEED,
    MAX_SEQ_LENGTH,
    MAX_TOKENS,
    MAX_WEIGHT,
)

# the trainer formats a recipe may name (`trainers:`), each one registered in `curation.mixture.handoffs.FORMATS`
# (a test keeps the two in step)
Trainer = Literal["megatron", "olmo_core"]


def default_trainers() -> list[Trainer]:
    return ["megatron"]


def check_trainers(names: list[Trainer] | None) -> list[Trainer] | None:
    """`trainers` names each format once and names megatron (every stage is written for it: the manifest's
    `samples` and `blend` are its)."""
    if names is None:
        return names
    if len(set(names)) != len(names):
        raise ValueError(f"trainers {names} names a format twice; name each once")
    if "megatron" not in names:
        raise ValueError(f"trainers {names} must include megatron: every stage is written for Megatron-LM (the "
                         f"manifest's samples and blend are its); write e.g. trainers: [megatron, {names[0]}]")
    return names


class MixtureEntry(Strict):
    """How one source enters one stage: a blending weight or a fixed epoch count (0 = excluded)."""
    weight: float | None = Field(default=None, ge=0, le=MAX_WEIGHT)
    epochs: float | None = Field(default=None, ge=0, le=MAX_EPOCHS)
    max_epochs: float | None = Field(default=None, ge=0, le=MAX_EPOCHS)  # overrides the source's max_epochs here

    @model_validator(mode="after")
    def _one_of(self):
        if (self.weight is None) == (self.epochs is None):
            raise ValueError("give exactly one of weight: or epochs:")
        return self


class LongContext(Strict):
    """Length buckets for a long-context stage (see `curation.mixture.longcontext`)."""
    buckets: list[int] = Field(min_length=1, max_length=64)  # ascending upper bounds of document length, in tokens
    targets: list[Annotated[int, Field(ge=0, le=MAX_TOKENS)]] = Field(min_length=1, max_length=64)  # tokens per bucket
    priority: list[str] = Field(min_length=1)         # sources in the order they fill each bucket
    top_up: list[str] = []                            # sources whose shorter documents fill a shortfall

    @model_validator(mode="after")
    def _shape(self):
        if len(self.buckets) != len(self.targets):
            raise ValueError(f"{len(self.buckets)} buckets but {len(self.targets)} targets; give one target per bucket")
        if any(b <= a for a, b in zip(self.buckets, self.buckets[1:])) or self.buckets[0] <= 0:
            raise ValueError(f"buckets must be positive and ascending, got {self.buckets}")
        if any(t < 0 for t in self.targets):
            raise ValueError("bucket targets must be >= 0")
        return self


class TopUp(Strict):
    """Short-context top-up of an extension class (Apertus 1.5 §3.3): where the class's native long pool
    cannot reach its tokens, documents of `min_tokens`..`max_tokens` tokens (inclusive) of its sources
    fill the rest (Apertus: 1,000-16,384)."""
    min_tokens: int = Field(ge=1, le=MAX_SEQ_LENGTH)
    max_tokens: int = Field(ge=1, le=MAX_SEQ_LENGTH)

    @model_validator(mode="after")
    def _range(self):
        if self.max_tokens < self.min_tokens:
            raise ValueError(f"top_up range {self.min_tokens}..{self.max_tokens} is empty; give min_tokens <= max_tokens")
        return self


class ExtensionClass(Strict):
    """One class of long documents in an extension step (Apertus 1.5 Table 5: English, multilingual, image,
    audio, SFT): its share of the tokens beyond the cooldown subsample, drawn from its sources in proportion
    to each one's native pool, and an optional short-context top-up."""
    share: float = Field(ge=0, le=1)
    sources: list[str] = Field(min_length=1)
    top_up: TopUp | None = None


class CooldownSubsample(Strict):
    """The part of an extension step drawn from an earlier stage's mixture: `share` of the step's budget,
    split over that stage's sources by their planned shares, from documents of at most `max_tokens` tokens
    (default: the step's `native_above`; Apertus 1.5 Appendix F: under 16,384)."""
    stage: str
    share: float = Field(ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_SEQ_LENGTH)


class Extension(Strict):
    """A long-context extension step (Apertus 1.5 §3.3, Table 5, Appendix F; `curation.mixture.extension`).

    `budget_tokens` = the cooldown subsample + the classes. A class's native pool is its sources' documents
    longer than `native_above` (default: the seq_length of `start_from`) and at most the step's seq_length.
    `start_from` names the stage whose checkpoint the step continues (the previous step, or the cooldown
    for the first); the manifest records it so the trainer's chain is explicit."""
    start_from: str
    budget_tokens: int = Field(ge=1, le=MAX_TOKENS)
    cooldown_subsample: CooldownSubsample | None = None
    classes: dict[str, ExtensionClass] = Field(min_length=1)
    native_above: int | None = Field(default=None, ge=0, le=MAX_SEQ_LENGTH)

    @model_validator(mode="after")
    def _classes(self):
        total = sum(c.share for c in self.classes.values())
        if abs(total - 1) > 1e-6:
            raise ValueError(f"extension class shares add up to {total:.6f}; they are shares of the tokens "
                             f"beyond the cooldown subsample and must add up to 1")
        seen: dict[str, str] = {}
        for name, c in self.classes.items():
            for s in c.sources:
                if s in seen:
                    raise ValueError(f"source {s!r} is in extension classes {seen[s]!r} and {name!r}; "
                                     f"give each source one class")
                seen[s] = name
        return self


class Goldfish(Strict):
    """Goldfish loss (Apertus 1.5 §3.2): drop a target when a hash of the `h` labels ending at it falls
    in 1/`k` of the hash space; the same context always drops the same way. Special tokens are exempt."""
    k: int = Field(default=50, ge=2, le=2**20)
    h: int = Field(default=50, ge=1, le=4096)


class Stage(Strict):
    """A training stage. Without `mixture`, every source enters with its own `weight`.

    `budget_tokens` is in tokens of our vocabulary, all modalities counted. Sources with
    `epochs` take epochs × their tokens; sources with `weight` share what is left of the
    budget in proportion to their weights. A source missing from `mixture` keeps a zero-epoch row.
    """
    name: str = Field(pattern=NAME_PATTERN)
    seq_length: int = Field(default=4096, ge=16, le=MAX_SEQ_LENGTH)
    budget_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)  # MAX_TOKENS = 2^53
    mixture: dict[str, MixtureEntry] | None = None
    category_targets: dict[str, float] = {}
    long_context: LongContext | None = None
    # a long-context extension step: cooldown subsample + long documents by class (unset: not a step;
    # then it enters no fingerprint, so recipes written before the setting keep their plans)
    extension: Extension | None = None
    # which tokens are training targets: `all` modalities (Apertus stage 1) or `text` only (later
    # stages); default: all in the recipe's first stage, text afterwards. Task-control markers never.
    targets: Literal["all", "text"] | None = None
    goldfish: Goldfish | None = None
    # conversations' thinking spans (inner_prefix .. inner_suffix): targets, or context the model conditions on
    thinking: Literal["train", "mask"] = "train"
    # sources with `reasoning:` enter this stage as written (`keep`) or through their copy without the
    # reasoning spans (`strip`: the `<source>.no_reasoning` shards, planned on that copy's own tokens)
    reasoning: Literal["keep", "strip"] = "keep"
    # how the Megatron-LM hand-off holds the plan (`curation.mixture.megatron`): `packed` sequences that
    # `--train-samples` draws exactly once, or a `blend` of per-source prefixes Megatron samples itself;
    # unset: the recipe's `handoff`. It changes no plan, so the stage fingerprint leaves it out.
    handoff: Literal["packed", "blend"] | None = None
    # the trainer formats the stage is written in (`curation.mixture.handoffs.FORMATS`; megatron always);
    # unset: the recipe's `trainers`. Like `handoff`, it changes no plan
    trainers: list[Trainer] | None = Field(default=None, min_length=1)

    @field_validator("trainers")
    @classmethod
    def _trainers(cls, names: list[Trainer] | None) -> list[Trainer] | None:
        return check_trainers(names)

    def training(self, index: int) -> dict:
        """What a trainer of this stage (the recipe's `index`-th) is told: the manifest's `training` section,
        and the ledger's `stages.training` (JSON) that verify holds the manifest to."""
        out: dict = {"stage_index": index, "targets": self.targets or ("all" if index == 0 else "text"),
                     "goldfish": self.goldfish.model_dump() if self.goldfish else None, "thinking": self.thinking}
        if self.extension is not None:   # the checkpoint this step continues (absent for other stages)
            out["start_from"] = self.extension.start_from
        return out

    @property
    def packed_selection(self) -> bool:
        """Whether the stage selects whole documents and packs them (long-context buckets or an extension
        step) rather than sampling epochs of a mixture."""
        return self.long_context is not None or self.extension is not None

    @model_validator(mode="after")
    def _extension(self):
        ext = self.extension
        if ext is None:
            return self
        if self.long_context is not None:
            raise ValueError("a stage is either a long_context bucket stage or an extension step; drop one")
        if self.handoff == "blend":
            raise ValueError("an extension step is handed to Megatron as its packed sequences; drop `handoff: blend`")
        if self.mixture is not None or self.category_targets or self.budget_tokens is not None:
            raise ValueError("an extension step takes its sources from its classes and cooldown_subsample and "
                             "its budget from extension.budget_tokens; drop mixture, category_targets and budget_tokens")
        if ext.start_from == self.name:
            raise ValueError(f"extension step {self.name!r} cannot start from itself")
        for name, c in ext.classes.items():
            if c.top_up is not None and c.top_up.max_tokens > self.seq_length:
                raise ValueError(f"class {name!r}: top_up max_tokens {c.top_up.max_tokens} exceeds seq_length "
                                 f"{self.seq_length}; a document must fit one sequence")
        return self

    @model_validator(mode="after")
    def _long_context(self):
        lc = self.long_context
        if lc is None:
            return self
        if self.handoff == "blend":
            raise ValueError("a long_context stage is handed to Megatron as its packed sequences; drop "
                             "`handoff: blend` from it (only ordinary stages can be a blend)")
        if self.mixture is not None or self.category_targets or self.budget_tokens is not None:
            raise ValueError("a long_context stage takes its sources and budget from its buckets; "
                             "drop mixture, category_targets and budget_tokens")
        if lc.buckets[-1] > self.seq_length:
            raise ValueError(f"the largest bucket ({lc.buckets[-1]}) exceeds seq_length ({self.seq_length})")
        return self

    @field_validator("category_targets")
    @classmethod
    def _targets(cls, targets: dict[str, float]) -> dict[str, float]:
        for cat, share in targets.items():
            if not 0 <= share <= 1:
                raise ValueError(f"target share of {cat!r} must be within 0..1, got {share}")
        if sum(targets.values()) > 1 + 1e-9:
            raise ValueError(f"category targets add up to {sum(targets.values()):.3f} > 1")
        return targets


def check_extension_steps(stages: list[Stage]) -> None:
    """An extension step continues an earlier stage at a longer context, and subsamples an earlier
    ordinary (mixture-planned) stage."""
    before: dict[str, Stage] = {}
    for st in stages:
        ext = st.extension
        if ext is not None:
            prev = before.get(ext.start_from)
            if prev is None:
                raise ValueError(f"extension step {st.name!r} starts from {ext.start_from!r}, which is not an "
                                 f"earlier stage; earlier stages: {list(before)}")
            if prev.seq_length >= st.seq_length:
                raise ValueError(f"extension step {st.name!r} (seq_length {st.seq_length}) must extend the "
                                 f"context of {prev.name!r} (seq_length {prev.seq_length})")
            native = ext.native_above if ext.native_above is not None else prev.seq_length
            if native >= st.seq_length:
                raise ValueError(f"extension step {st.name!r}: native documents are longer than {native} "
                                 f"tokens, so none fits its seq_length {st.seq_length}; lower native_above")
            for name, c in ext.classes.items():
                if c.top_up is not None and c.top_up.max_tokens > native:
                    raise ValueError(f"extension step {st.name!r}, class {name!r}: the top_up range (up to "
                                     f"{c.top_up.max_tokens}) overlaps the native range (above {native}); "
                                     f"set native_above to at least {c.top_up.max_tokens}")
            sub = ext.cooldown_subsample
            if sub is not None:
                cool = before.get(sub.stage)
                if cool is None or cool.packed_selection:
                    raise ValueError(f"extension step {st.name!r}: cooldown_subsample.stage {sub.stage!r} must "
                                     f"name an earlier stage planned from a mixture (not long_context or an "
                                     f"extension step); earlier stages: {list(before)}")
                if sub.max_tokens is not None and sub.max_tokens > native:
                    raise ValueError(f"extension step {st.name!r}: the cooldown subsample's documents (up to "
                                     f"max_tokens {sub.max_tokens}) overlap the native range (above {native}); "
                                     f"lower cooldown_subsample.max_tokens to at most {native}")
        before[st.name] = st


class HeldOut(Strict):
    """A held-out evaluation set for `curate ablate`: `documents` documents of `source`, chosen by seed and
    kept out of every candidate's training plan; scored in bits per byte. `language` puts it into that
    language's bits-per-byte suite (null: the one language of the source's `language` filter)."""
    name: str = Field(pattern=NAME_PATTERN)
    source: str
    documents: int = Field(default=8, ge=1, le=100_000)
    language: str | None = Field(default=None, pattern=r"^[a-z]{2,3}$")


class ChoiceSet(Strict):
    """A held-out multiple-choice set for `curate ablate`, scored by normalized rank-choice accuracy: each
    choice's summed log-likelihood after `template` (filled with the item's `question`), divided by the
    choice's length (`normalize`: `chars`, lm-eval's acc_norm, or `bytes`, its UTF-8 bytes); the item counts
    as right when the correct choice scores highest. `format`: `arc` (AI2 ARC rows: question,
    choices{text,label}, answerKey), `mmlu` (question, choices, answer index) or `choices` (question,
    choices, answer index; the shipped German set). `path` is relative to the recipe's folder; `limit`
    takes the first that many items."""
    name: str = Field(pattern=NAME_PATTERN)
    path: str
    language: str = Field(pattern=r"^[a-z]{2,3}$")
    format: Literal["arc", "mmlu", "choices"] = "choices"
    template: str = "Question: {question}\nAnswer:"
    normalize: Literal["chars", "bytes"] = "chars"
    limit: int | None = Field(default=None, ge=1, le=1_000_000)

    @field_validator("template")
    @classmethod
    def _template(cls, t: str) -> str:
        if "{question}" not in t:
            raise ValueError(f"template {t!r} must contain {{question}}")
        return t


class Ablation(Strict):
    """Proxy-model mixture ablation (Soofi S Appendix C): each candidate replaces `stage`'s mixture; all
    train the same model for the same steps from the same seed. The signals are suite-level, per language:
    bits per byte over the language's held-out sets (lower is better) and normalized rank-choice accuracy
    over its `choice_sets` (higher is better). At every checkpoint (each `checkpoint_tokens` training
    tokens, and the last step) the candidates are ranked per signal and each gets its average rank; the
    terminal average rank (at the last checkpoint only) orders them. `checkpoint_tokens: null` evaluates
    the last step only; otherwise it must be a whole number of steps (batch_size x seq_length tokens each)."""
    stage: str
    candidates: dict[str, dict[str, MixtureEntry]] = Field(min_length=2)
    heldout: list[HeldOut] = Field(min_length=1)
    choice_sets: list[ChoiceSet] = []
    checkpoint_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    steps: int = Field(default=60, ge=1, le=1_000_000)
    batch_size: int = Field(default=4, ge=1, le=4096)
    seq_length: int = Field(default=256, ge=16, le=65536)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)

    @model_validator(mode="after")
    def _checkpoints(self):
        per_step = self.batch_size * self.seq_length
        if self.checkpoint_tokens is not None and self.checkpoint_tokens % per_step:
            raise ValueError(f"ablation.checkpoint_tokens {self.checkpoint_tokens} is not a whole number of steps "
                             f"of {per_step} tokens (batch_size {self.batch_size} x seq_length {self.seq_length}); "
                             f"give a multiple of {per_step}")
        names = [h.name for h in self.heldout] + [c.name for c in self.choice_sets]
        if len(set(names)) != len(names):
            raise ValueError(f"ablation held-out and choice set names must be unique, got {names}")
        return self


def check_ablation(ab: Ablation, stages: list, sources: list) -> None:
    """The recipe-wide checks of `ablation:`: its stage blends by budget, its candidates and held-out sets
    name known sources, and every held-out set's language is known."""
    names = {s.name for s in sources}
    stage = next((st for st in stages if st.name == ab.stage), None)
    if stage is None or stage.packed_selection or stage.budget_tokens is None:
        raise ValueError(f"ablation.stage {ab.stage!r} must name a stage with budget_tokens and no "
                         f"long_context; stages: {[st.name for st in stages]}")
    for cand, mixture in ab.candidates.items():
        if unknown := sorted(set(mixture) - names):
            raise ValueError(f"ablation candidate {cand!r} mixes unknown source(s) {unknown}")
    if unknown := sorted({h.source for h in ab.heldout} - names):
        raise ValueError(f"ablation.heldout names unknown source(s) {unknown}")
    check_heldout_languages(ab, sources)


def check_heldout_languages(ab: Ablation, sources: list) -> None:
    """Each held-out set belongs to one language's bits-per-byte suite: its `language`, else the one
    language its source's `language` filters declare; refuse a set whose language is not known."""
    by_name = {s.name: s for s in sources}
    for h in ab.heldout:
        langs = declared_languages(by_name[h.source].filters, len(by_name[h.source].filters))
        if h.language is None and (langs is None or len(langs) != 1):
            raise ValueError(f"ablation.heldout {h.name!r}: give `language:` (source {h.source!r} declares "
                             f"{'no language filter' if langs is None else f'languages {langs}'}, so its "
                             f"bits-per-byte suite is not known)")
