"""Image decontamination: training images whose pHash lies within a domain's Hamming radius of a
benchmark image's. Radii are per domain because false positives are not: natural photos tolerate a
few bits (re-encoding, resizing move 0-4 bits), while low-entropy domains (satellite, medical, charts)
have unrelated images within a few bits of each other, so only exact equality is safe there."""
from __future__ import annotations

import numpy as np

from curation.core.hamming import HammingIndex

DEFAULT_RADII = {"natural": 4, "satellite": 0, "medical": 0, "charts": 0, "documents": 0}


def match_images(train: np.ndarray, domains: list[str], benchmark: np.ndarray,
                 radii: dict[str, int] = DEFAULT_RADII, default_radius: int = 0) -> list[tuple[int, int, int]]:
    """(training index, benchmark index, distance) for every training image within its domain's radius."""
    index = HammingIndex(np.asarray(benchmark, dtype=np.uint64))
    train = np.asarray(train, dtype=np.uint64)
    found = []
    by_radius: dict[int, list[int]] = {}
    for i, d in enumerate(domains):
        by_radius.setdefault(radii.get(d, default_radius), []).append(i)
    for radius, members in sorted(by_radius.items()):
        members = np.array(members, dtype=np.int64)
        qi, bi = index.query_many(train[members], radius)
        dist = np.bitwise_count(train[members][qi] ^ index.hashes[bi])
        found += zip(members[qi].tolist(), bi.tolist(), dist.tolist())
    return sorted(found)
