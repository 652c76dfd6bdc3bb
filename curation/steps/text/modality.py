"""The text modality: JSON lines or Parquet documents, normalised and filtered, tokenized as text."""
from __future__ import annotations

from functools import partial
from pathlib import Path

from curation.core.hashing import content_hash, sha256_file
from curation.core.layout import NO_REASONING
from curation.core.vocab import Vocabulary
from curation.recipe import schema
from curation.recipe.filters import QualityScore, Toxicity
from curation.steps.base import StepSpec, settings_of
from curation.steps.modality import Modality
from curation.steps.text.filters import (
    DatatroveFilter,
    LanguageFilter,
    LengthFilter,
    bundled_lid_model,
)
from curation.steps.text.inputs import limits_for
from curation.steps.text.normalize import Normalize
from curation.steps.text.quality import QualityStep, ToxicityStep
from curation.steps.text.read import JsonlReader, TableReader
from curation.steps.text.tokenize import TextTokenizer
from curation.steps.text.web_read import HtmlReader, WarcReader

FILTERS = {
    schema.LengthFilter: LengthFilter,
    schema.GopherQualityFilter: DatatroveFilter,
    schema.GopherRepetitionFilter: DatatroveFilter,
    schema.C4QualityFilter: DatatroveFilter,
    schema.FineWebQualityFilter: DatatroveFilter,
    schema.LanguageFilter: LanguageFilter,
    QualityScore: QualityStep,
    Toxicity: ToxicityStep,
}


def _reader(src, path: Path, **kw):
    i, limits = src.input, limits_for(src.input)
    if i.format == "warc":
        return WarcReader(path, extract=i.extract, metadata_fields=i.metadata_fields, limits=limits, **kw)
    if i.format == "html":
        return HtmlReader(path, extract=i.extract, pages=i.pages, id_field=i.id_field,
                          metadata_fields=i.metadata_fields, limits=limits, **kw)
    cls = TableReader if i.format == "parquet" else JsonlReader
    return cls(path, text_field=i.text_field, id_field=i.id_field, metadata_fields=i.metadata_fields,
               conversations=i.conversation_form(), limits=limits, **kw)


def _reader_settings(src) -> dict:
    i = src.input
    form = i.conversation_form()
    return {"format": i.format, "text_field": i.text_field, "id_field": i.id_field,
            "metadata_fields": i.metadata_fields, "conversations": form.model_dump(mode="json") if form else None,
            **i.model_dump(mode="json", include={"max_record_bytes", "decompression", "extract", "pages"})}


def lid_model(cfg: schema.LanguageFilter, base_dir: Path) -> Path:
    """The language filter's model file: the recipe's `model` (relative to the recipe) or the bundled one."""
    if not cfg.model:
        return bundled_lid_model()
    path = Path(cfg.model)
    return path if path.is_absolute() else base_dir / path


def filter_spec(cfg, base_dir: Path) -> StepSpec:
    """A recipe filter as a step: its name, the settings it reads, how to build it."""
    cls = FILTERS[type(cfg)]
    settings = settings_of(cfg)
    if cls is LanguageFilter:
        model = lid_model(cfg, base_dir)
        settings["model_sha256"] = _sha(model)
        return StepSpec("language", settings, partial(LanguageFilter, cfg, base_dir=base_dir))
    if cls in (QualityStep, ToxicityStep):   # classifier models: their content, not their path, is the setting
        settings["model_sha256"] = _sha(_relative(cfg.model, base_dir))
        if cfg.language_model:
            settings["language_model_sha256"] = _sha(_relative(cfg.language_model, base_dir))
        return StepSpec(cls.name, settings, partial(cls, cfg, base_dir=base_dir))
    return StepSpec(cfg.type if cls is DatatroveFilter else cls.name, settings, partial(cls, cfg))


def _relative(path: str, base_dir: Path) -> Path:
    p = Path(path)
    return p if p.is_absolute() else base_dir / p


def _sha(path: Path) -> str | None:
    return sha256_file(path) if path.is_file() else None   # missing: the step names the file when it is built


def _checks(src, path: Path, base_dir: Path) -> list[StepSpec]:
    n = src.normalize
    return [StepSpec("normalize", settings_of(n), partial(Normalize, nfc=n.nfc, ftfy=n.ftfy)),
            *[filter_spec(f, base_dir) for f in src.filters]]


def _encoder(src, run: dict) -> StepSpec:
    reasoning = src.reasoning.model_dump() if src.reasoning else None

    def build(**kw):
        return TextTokenizer(Vocabulary.cached(run["vocab"]), batch_size=run["batch_size"], reasoning=reasoning,
                             source=kw["source"], sink=kw["sink"])
    return StepSpec("tokenize", {"vocab": run["vocab_sha256"], "tokenizer": run["tokenizer_sha256"],
                                 "reasoning": reasoning}, build)


TEXT = Modality(
    name="text",
    extra_columns=[],
    content_hash=lambda r: content_hash(r.text),
    extra_row=lambda r: {},
    reader=_reader,
    reader_settings=_reader_settings,
    checks=_checks,
    encoder=_encoder,
    outputs=lambda src: ("",) + ((NO_REASONING,) if src.reasoning else ()),
)


def build_filter(cfg, *, source: str, sink, base_dir: Path):
    """One recipe filter as a built step (what a process task builds from `filter_spec`)."""
    spec = filter_spec(cfg, base_dir)
    step = spec.build(source=source, sink=sink)
    step.name = step.stats.step = spec.name
    return step
