"""Held-out split, pool weights and per-language upsampling, all deterministic for a seed.

Every choice below orders documents by `rank_key` = sha256(seed, document key), never by chance or
by input order, so the same spec and seed give the same training set on any machine.

- Held-out: within each (language, label), the first round(share * n) documents in rank order.
  It is taken first, on unique documents, so no copy of a held-out document is trained on.
- `take(docs, target)`: `target // n` whole copies of the documents plus the first `target % n` in rank
  order. Pool weights use it with target floor(weight * n); weight 2 doubles a pool, 0.5 keeps half.
- Languages: with n_L the training documents of language L (after weights) and m the median of the
  n_L over languages (`statistics.median`: the mean of the two middle values for an even count),
  a language with n_L < m gets the factor f_L = min(max_upsample, m / n_L); each of its
  (language, label) groups of n documents becomes take(group, floor(n * f_L)). floor keeps every
  group at or below max_upsample times its size; languages at or above the median keep f = 1.
"""
from __future__ import annotations

import hashlib
import statistics
from collections import Counter, defaultdict

from curation.classify.pools import Doc


def rank_key(seed: int, doc: Doc, copy: int = 0) -> str:
    return hashlib.sha256(f"{seed}\0{doc.key}\0{copy}".encode()).hexdigest()


def _ranked(docs: list[Doc], seed: int) -> list[Doc]:
    return sorted(docs, key=lambda d: rank_key(seed, d))


def split_held_out(docs: list[Doc], share: float, seed: int) -> tuple[list[Doc], list[Doc]]:
    groups: dict[tuple[str, str], list[Doc]] = defaultdict(list)
    for d in docs:
        groups[(d.language, d.label)].append(d)
    train, held = [], []
    for g in sorted(groups):
        ranked = _ranked(groups[g], seed)
        k = round(share * len(ranked))
        held += ranked[:k]
        train += ranked[k:]
    return train, held


def take(docs: list[Doc], target: int, seed: int) -> list[Doc]:
    if not docs or target <= 0:
        return []
    ranked = _ranked(docs, seed)
    whole, rest = divmod(target, len(ranked))
    return ranked * whole + ranked[:rest]


def apply_weights(docs: list[Doc], weights: dict[str, float], seed: int) -> list[Doc]:
    by_pool: dict[str, list[Doc]] = defaultdict(list)
    for d in docs:
        by_pool[d.pool].append(d)
    out = []
    for pool in by_pool:  # spec order (documents arrive pool by pool)
        group = by_pool[pool]
        out += take(group, int(weights[pool] * len(group)), seed)
    return out


def counts(docs: list[Doc]) -> dict[str, dict[str, int]]:
    c: dict[str, Counter] = defaultdict(Counter)
    for d in docs:
        c[d.language][d.label] += 1
    return {lang: dict(sorted(c[lang].items())) for lang in sorted(c)}


def upsample_languages(docs: list[Doc], max_upsample: float, seed: int) -> tuple[list[Doc], dict]:
    """The balanced training documents and what was done: median, factor per language."""
    per_lang = Counter(d.language for d in docs)
    if not per_lang:
        return [], {"median": 0, "factors": {}}
    median = statistics.median(per_lang.values())
    factors = {lang: (min(max_upsample, median / n) if n < median else 1.0) for lang, n in sorted(per_lang.items())}
    groups: dict[tuple[str, str], list[Doc]] = defaultdict(list)
    for d in docs:
        groups[(d.language, d.label)].append(d)
    out = []
    for (lang, label) in sorted(groups):
        group = groups[(lang, label)]
        f = factors[lang]
        out += group if f == 1.0 else take(group, int(len(group) * f), seed)
    return out, {"median": median, "factors": {k: round(v, 6) for k, v in factors.items()}}


def shuffle(docs: list[Doc], seed: int) -> list[Doc]:
    """The training order: by rank_key of (document, copy number), so copies spread over the file."""
    seen: Counter = Counter()
    keyed = []
    for d in docs:
        keyed.append((rank_key(seed + 1, d, seen[d.key]), d))
        seen[d.key] += 1
    return [d for _, d in sorted(keyed, key=lambda t: t[0])]
