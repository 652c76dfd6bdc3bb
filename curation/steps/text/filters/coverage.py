"""Which languages a classifier may judge: the card's `languages` block, written by `curate classifier
train`, read by the toxicity and quality steps and by the plan.

A classifier learns, per language, to tell its two labels apart only where it saw both. A language
whose training documents are all of one label teaches the model "this language is that label" (a
toxicity model trained on English and German judged 145 of 160 clean Spanish parliament speeches
toxic). So the card states, per language, what the model was trained on (documents of each label in
the training split, before pool weights and upsampling: real documents, not copies) and evaluated on
(the held-out documents and their metrics), and the languages it *covers*: those with at least
`min_documents` training documents of each label (`coverage.min_documents` of the spec, default 20).

Applying the model to another language is refused:
- at planning (`curate validate`, `explain`, `run`) when the source declares its languages (a
  `language` filter with `languages:` before the classifier): a declared language the card does not
  cover is an error naming the classifier, the languages and what to do, unless the filter says
  `uncovered_languages: pass`;
- at run time, a document whose language (meta["language"], or the step's own language ID) the card
  does not cover is not scored: with `uncovered_languages: refuse` (the default) it is quarantined, with
  `pass` it passes the step unscored, a `passed` decision recorded; either way with the reason
  `classifier_language_not_covered`, counted per language in the ledger table `classifier_languages`.

A card without the `languages` block (written before this rule) is refused when the model is loaded
(fail closed: nothing says which languages it may judge); re-train it, which rewrites the card.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from curation.errors import RecipeError
from curation.recipe.filters import declared_languages  # noqa: F401 - the recipe layer's, used here and by quality

NOT_COVERED = "classifier_language_not_covered"
COVERAGE_RULE = "covered: at least min_documents training documents of each label (training split, before weights)"


def languages_block(train: dict[str, dict[str, int]], held: dict, labels: list[str], min_documents: int,
                    one_sided_allowed: list[str]) -> dict:
    """The card's `languages` block. `train`: documents per language and label in the training split;
    `held`: the held-out metrics per language (`metrics.per_language`); `labels`: [scored, other]."""
    pos, neg = labels
    per = {}
    for lang in sorted(set(train) | set(held)):
        t = train.get(lang, {})
        n_pos, n_neg = t.get(pos, 0), t.get(neg, 0)
        per[lang] = {"train_positives": n_pos, "train_negatives": n_neg,
                     "covered": n_pos >= min_documents and n_neg >= min_documents,
                     "held_out": held.get(lang)}
    return {"rule": COVERAGE_RULE, "min_documents": min_documents, "positive_label": pos, "negative_label": neg,
            "covered": [lang for lang, v in per.items() if v["covered"]],
            "one_sided_allowed": sorted(one_sided_allowed), "per_language": per}


def covered_languages(card: dict, model: Path, step: str) -> frozenset[str]:
    """The languages the card lets the model judge; a card without the block is refused (fail closed)."""
    block = card.get("languages")
    if not isinstance(block, dict) or not isinstance(block.get("covered"), list):
        raise RecipeError(f"{step} step: the card of {model} does not say which languages the model may judge "
                          f"(no `languages` block: written by an older curate); re-train it with `curate classifier "
                          f"train SPEC`, which writes the block from its training counts")
    return frozenset(block["covered"])


def is_covered(language: str, covered: frozenset[str]) -> bool:
    """`de` and `de_x` (a regional tag) are covered by `de`; `unknown` never is."""
    return language in covered or language.split("_")[0] in covered


def check_declared(where: str, source: str, cfg, model: Path, card: dict, declared: list[str]) -> None:
    """Planning-time refusal: the source declares languages the classifier's card does not cover."""
    covered = covered_languages(card, model, cfg.type)
    missing = [lang for lang in declared if not is_covered(lang, covered)]
    if not missing or cfg.uncovered_languages == "pass":
        return
    per = card["languages"]["per_language"]
    seen = "; ".join(f"{lang}: {per[lang]['train_positives']} {card['languages']['positive_label']} / "
                     f"{per[lang]['train_negatives']} {card['languages']['negative_label']}"
                     for lang in missing if lang in per) or "none"
    raise RecipeError(
        f"{where}: source {source!r} declares language(s) {declared} (its `language` filter), but the {cfg.type} "
        f"classifier {card.get('name')!r} ({cfg.model}) covers only {sorted(covered)} (its card: at least "
        f"{card['languages']['min_documents']} training documents of each label); not covered: {missing} "
        f"(trained on {seen}). Train the model on those languages with both labels, remove them from the "
        f"source's `language` filter, or set `uncovered_languages: pass` on this filter to pass their documents "
        f"unscored (reason {NOT_COVERED})")


# Ledger table: per source, classifier step and language, what the model was trained and evaluated on
# (from its card) and what the step did with that language's documents (from the step's counts).
TABLE = "classifier_languages"
SCHEMA = pa.schema([("run", pa.string()), ("source", pa.string()), ("step", pa.string()), ("model", pa.string()),
                    ("language", pa.string()), ("covered", pa.bool_()), ("train_positives", pa.int64()),
                    ("train_negatives", pa.int64()), ("held_out_documents", pa.int64()),
                    ("held_out_positives", pa.int64()), ("held_out_precision", pa.float64()),
                    ("held_out_recall", pa.float64()), ("held_out_auc", pa.float64()), ("scored", pa.int64()),
                    ("not_covered", pa.int64()), ("not_covered_outcome", pa.string())])


def coverage_rows(run: str, source: str, step: str, cfg, card: dict, notes: dict) -> list[dict]:
    """One row per language the card covers or the step met (scored or not covered); `notes`: the step's
    `scored:<lang>` and `not_covered:<lang>` counts (summed over shards). A language the card lists but
    neither covers nor met here (a few stray training documents) is left out: the card has it."""
    per = card["languages"]["per_language"]
    scored = {k.removeprefix("scored:"): n for k, n in notes.items() if k.startswith("scored:")}
    missed = {k.removeprefix("not_covered:"): n for k, n in notes.items() if k.startswith("not_covered:")}
    outcome = "passed" if cfg.uncovered_languages == "pass" else "quarantined"
    rows = []
    for lang in sorted({lang for lang, p in per.items() if p["covered"]} | set(scored) | set(missed)):
        p = per.get(lang, {})
        h = p.get("held_out") or {}
        rows.append({"run": run, "source": source, "step": step, "model": card.get("name"), "language": lang,
                     "covered": bool(p.get("covered", False)), "train_positives": p.get("train_positives", 0),
                     "train_negatives": p.get("train_negatives", 0), "held_out_documents": h.get("documents", 0),
                     "held_out_positives": h.get("positives", 0), "held_out_precision": h.get("precision"),
                     "held_out_recall": h.get("recall"), "held_out_auc": h.get("auc"),
                     "scored": scored.get(lang, 0), "not_covered": missed.get(lang, 0),
                     "not_covered_outcome": outcome if missed.get(lang) else None})
    return rows


def classifier_filters(src) -> list[tuple[str, int, object]]:
    """(step name, filter index, config) of a source's classifier filters, the name as the chain gives it
    (`toxicity`, then `toxicity.2`, ...: `curation.plan.pipeline.unique_names`)."""
    seen: dict[str, int] = {}
    out = []
    for i, f in enumerate(getattr(src, "filters", None) or []):
        if getattr(f, "type", None) in ("toxicity", "quality"):
            seen[f.type] = seen.get(f.type, 0) + 1
            out.append((f.type if seen[f.type] == 1 else f"{f.type}.{seen[f.type]}", i, f))
    return out

