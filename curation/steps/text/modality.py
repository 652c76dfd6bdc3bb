"""The text modality: JSON lines or Parquet documents, normalised and filtered, tokenized as text; conversations
in the chat template, their media placeholders expanded by the codecs when the source asks for it."""
from __future__ import annotations

import hashlib
from functools import partial
from pathlib import Path

import pyarrow as pa

from curation.core.contain import name_digests
from curation.core.hashing import content_hash, fingerprint, sha256_file
from curation.core.layout import NO_REASONING
from curation.core.vocab import Vocabulary
from curation.recipe import schema
from curation.recipe.filters import QualityScore, Toxicity
from curation.steps.audio.declaration import audio_settings
from curation.steps.base import StepSpec, settings_of
from curation.steps.conversation.media import ConversationMedia
from curation.steps.conversation.media_refs import is_url
from curation.steps.device import device_resources, device_settings, placed
from curation.steps.encode import one_thread
from curation.steps.image.declaration import image_settings
from curation.steps.modality import Modality
from curation.steps.text.declaration import reasoning_settings, synthetic_tasks
from curation.steps.text.filters.document import (
    DatatroveFilter,
    LanguageFilter,
    LengthFilter,
    bundled_lid_model,
)
from curation.steps.text.filters.quality import QualityStep, ToxicityStep
from curation.steps.text.normalize import Normalize
from curation.steps.text.readers.inputs import limits_for
from curation.steps.text.readers.read import JsonlReader, TableReader
from curation.steps.text.readers.web_read import HtmlReader, WarcReader
from curation.steps.text.tokenize import TextTokenizer

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


def _expands(src) -> list[str]:
    """The media kinds whose placeholders the source's tokenize step expands (`conversations.expand_media`)."""
    form = src.input.conversation_form()
    return list(form.expand_media) if form is not None else []


def _checks(src, path: Path, base_dir: Path) -> list[StepSpec]:
    n = src.normalize
    specs = [StepSpec("normalize", settings_of(n), partial(Normalize, nfc=n.nfc, ftfy=n.ftfy)),
             *[filter_spec(f, base_dir) for f in src.filters]]
    if kinds := _expands(src):   # the media are read and checked with the record, before any corpus phase
        media = {"kinds": kinds, "root": src.input.conversations.media_root,
                 "min_side": image_settings(src).min_side, "max_seconds": audio_settings(src).max_seconds}
        root = Path(path).parent / media["root"]
        specs.append(StepSpec("conversation_media", media, partial(ConversationMedia, **media | {"root": root})))
    return specs


def _encoder(src, run: dict) -> StepSpec:
    reasoning = r.model_dump() if (r := reasoning_settings(src)) else None
    tasks = t.model_dump() if (t := synthetic_tasks(src)) else None
    kinds = _expands(src)
    im = image_settings(src)
    media = {"expand_media": kinds, **({"area": im.area, "batch_tokens": im.batch_tokens} if "image" in kinds else {}),
             **{f"{k}_codec": run[f"{k}_codec_sha256"] for k in kinds}}
    blocks = {"image": im, "audio": audio_settings(src)}
    for k in kinds:   # each codec's device request, under its own key (nothing for the CPU)
        media |= {f"{k}_{key}": v for key, v in device_settings(blocks[k]).items()}

    def build(**kw):
        text = TextTokenizer(Vocabulary.cached(run["vocab"]), batch_size=run["batch_size"], reasoning=reasoning,
                             tasks=tasks, source=kw["source"], sink=kw["sink"])
        if not kinds:
            return text
        # torch: only sources that expand media need it
        from curation.steps.audio.codec import WavTokenizerEncoder
        from curation.steps.codecs import load_codec
        from curation.steps.conversation.media_tokenize import ConversationMediaTokenizer
        from curation.steps.image.codec import IBQEncoder
        one_thread()
        codecs = {f"{k}_codec": load_codec(run[f"{k}_codec"], {"image": IBQEncoder, "audio": WavTokenizerEncoder}[k])
                  for k in kinds}
        step = ConversationMediaTokenizer(text, **codecs, area=im.area, batch_tokens=im.batch_tokens,
                                          checkpoint=kw.get("checkpoint"), source=kw["source"], sink=kw["sink"])
        return placed(step, {f"{k}_codec": (k, blocks[k]) for k in kinds})
    return StepSpec("tokenize", {"vocab": run["vocab_sha256"], "tokenizer": run["tokenizer_sha256"],
                                 "reasoning": reasoning, **({"media": media} if kinds else {}),
                                 **({"synthetic_tasks": tasks} if tasks else {})}, build,
                    device_resources(*(blocks[k] for k in kinds)))


def media_files(src, path: Path, base_dir: Path | None = None) -> str | None:
    """Content hash of the media files the conversations of an input shard refer to by path (for the process
    node's fingerprint; none outside the media root and `input.allow_roots` is read), when the source
    expands media; inline media are part of the input already."""
    kinds = _expands(src)
    if not kinds:
        return None
    from curation.core.record import QuarantineSink
    root = Path(path).parent / src.input.conversations.media_root
    refs = set()
    for item in _reader(src, path, shard_label="plan", source=src.name, sink=QuarantineSink()).parse():
        for m in getattr(item, "meta", {}).get("media", []):
            ref = m.get("ref")
            if isinstance(ref, str) and not ref.startswith("data:") and not is_url(ref):
                refs.add(ref)
    return fingerprint(name_digests(refs, root, src.input.allowed_roots(base_dir) if base_dir else ()))


def _content_hash(r) -> bytes:
    """What exact dedup compares: the text, and a conversation's media bytes when it carries them."""
    if not r.payload.get("media"):
        return content_hash(r.text)
    h = hashlib.blake2b(r.text.encode("utf-8"), digest_size=16)
    for m in r.payload["media"]:
        h.update(content_hash(m))
    return h.digest()


TEXT = Modality(
    name="text",
    # the checked media of conversations that expand them (`curation.steps.conversation.media`); null for the rest
    extra_columns=[("media", pa.list_(pa.binary()))],
    content_hash=_content_hash,
    extra_row=lambda r: {"media": r.payload.get("media")},
    reader=_reader,
    reader_settings=_reader_settings,
    checks=_checks,
    encoder=_encoder,
    outputs=lambda src: ("",) + ((NO_REASONING,) if src.gives("reasoning") else ()),
    record_columns=("media",),
    codecs_of=lambda src: {k: f"{k}_tokenizer" for k in _expands(src)},
    input_files=media_files,
)


def build_filter(cfg, *, source: str, sink, base_dir: Path):
    """One recipe filter as a built step (what a process task builds from `filter_spec`)."""
    spec = filter_spec(cfg, base_dir)
    step = spec.build(source=source, sink=sink)
    step.name = step.stats.step = spec.name
    return step
