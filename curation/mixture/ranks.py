"""Average rank over suite-level signals (Soofi S Appendix C): ranks, not raw scores, because the signals
have different scales. Each signal ranks the candidates 1..n (1 = best: the lowest bits per byte, the
highest accuracy). Ties share the mean of the places they span (fractional ranking: two candidates tied
for first both get 1.5, the next one 3), so a tie never depends on candidate names or order. A
candidate's average rank is the mean of its ranks over the signals; at every checkpoint of the learning
curve the ranks are recomputed, the terminal average rank uses the last checkpoint only, and R_all is the
mean of the average ranks over all checkpoints (Table 13's R_100B and R_all).
"""
from __future__ import annotations

import math


def fractional_ranks(values: dict[str, float], higher_is_better: bool) -> dict[str, float]:
    """Rank of each key (1 = best); equal values share the mean of their places."""
    bad = {k: v for k, v in values.items() if v is None or not math.isfinite(v)}
    if bad:
        raise ValueError(f"cannot rank missing or non-finite values {bad}")
    order = sorted(values, key=lambda k: -values[k] if higher_is_better else values[k])
    ranks, i = {}, 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in order[i:j + 1]:
            ranks[k] = (i + 1 + j + 1) / 2     # places i+1 .. j+1, their mean
        i = j + 1
    return ranks


def average_ranks(table: dict[str, dict[str, float]], higher_is_better: dict[str, bool]) -> dict[str, dict]:
    """Per candidate: its rank on each signal and the mean of those ranks. `table[candidate][signal]`."""
    ranks = {c: {} for c in table}
    for signal, higher in higher_is_better.items():
        for c, r in fractional_ranks({c: row[signal] for c, row in table.items()}, higher).items():
            ranks[c][signal] = r
    return {c: {"ranks": r, "average_rank": sum(r.values()) / len(r)} for c, r in ranks.items()}


def order_candidates(terminal: dict[str, float], overall: dict[str, float]) -> list[str]:
    """Candidates by terminal average rank, then by R_all (the whole curve), then by name."""
    return sorted(terminal, key=lambda c: (terminal[c], overall[c], c))


def best_two(values: dict[str, float], higher_is_better: bool) -> tuple[set[str], set[str]]:
    """The candidates holding the best value and those holding the second-best distinct value (ties
    share the mark, as in Table 13's bold and underline)."""
    distinct = sorted(set(values.values()), reverse=higher_is_better)
    first = {c for c, v in values.items() if v == distinct[0]}
    second = {c for c, v in values.items() if len(distinct) > 1 and v == distinct[1]}
    return first, second
