"""Model classifiers on documents: a quality score in the record's metadata, and a toxicity filter.

Both apply a fastText supervised model trained by `curate classifier train` (`curation.classify`).
The model's card (`NAME.card.json` next to `NAME.ftz`/`NAME.bin`) is checked before any record is
seen: its sha256 must be the model file's, and the labels of the card and of the model file must be
the label set the step scores, so a toxicity model handed to the quality step (or a model of another
task) is refused naming both label sets.

Scores are fastText's probability of the step's first label (`hq` for quality, `toxic` for
toxicity) for the whole document as one line (`model_line`), exactly the form the trainer wrote.
fastText computes `exp(log(p + 1e-5))`, so a score lies in [1e-5, 1.00001] (as float32:
1.0000100135803223 at most); it is kept as fastText gives it (a float32 value, stored as a JSON
number), the same number datatrove's `FastTextClassifierFilter` records. Records are scored `batch_size` at a time (`predict_many`); a
document's score does not depend on its batch.

Language: from `meta["language"]` when an earlier `language` filter set it; otherwise the step runs
the same language ID (the bundled lid.176.ftz, or `language_model:`) and sets `meta["language"]` and
`meta["language_score"]` as the language filter would, so every scored record carries a language.
A language the card does not cover is not scored (`curation.steps.text.filters.coverage`): the document is
quarantined, or passed unscored where the filter says `uncovered_languages: pass`.
"""
from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pyarrow as pa

from curation.core.hashing import sha256_file
from curation.core.record import Record
from curation.errors import RecipeError
from curation.recipe.filters import Toxicity
from curation.steps.base import BatchStep
from curation.steps.text.filters.coverage import (
    NOT_COVERED,
    check_declared,
    classifier_filters,
    covered_languages,
    declared_languages,
    is_covered,
)
from curation.steps.text.filters.document import _load_fasttext, bundled_lid_model

CARD_FORMAT = "curate-classifier-card/1"
PREPROCESS = "newlines-to-spaces,drop-label-tokens"  # `model_line`: the one form used to train and to score


_SPLIT = re.compile(r"[ \t\n\v\f\r\0]+")  # the characters fastText splits words on


def model_line(text: str) -> str:
    """A document as one fastText input line (what training writes and scoring predicts on): newlines
    become spaces, so fastText sees the words it would split itself (as datatrove's filter does with
    `newline_replacement=" "`), and tokens fastText would read as labels (`__label__...`) are removed."""
    line = text.replace("\n", " ")
    if "__label__" in line:
        line = " ".join(w for w in _SPLIT.split(line) if not w.startswith("__label__"))
    return line


def card_path(model: Path) -> Path:
    return model.with_suffix(".card.json")


def _resolve(path: str, base_dir: Path | None) -> Path:
    p = Path(path)
    return base_dir / p if base_dir is not None and not p.is_absolute() else p


def predict_many(f, lines: list[str], k: int) -> list[list[tuple[str, float]]]:
    """fastText predictions `[(label, probability), ...]` per line (lines end in a newline).

    One `predict` call per line: measured on 5,833 documents (2.3 M words), `multilinePredict` took
    1.36 s against 1.20 s for the loop (fastText's per-word work dominates and the batched call
    builds numpy arrays), and fasttext-predict's `multilinePredict` returns no probabilities at all.
    The step still hands records over in batches, which is where its own overhead is amortised."""
    return [[(lab, float(p)) for p, lab in f.predict(line, k, 0.0, "strict")] for line in lines]


class FastTextScorer:
    """The probability of `label` under a fastText supervised model, for lists of documents
    (`model_line` applied here); works with either `fasttext` distribution (`predict_many`)."""

    def __init__(self, path: Path, label: str):
        if not path.is_file():
            raise RecipeError(f"fastText model {path} not found; train one with `curate classifier train`")
        self.path = path
        model = _load_fasttext(str(path))
        self._f = getattr(model, "f", model)
        # an empty line still holds the end-of-line token, so every label of a softmax model comes back
        self.labels = sorted(lab.removeprefix("__label__") for lab, _ in predict_many(self._f, ["\n"], -1)[0])
        if label not in self.labels:
            raise RecipeError(f"fastText model {path} has labels {self.labels}; it cannot score {label!r}")
        self.label = "__label__" + label

    def score(self, texts: list[str]) -> list[float]:
        preds = predict_many(self._f, [model_line(t) + "\n" for t in texts], -1)
        return [next((p for lab, p in pred if lab == self.label), 0.0) for pred in preds]


def read_card(model: Path) -> dict:
    path = card_path(model)
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecipeError(f"model card {path} not found next to {model.name}; models trained by "
                          f"`curate classifier train` come with their card (NAME.card.json)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RecipeError(f"model card {path} is not valid JSON ({e}); re-train the model") from None
    if not isinstance(card, dict) or card.get("format") != CARD_FORMAT:
        raise RecipeError(f"{path}: not a curate classifier card (format {CARD_FORMAT!r} expected)")
    return card


def checked_scorer(step: str, model: Path, labels: list[str]) -> tuple[FastTextScorer, dict]:
    """Load `model` for `step` after checking its card: same file (sha256), same label set."""
    card = read_card(model)
    sha = sha256_file(model)
    if card.get("model", {}).get("sha256") != sha:
        raise RecipeError(f"{step} step: {card_path(model)} describes another model file (sha256 "
                          f"{card.get('model', {}).get('sha256')}, {model} has {sha}); keep each model "
                          f"with its own card")
    if card.get("preprocess") != PREPROCESS:
        raise RecipeError(f"{step} step: {model} was trained on {card.get('preprocess')!r} input; this "
                          f"curate scores {PREPROCESS!r}")
    trained = sorted(card.get("labels", []))
    if trained != sorted(labels):
        raise RecipeError(f"{step} step: model {model} was trained for the label set {trained} (task "
                          f"{card.get('task')!r}); the {step} step scores the label set {sorted(labels)}; "
                          f"give a {step} model, or set `labels:` to the model's labels")
    scorer = FastTextScorer(model, labels[0])
    if scorer.labels != trained:
        raise RecipeError(f"{step} step: model file {model} holds labels {scorer.labels}, its card says "
                          f"{trained}; re-train the model")
    return scorer, card


def identify_languages(texts: list[str], model: Path | None = None) -> list[tuple[str, float]]:
    """Language ID as the `language` filter does it (folded whitespace, top label, lid.176 by default):
    `(language, score)` per text; `("unknown", 0.0)` when the model returns nothing."""
    m = _load_fasttext(str(model or bundled_lid_model()))
    preds = predict_many(getattr(m, "f", m), [" ".join(t.split()) + "\n" for t in texts], 1)
    return [(p[0][0].removeprefix("__label__"), round(p[0][1], 4)) if p else ("unknown", 0.0) for p in preds]


class _ClassifierStep(BatchStep):
    """Batched scoring; a batch whose prediction raises is redone record by record so that only the
    offending records meet `on_error`."""

    def __init__(self, cfg, *, base_dir: Path | None = None, **kw):
        super().__init__(on_error=cfg.on_error, **kw)
        self.cfg = cfg
        self.batch_size = cfg.batch_size
        model = _resolve(cfg.model, base_dir)
        self.scorer, self.card = checked_scorer(self.name, model, list(cfg.labels))
        self.covered = covered_languages(self.card, model, self.name)
        self._lid = _resolve(cfg.language_model, base_dir) if cfg.language_model else None
        if self._lid is not None and not self._lid.is_file():
            raise RecipeError(f"{self.name} step: language_model {self._lid} not found")

    def _language(self, batch: list[Record]) -> None:
        missing = [r for r in batch if not isinstance(r.meta.get("language"), str)]
        if missing:
            for r, (lang, score) in zip(missing, identify_languages([r.text for r in missing], self._lid)):
                r.meta["language"], r.meta["language_score"] = lang, score

    def _covers(self, record: Record) -> bool:
        return is_covered(record.meta["language"], self.covered)

    def _scores(self, batch: list[Record]) -> list[tuple[Record, float | None]]:
        """(record, score) in batch order; the score is None for a language the card does not cover
        (such a document is never scored: its score would mean nothing)."""
        try:
            self._language(batch)
            judged = [r for r in batch if self._covers(r)]
            scores = iter(self.scorer.score([r.text for r in judged]))
            return [(r, next(scores) if self._covers(r) else None) for r in batch]
        except Exception:  # noqa: BLE001 - find the records at fault, one at a time
            kept = []
            for r in batch:
                try:
                    self._language([r])
                    kept.append((r, self.scorer.score([r.text])[0] if self._covers(r) else None))
                except Exception as exc:  # noqa: BLE001 - the on_error policy decides
                    self.fail(r, exc)
            return kept

    def _not_covered(self, record: Record) -> bool:
        """A document of a language outside the card: passed unscored or quarantined (`uncovered_languages`),
        reason `classifier_language_not_covered`, counted as `not_covered:<lang>`."""
        lang = record.meta["language"]
        self.stats.notes[f"not_covered:{lang}"] += 1
        detail = (f"language {lang!r} is not covered by model {self.card.get('name')!r} "
                  f"(covers {sorted(self.covered)})")
        if self.cfg.uncovered_languages == "pass":
            self.sink.passed(step=self.name, record_id=record.id, reason=NOT_COVERED, detail=detail)
            return True
        self.quarantine(record.id, NOT_COVERED, detail, record.text)
        return False

    def _decide(self, record: Record, score: float) -> bool:
        """Keep (True) or drop the scored record: the quality step records the score, the toxicity step drops
        above its threshold. The one hook a classifier step implements, as `Step.process` is."""
        raise TypeError(f"{type(self).__name__} must implement _decide()")

    def _flush(self, batch: list[Record]) -> Iterator[Record]:
        start = time.perf_counter()
        kept = [r for r, s in self._scores(batch) if (self._not_covered(r) if s is None else self._decide(r, s))]
        self.stats.records_out += len(kept)
        self.stats.seconds += time.perf_counter() - start
        yield from kept


class QualityStep(_ClassifierStep):
    """Scores every document: `meta[field]` = P(labels[0]) (a float). Drops nothing."""
    name = "quality"

    def _decide(self, record: Record, score: float) -> bool:
        record.meta[self.cfg.field] = score
        self.stats.notes[f"scored:{record.meta['language']}"] += 1
        return True


class ToxicityStep(_ClassifierStep):
    """Drops a document (reason `toxic`) whose P(labels[0]) is at least its language's threshold
    (`threshold:` a number, or a map of languages with a `default`). Counts per language go into the
    step's notes: `scored:<lang>` and `toxic:<lang>`."""
    name = "toxicity"

    def __init__(self, cfg: Toxicity, **kw):
        super().__init__(cfg, **kw)
        t = cfg.threshold
        self._thresholds = dict(t) if isinstance(t, dict) else {"default": t}

    def threshold(self, language: str) -> float:
        t = self._thresholds
        return t.get(language, t.get(language.split("_")[0], t["default"]))

    # the ledger table this step contributes: documents scored and dropped per source and language
    ledger_tables: ClassVar[dict[str, pa.Schema]] = {"toxicity": pa.schema([("run", pa.string()), ("source", pa.string()), ("language", pa.string()),
                                            ("scored", pa.int64()), ("toxic", pa.int64()),
                                            ("toxic_share", pa.float64())])}

    @staticmethod
    def ledger_rows(run: str, source: str, stats) -> dict[str, list[dict]]:
        scored = {k.removeprefix("scored:"): n for k, n in stats.notes.items() if k.startswith("scored:")}
        toxic = {k.removeprefix("toxic:"): n for k, n in stats.notes.items() if k.startswith("toxic:")}
        return {"toxicity": [{"run": run, "source": source, "language": lang, "scored": n,
                              "toxic": toxic.get(lang, 0), "toxic_share": round(toxic.get(lang, 0) / n, 6)}
                             for lang, n in sorted(scored.items())]}

    def _decide(self, record: Record, score: float) -> bool:
        lang = record.meta["language"]
        if self.cfg.field:
            record.meta[self.cfg.field] = score
        self.stats.notes[f"scored:{lang}"] += 1
        if score >= self.threshold(lang):
            self.stats.notes[f"toxic:{lang}"] += 1
            self.drop(record, "toxic")
            return False
        return True


def check_source(recipe_path: Path, index: int, src, resolve) -> None:
    """Planning-time check of a source's classifier filters against their cards (`resolve`: a recipe path
    to a file): a card without the `languages` block, or a declared language it does not cover, fails."""
    for _, i, cfg in classifier_filters(src):
        model = resolve(cfg.model)
        if not model.is_file():
            continue   # the step names the missing file when it is built
        card = read_card(model)
        covered = covered_languages(card, model, cfg.type)
        where = f"{recipe_path} sources[{index}].filters[{i}] ({cfg.type})"
        thresholds = cfg.threshold if isinstance(getattr(cfg, "threshold", None), dict) else {}
        if idle := sorted(k for k in thresholds if k != "default" and not is_covered(k, covered)):
            raise RecipeError(f"{where}: threshold(s) for {idle}, but {card.get('name')!r} covers only "
                              f"{sorted(covered)}: its documents of other languages are never scored; remove "
                              f"those thresholds, or train the model on those languages")
        declared = declared_languages(src.filters, i)
        if declared is not None:
            check_declared(where, src.name, cfg, model, card, declared)
