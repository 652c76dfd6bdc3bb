"""Small recipes for the output-folder tests (locks, --force, URLs, operator faults)."""
from __future__ import annotations

import random
from pathlib import Path

from tests.conftest import make_recipe, write_jsonl

WORDS = ("river town library volunteers books history mill staff stories garden bridge market school harbour "
         "train station museum forest lake mountain bakery festival").split()


def doc(seed: int, n: int = 60) -> str:
    r = random.Random(seed)
    return " ".join(r.choice(WORDS) for _ in range(n)) + "."


def tiny_recipe(tmp: Path, sources: tuple[str, ...] = ("a", "b"), name: str = "t") -> Path:
    """Sources of distinct documents (two shards for the first), exact and MinHash dedup, one stage."""
    data = tmp / "data"
    files = {}
    for k, src in enumerate(sources):
        shards = 2 if k == 0 else 1
        files[src] = [write_jsonl(data / f"{src}{i}.jsonl", [{"id": f"{src}{i}-{j}", "text": doc(1000 * k + 10 * i + j)}
                                                             for j in range(5)]) for i in range(shards)]
    path = make_recipe(tmp, files, extra="dedup: {minhash: {}}")
    path.write_text(path.read_text().replace("name: t\n", f"name: {name}\n", 1))
    return path
