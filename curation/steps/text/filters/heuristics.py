"""datatrove's Gopher quality, Gopher repetition, C4 quality and FineWeb quality decisions, line
for line, on words split once per document (`WordCache`).

Each function takes the configured datatrove filter (its attributes are the parameters, so
defaults and parameter handling stay datatrove's), the text and the cache, and returns what the
filter's `filter(doc)` returns: True, or (False, reason); C4 returns (True, new text) when it keeps
the document. The statements follow datatrove 0.10's source in order, so the same checks fire
first, the same divisions by zero raise, and an empty mean is NaN as numpy's is. What changes is
how the numbers are computed: per distinct word instead of per word, n-gram statistics from
integer arrays (`curation.steps.text.filters.repetition`). tests/steps/text/filters/test_heuristics.py runs both on
every document of the benchmark corpora and on adversarial strings, for every parameter the recipe
schema exposes.
"""
from __future__ import annotations

import numpy as np

from curation.steps.text.filters.repetition import DuplicateScan, top_ngram_chars
from curation.steps.text.filters.word_cache import WordCache


def gopher_quality(f, text: str, cache: WordCache):
    view = cache.view(text)
    n_words = len(view.words)
    non_symbol = view.column("non_symbol")
    n_non_symbol_words_words = int(non_symbol.sum())

    if f.min_doc_words and n_non_symbol_words_words < f.min_doc_words:
        return False, "gopher_short_doc"
    if f.max_doc_words and n_non_symbol_words_words > f.max_doc_words:
        return False, "gopher_long_doc"

    # np.mean over the non-symbol words' lengths: an exact integer sum divided once (NaN if none)
    total = int(view.column("length")[non_symbol].sum())
    avg_n_words = total / n_non_symbol_words_words if n_non_symbol_words_words else float("nan")
    if f.min_avg_word_length and avg_n_words < f.min_avg_word_length:
        return False, "gopher_below_avg_threshold"
    if f.max_avg_word_length and avg_n_words > f.max_avg_word_length:
        return False, "gopher_above_avg_threshold"

    if f.max_symbol_word_ratio and text.count("#") / n_words > f.max_symbol_word_ratio:
        return False, "gopher_too_many_hashes"
    if f.max_symbol_word_ratio and (text.count("...") + text.count("…")) / n_words > f.max_symbol_word_ratio:
        return False, "gopher_too_many_ellipsis"

    lines = text.splitlines()
    if (
        f.max_bullet_lines_ratio
        and sum(s.lstrip().startswith("•") or s.lstrip().startswith("-") for s in lines) / len(lines)
        > f.max_bullet_lines_ratio
    ):
        return False, "gopher_too_many_bullets"
    if (
        f.max_ellipsis_lines_ratio
        and sum(s.rstrip().endswith("...") or s.rstrip().endswith("…") for s in lines) / len(lines)
        > f.max_ellipsis_lines_ratio
    ):
        return False, "gopher_too_many_end_ellipsis"

    if f.max_non_alpha_words_ratio and int(view.column("alpha").sum()) / n_words < f.max_non_alpha_words_ratio:
        return False, "gopher_below_alpha_threshold"

    if f.min_stop_words and len(f.stop_words.intersection(view.words)) < f.min_stop_words:
        return False, "gopher_enough_stop_words"
    return True


def gopher_repetition(f, text: str, cache: WordCache):
    from datatrove.pipeline.filters.gopher_repetition_filter import (
        find_all_duplicate,
        find_duplicates,
        find_top_duplicate,
        get_n_grams,
    )
    if not text:
        return False, "empty"

    paragraphs = f.paragraph_exp.split(text.strip())
    paragraphs_duplicates, char_duplicates = find_duplicates(paragraphs)
    if f.dup_para_frac and paragraphs_duplicates / len(paragraphs) > f.dup_para_frac:
        return False, "dup_para_frac"
    if f.dup_para_char_frac and char_duplicates / len(text) > f.dup_para_char_frac:
        return False, "dup_para_char_frac"

    lines = f._line_splitter.split(text)
    line_duplicates, char_duplicates = find_duplicates(lines)
    if f.dup_line_frac and line_duplicates / len(lines) > f.dup_line_frac:
        return False, "dup_line_frac"
    if f.dup_line_char_frac and char_duplicates / len(text) > f.dup_line_char_frac:
        return False, "dup_line_char_frac"

    view = cache.view(text)
    words = view.words
    # arrays need words; a tokenizer whose words contain " " makes " "-joined n-grams ambiguous
    arrays = bool(words) and not view.has_spaced_word
    ids = np.unique(view.ids, return_inverse=True)[1] if arrays else None  # dense ids for n-gram keys
    lengths = view.column("length")

    for n, n_frac in f.top_n_grams:
        if arrays:
            top_char_length = top_ngram_chars(ids, lengths, n)
            if top_char_length is None:
                continue
        else:
            n_grams = get_n_grams(words, n)
            if not n_grams:
                continue
            top_char_length = find_top_duplicate(n_grams)
        if top_char_length / len(text) > n_frac:
            return False, f"top_{n}_gram"

    scan = DuplicateScan(words, view.column("hash"), view.column("power"), lengths) if words else None
    for n, n_frac in f.dup_n_grams:
        n_duplicates_char = scan.chars(n) if scan is not None else find_all_duplicate(words, n)
        if n_duplicates_char / len(text) > n_frac:
            return False, f"duplicated_{n}_n_grams"
    return True


def c4_quality(f, text: str, cache: WordCache):
    from datatrove.pipeline.filters.c4_filters import CITATION_REGEX, ELLIPSIS, END_PUNCTUATION, POLICY_SUBSTRINGS

    lines = text.splitlines() if f.split_paragraph else cache.sentences(text)
    num_sentences = 0
    kept_lines = []
    for line in lines:
        line = line.strip()
        words = line.split()
        if f.max_word_length != -1 and words and max(map(len, words)) > f.max_word_length:
            continue
        if f.remove_citations:
            line = CITATION_REGEX.sub("", line)
        if f.filter_no_terminal_punct and (not line.endswith(END_PUNCTUATION) or line.endswith(ELLIPSIS)):
            continue
        if len(words) < f.min_words_per_line:
            continue
        line_l = line.lower()
        if f.filter_lorem_ipsum and "lorem ipsum" in line_l:
            return False, "lorem_ipsum"
        if f.filter_javascript and "javascript" in line_l:
            continue
        if f.filter_curly_bracket and "{" in line:
            return False, "curly_bracket"
        if f.filter_policy and any(p in line_l for p in POLICY_SUBSTRINGS):
            continue
        if f.min_num_sentences != -1:
            num_sentences += cache.sentence_count(line) if f.split_paragraph else 1
        kept_lines.append(line)
    if num_sentences < f.min_num_sentences:
        return False, "too_few_sentences"
    return True, ("\n" if f.split_paragraph else " ").join(kept_lines).strip()


def fineweb_quality(f, text: str, cache: WordCache):
    from datatrove.pipeline.filters.gopher_repetition_filter import find_duplicates

    lines = text.split("\n")
    lines = [line for line in lines if line.strip() != ""]
    if len(lines) == 0:
        return False, "empty"
    ratio = sum(1 for line in lines if line.endswith(f.stop_chars)) / len(lines)
    if ratio < f.line_punct_thr and not (ratio == 0 and f.line_punct_exclude_zero):
        return False, "line_punct_ratio"

    ratio = sum(1 for line in lines if len(line) <= f.short_line_length) / len(lines)
    if ratio > f.short_line_threshold:
        return False, "short_line_ratio"

    ratio = find_duplicates(lines)[1] / len(text.replace("\n", ""))
    if ratio > f.char_duplicates_ratio:
        return False, "char_dup_ratio"

    words = cache.view(text).words
    new_line = text.count("\n")
    if new_line / len(words) > f.new_line_ratio:
        return False, "list_ratio"
    return True


DECIDE = {"gopher_quality": gopher_quality, "gopher_repetition": gopher_repetition,
          "c4_quality": c4_quality, "fineweb_quality": fineweb_quality}
