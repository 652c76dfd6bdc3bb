"""Document filters: length, datatrove's quality heuristics (exact and vectorised), language ID and
the model classifiers (quality score, toxicity)."""
