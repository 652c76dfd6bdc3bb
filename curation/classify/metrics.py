"""Held-out metrics of a binary classifier: precision and recall of the scored label at 0.5, and the
ROC AUC (the Mann-Whitney statistic: the chance that a random positive outscores a random negative,
ties counting one half). A metric that a group cannot define (no positives, no predicted positives,
one class only) is null, never a made-up number."""
from __future__ import annotations

from collections import defaultdict


def auc(scores: list[float], positive: list[bool]) -> float | None:
    n_pos = sum(positive)
    n_neg = len(positive) - n_pos
    if not n_pos or not n_neg:
        return None
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):  # average ranks over runs of equal scores
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    rank_sum = sum(r for r, p in zip(ranks, positive) if p)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def binary_metrics(scores: list[float], positive: list[bool], threshold: float = 0.5) -> dict:
    pred = [s >= threshold for s in scores]
    tp = sum(p and y for p, y in zip(pred, positive))
    fp = sum(p and not y for p, y in zip(pred, positive))
    fn = sum(not p and y for p, y in zip(pred, positive))
    a = auc(scores, positive)
    return {"documents": len(scores), "positives": sum(positive),
            "precision": round(tp / (tp + fp), 6) if tp + fp else None,
            "recall": round(tp / (tp + fn), 6) if tp + fn else None,
            "auc": round(a, 6) if a is not None else None}


def per_language(languages: list[str], scores: list[float], positive: list[bool]) -> dict:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, lang in enumerate(languages):
        groups[lang].append(i)
    return {"overall": binary_metrics(scores, positive),
            "per_language": {lang: binary_metrics([scores[i] for i in groups[lang]],
                                                  [positive[i] for i in groups[lang]]) for lang in sorted(groups)}}
