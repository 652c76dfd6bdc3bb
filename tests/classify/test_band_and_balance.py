"""Percentile-band negatives (exact, ties by source position) and per-language upsampling (capped)."""
from __future__ import annotations

import math
from collections import Counter

from curation.classify.balance import (
    apply_weights,
    split_held_out,
    take,
    upsample_languages,
)
from curation.classify.pools import Doc
from curation.classify.proxy import band_select, heuristic_score


def _docs(n: int, lang: str = "en", pool: str = "p", label: str = "lq") -> list[Doc]:
    return [Doc(pool, i // 50, i % 50, f"{pool}-{i}", f"text {i}", lang, label) for i in range(n)]


def test_band_is_exactly_the_documents_between_the_50th_and_75th_percentile():
    docs = _docs(200)
    scores = [((i * 37) % 101) / 100 for i in range(200)]  # a permutation-like spread with repeats (ties)
    chosen, info = band_select(docs, scores, (50, 75), "all")
    ranked = sorted(range(200), key=lambda i: (scores[i], docs[i].file, docs[i].position))
    expected = [docs[i] for i in ranked[100:150]]
    assert chosen == expected
    assert info["all"]["candidates"] == 200 and info["all"]["selected"] == 50
    lo, hi = info["all"]["score_range"]
    below = [s for d, s in zip(docs, scores) if d not in chosen and s < lo]
    above = [s for d, s in zip(docs, scores) if d not in chosen and s > hi]
    assert len(below) <= 100 and len(above) <= 50
    # every chosen score lies between the 50th and 75th percentile values of the sorted scores
    srt = sorted(scores)
    assert all(srt[100] <= scores[docs.index(d)] <= srt[149] for d in chosen)


def test_tied_scores_are_ordered_by_pool_file_and_position():
    a = _docs(4, pool="a")
    b = _docs(4, pool="b")
    docs = b + a  # pool order = first appearance: b before a
    chosen, _ = band_select(docs, [0.5] * 8, (50, 75), "all")
    # all tied: ranks follow (pool b, then a; file; position); band = ranks 4..5
    assert [(d.pool, d.position) for d in chosen] == [("a", 0), ("a", 1)]


def test_band_is_taken_within_each_language():
    docs = _docs(40, "en") + _docs(8, "sw", pool="q")
    scores = [i / 40 for i in range(40)] + [i / 8 for i in range(8)]
    chosen, info = band_select(docs, scores, (50, 75), "language")
    assert Counter(d.language for d in chosen) == {"en": 10, "sw": 2}
    assert info["sw"] == {"candidates": 8, "selected": 2, "score_range": [0.5, 0.625]}
    n = 7  # floor arithmetic of the rule
    assert math.floor(n * 0.75) - math.floor(n * 0.5) == len(band_select(_docs(n), [0.0] * n, (50, 75), "all")[0])


def test_heuristic_proxy_ranks_prose_above_navigation():
    prose = ("The council met on Tuesday to discuss the budget. Members agreed to fund the new library.\n"
             "The decision follows two years of debate about public spending in the district.")
    nav = "Home\nLogin\nCart\nHome\nLogin\n>> >> >>\nClick here"
    assert 0 <= heuristic_score(nav) < heuristic_score(prose) <= 1
    assert heuristic_score("") == 0.0


def test_upsampling_is_capped_and_leaves_languages_at_or_above_the_median_untouched():
    docs = (_docs(100, "en") + _docs(40, "de", pool="d") + _docs(10, "fr", pool="f") + _docs(2, "sw", pool="s")
            + _docs(1, "sw", pool="s2", label="hq"))
    out, info = upsample_languages(docs, 3.0, seed=0)
    before, after = Counter(d.language for d in docs), Counter(d.language for d in out)
    assert info["median"] == (40 + 10) / 2
    assert [d for d in out if d.language == "en"] == [d for d in docs if d.language == "en"]
    assert [d for d in out if d.language == "de"] == [d for d in docs if d.language == "de"]
    assert after["fr"] == 25                      # factor 2.5: floor(10 * 2.5)
    assert info["factors"] == {"de": 1.0, "en": 1.0, "fr": 2.5, "sw": 3.0}
    groups_before = Counter((d.language, d.label) for d in docs)
    groups_after = Counter((d.language, d.label) for d in out)
    for g, n in groups_before.items():
        assert n <= groups_after[g] <= 3 * n      # never below, never above 3x
    assert groups_after[("sw", "lq")] == 6 and groups_after[("sw", "hq")] == 3
    copies = Counter(d.key for d in out)
    assert max(copies.values()) <= 3
    assert after["sw"] == 9 and before["sw"] == 3


def test_upsampling_never_exceeds_max_upsample_for_any_setting():
    for cap in (1.0, 1.5, 2.0, 3.0, 5.0):
        docs = _docs(1, "a", pool="a") + _docs(3, "b", pool="b") + _docs(7, "c", pool="c") + _docs(50, "d", pool="d")
        out, _ = upsample_languages(docs, cap, seed=1)
        for lang, n in Counter(d.language for d in docs).items():
            assert n <= Counter(d.language for d in out)[lang] <= cap * n


def test_take_weights_and_held_out_are_deterministic_and_disjoint():
    docs = _docs(30)
    assert take(docs, 75, seed=4) == take(list(reversed(docs)), 75, seed=4)   # input order does not matter
    assert Counter(Counter(d.key for d in take(docs, 75, seed=4)).values()) == {2: 15, 3: 15}
    assert len(apply_weights(docs, {"p": 0.5}, seed=4)) == 15
    train, held = split_held_out(docs, 0.2, seed=4)
    assert len(held) == 6 and not {d.key for d in train} & {d.key for d in held}
    assert split_held_out(docs, 0.2, seed=4) == (train, held)
