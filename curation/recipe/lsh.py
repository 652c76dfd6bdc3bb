"""LSH parameter arithmetic for MinHash: the collision probability of bands × rows, and the bands × rows a Jaccard threshold implies."""
from __future__ import annotations

import numpy as np


def candidate_probability(jaccard: float, bands: int, rows: int) -> float:
    return 1 - (1 - jaccard ** rows) ** bands


def params_for_threshold(threshold: float, num_perm: int = 112) -> tuple[int, int]:
    """Bands × rows (≤ num_perm) minimising false-positive plus false-negative area around `threshold`
    (the criterion datasketch uses), by numerical integration."""
    xs = np.linspace(0, 1, 2001)
    best, best_err = (1, 1), float("inf")
    for rows in range(1, num_perm + 1):
        for bands in range(1, num_perm // rows + 1):
            p = 1 - (1 - xs ** rows) ** bands
            fp = np.trapezoid(np.where(xs < threshold, p, 0), xs)
            fn = np.trapezoid(np.where(xs >= threshold, 1 - p, 0), xs)
            if fp + fn < best_err:
                best, best_err = (bands, rows), fp + fn
    return best
