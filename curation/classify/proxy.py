"""Negatives from a percentile band of a proxy quality score (FineWeb2-HQ+, Apertus 1.5 §3.1.2).

The band sets the decision boundary against fluent but low-utility text rather than obvious noise:
documents below the band are mostly noise a heuristic filter would drop anyway, those above it are
the best the candidate pool has.

Proxies:
- `{model: FILE, label: L}`: a fastText model; the score is P(L) (a first-round quality model, or a
  published one such as an educational-quality classifier).
- `{heuristic: signals}`: no model at hand. The score is the mean of five signals in [0, 1], each the
  continuous form of a rule of datatrove's heuristic filters (computed with datatrove's helpers):
  terminal-punctuation line share (FineWeb `line_punct_ratio`, C4), long-line share (1 - FineWeb
  `short_line_ratio`, lines of at most 30 characters), unique-line character share (1 - FineWeb
  `char_dup_ratio` / Gopher `dup_line_char_frac`), words holding a letter (Gopher
  `max_non_alpha_words_ratio`), and 1 - the top word-2-gram character share (Gopher
  `top_n_grams`). These rules are how FineWeb and Gopher separate boilerplate, lists and spam from
  prose; averaged they rank documents by fluency. They do not see usefulness, which is why the
  band stops at the 75th percentile: the top quarter is fluent text that may be good, and the
  positives define good. Words are whitespace-split, so the score is language-agnostic (scripts
  written without spaces get one word per line; their band is still taken within their language).

Band rule (exact, ties included): the candidates of a group (a language, or all with
`band_by: all`) are sorted by (score, pool order, file order, position) ascending; with n of them,
the band is the documents of rank r, floor(n * lo / 100) <= r < floor(n * hi / 100). Equal scores are
thus ordered by where the documents come from, never by chance, and a band holds exactly
floor(n * hi / 100) - floor(n * lo / 100) documents.
"""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from datatrove.pipeline.filters.gopher_repetition_filter import (
    find_duplicates,
    find_top_duplicate,
    get_n_grams,
)
from datatrove.utils.text import TERMINAL_PUNCTUATION

from curation.classify.pools import Doc
from curation.classify.spec import FastTextProxy, Negatives
from curation.core.hashing import sha256_file
from curation.errors import RecipeError
from curation.steps.text.filters.quality import FastTextScorer

_STOP = tuple(TERMINAL_PUNCTUATION)
SIGNALS = ["terminal_punctuation_lines", "long_lines", "unique_line_chars", "alphabetic_words",
           "not_top_2gram_chars"]


def signal_scores(text: str) -> dict[str, float]:
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    words = text.split()
    if not lines or not words:
        return dict.fromkeys(SIGNALS, 0.0)
    chars = sum(len(ln) for ln in lines)
    grams = get_n_grams(words, 2)
    return {
        "terminal_punctuation_lines": sum(ln.endswith(_STOP) for ln in lines) / len(lines),
        "long_lines": sum(len(ln) > 30 for ln in lines) / len(lines),
        "unique_line_chars": 1 - find_duplicates(lines)[1] / chars,
        "alphabetic_words": sum(any(c.isalpha() for c in w) for w in words) / len(words),
        "not_top_2gram_chars": 1 - (find_top_duplicate(grams) / max(1, sum(len(w) for w in words))
                                    if len(grams) > 1 else 0.0),
    }


def heuristic_score(text: str) -> float:
    s = signal_scores(text)
    return min(1.0, max(0.0, sum(s.values()) / len(s)))


def proxy_scores(negatives: Negatives, docs: list[Doc], base_dir: Path) -> tuple[list[float], dict]:
    """The proxy score of every candidate, and the card's description of the proxy."""
    proxy = negatives.proxy
    if isinstance(proxy, FastTextProxy):
        path = Path(proxy.model) if Path(proxy.model).is_absolute() else base_dir / proxy.model
        if not path.is_file():
            raise RecipeError(f"negatives.proxy.model {path} not found; name a fastText model file, or use "
                              f"`proxy: {{heuristic: signals}}`")
        scorer = FastTextScorer(path, proxy.label)
        scores = []
        for i in range(0, len(docs), 512):
            scores += scorer.score([d.text for d in docs[i:i + 512]])
        rel = str(path.relative_to(base_dir)) if path.is_relative_to(base_dir) else str(path)
        return scores, {"kind": "fasttext", "model": rel, "sha256": sha256_file(path), "label": proxy.label}
    return [heuristic_score(d.text) for d in docs], {"kind": "heuristic", "name": "signals", "signals": SIGNALS}


def band_select(docs: list[Doc], scores: list[float], band: tuple[float, float], by: str) -> tuple[list[Doc], dict]:
    """The documents in the percentile band (rule in the module docstring) and, per group, the
    candidate count, band size and the score range of the band."""
    order = {"pool": {}}  # pool order = first appearance (docs come in spec order)
    for d in docs:
        order["pool"].setdefault(d.pool, len(order["pool"]))
    groups: dict[str, list[tuple[float, Doc]]] = defaultdict(list)
    for d, s in zip(docs, scores):
        groups[d.language if by == "language" else "all"].append((s, d))
    chosen, info = [], {}
    lo, hi = band
    for g in sorted(groups):
        ranked = sorted(groups[g], key=lambda t: (t[0], order["pool"][t[1].pool], t[1].file, t[1].position))
        n = len(ranked)
        a, b = math.floor(n * lo / 100), math.floor(n * hi / 100)
        sel = ranked[a:b]
        chosen += [d for _, d in sel]
        info[g] = {"candidates": n, "selected": len(sel),
                   "score_range": [sel[0][0], sel[-1][0]] if sel else None}
    return chosen, info
