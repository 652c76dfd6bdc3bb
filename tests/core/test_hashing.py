"""`fingerprint` with `Encoded` values: a value encoded once and spliced into many fingerprints gives exactly
the fingerprint of the value itself, whatever it holds (the plan's band and partition tasks each embed the
list of every shard; `curation.core.hashing`)."""
from __future__ import annotations

import random

import pytest

from curation.core.hashing import Encoded, fingerprint


def _value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(6 if depth < 3 else 4)
    if kind == 0:
        return rng.randrange(-10**15, 10**15)
    if kind == 1:
        return rng.random() * 10 ** rng.randrange(-5, 12)
    if kind == 2:   # quotes, escapes, line separators, control characters, non-ASCII
        return "".join(rng.choice('ab"\\\u2028\x01\x00é東/:0') for _ in range(rng.randrange(10)))
    if kind == 3:
        return rng.choice([None, True, False])
    if kind == 4:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    return {rng.choice(["k", "é", "z\x00", "0", "b"]) + str(rng.randrange(9)): _value(rng, depth + 1)
            for _ in range(rng.randrange(5))}


@pytest.mark.parametrize("seed", range(40))
def test_an_encoded_value_fingerprints_as_the_value(seed):
    rng = random.Random(seed)
    big, other = [_value(rng) for _ in range(6)], {"z": _value(rng)}
    plain = {"v": "0.1", "sigs": big, "part": 3, "o": other, "both": [big, other, 1]}
    spliced = {"v": "0.1", "sigs": Encoded(big), "part": 3, "o": Encoded(other),
               "both": [Encoded(big), Encoded(other), 1]}
    assert fingerprint(spliced) == fingerprint(plain)
    assert fingerprint({**spliced, "part": 4}) != fingerprint(plain)


def test_a_placeholder_lookalike_in_the_data_is_data():
    text = '"\\u0000:0"'   # what a placeholder could look like, held as an ordinary string
    assert fingerprint({"a": text, "b": Encoded([1])}) == fingerprint({"a": text, "b": [1]})


def test_other_objects_are_still_refused():
    with pytest.raises(TypeError, match="not JSON serializable"):
        fingerprint({"a": object()})
