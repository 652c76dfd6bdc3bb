"""Multi-index Hamming search returns exactly brute force's answer."""
import numpy as np
import pytest

from curation.core.hamming import HammingIndex, brute_force


def _near(rng, h: int, d: int) -> int:
    bits = rng.choice(64, size=d, replace=False)
    for b in bits:
        h ^= 1 << int(b)
    return h


@pytest.mark.slow
@pytest.mark.parametrize("blocks", [2, 4, 8])
def test_multi_index_equals_brute_force(blocks):
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2**63, 20_000, dtype=np.uint64)
    queries = [int(base[i]) for i in range(0, 20_000, 997)]
    planted = [_near(rng, q, d) for q in queries for d in (0, 1, 3, 5, 9)]
    hashes = np.concatenate([base, np.array(planted, dtype=np.uint64)])
    index = HammingIndex(hashes, blocks=blocks)
    for q in queries + [int(rng.integers(0, 2**63, dtype=np.uint64))]:
        for radius in (0, 2, 4, 7, 10):
            assert index.query(q, radius).tolist() == brute_force(hashes, q, radius).tolist()
    # a planted neighbour at distance 5 is found from radius 5 on, not before
    q = queries[3]
    at5 = 20_000 + 3 * 5 + 3
    assert at5 in index.query(q, 5) and at5 not in index.query(q, 4)


def test_empty_and_exact():
    index = HammingIndex(np.array([5, 5, 9], dtype=np.uint64))
    assert index.query(5, 0).tolist() == [0, 1]
    assert index.query(12345, 0).tolist() == []
    with pytest.raises(ValueError):
        HammingIndex(np.zeros(1, np.uint64), blocks=5)


def test_batched_queries_equal_single_queries():
    rng = np.random.default_rng(1)
    hashes = rng.integers(0, 2**63, 5_000, dtype=np.uint64)
    queries = np.concatenate([hashes[:50] ^ np.uint64(0b1011), rng.integers(0, 2**63, 20, dtype=np.uint64)])
    index = HammingIndex(hashes)
    for radius in (0, 3, 6):
        qi, hi = index.query_many(queries, radius, chunk=16)
        expected = [(i, int(j)) for i, q in enumerate(queries) for j in brute_force(hashes, int(q), radius)]
        assert list(zip(qi.tolist(), hi.tolist())) == expected
