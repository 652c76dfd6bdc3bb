"""A source's shard set: its merged documents in order, held by one Megatron prefix or by several parts.

The merge task (`curation.runtime.merge.run_merge`) writes a shard set as parts of at most the recipe's
`shards.max_part_bytes` of `.bin` each (`shards.merging.split_merge`): a set that fits one part is the
prefix `tokenized/<source>/<source><suffix>` as before; a larger one is `<prefix>.part-00000`,
`<prefix>.part-00001`, ... Documents are never split across parts, so document `d` of the set is document
`d - offsets[k]` of part `k`. Everything that reads a source's documents by index (sampling plans'
lengths, the hand-offs' sequences, verify, the ledger's counts) goes through a `ShardSet`, never one
prefix.

Tokens are read with `pread`, never memory-mapped (`curation.mixture.sequences`: a stage reads documents
in plan order, scattered over each shard; every page a mapping touched would stay in the process's RSS).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from curation.shards.counting import count_tokens_by_modality
from curation.shards.indexed import read_index
from curation.shards.merging import PART, index_sha256, part_name


class ShardSet:
    """The ordered part prefixes of a shard set, and its documents by index across them."""

    def __init__(self, prefixes: list[Path]):
        if not prefixes:
            raise ValueError("a shard set has at least one part")
        self.prefixes = [Path(p) for p in prefixes]
        self._index: tuple | None = None

    @classmethod
    def on_disk(cls, prefix: Path) -> ShardSet:
        """The set written at `prefix`: `prefix` itself, or its parts `prefix.part-00000`, ... (numbered from 0
        without a gap); FileNotFoundError when there is neither."""
        prefix = Path(prefix)
        if Path(f"{prefix}.idx").is_file():
            return cls([prefix])
        names = [p.name[:-len(".idx")] for p in prefix.parent.glob(f"{prefix.name}{PART}*.idx")]
        found = sorted(names, key=lambda n: (len(n), n))   # by number: part-100000 after part-99999
        want = [part_name(prefix, k).name for k in range(len(found))]
        if not found or found != want:
            raise FileNotFoundError(f"{prefix}.idx: no shards at {prefix} (neither the prefix nor its parts "
                                    f"{prefix.name}{PART}00000, ... numbered without a gap); re-run `curate run`")
        return cls([prefix.parent / n for n in found])

    @classmethod
    def of_entry(cls, base: Path, entry: dict) -> ShardSet:
        """The set a manifest's source entry names (`parts`, else its `prefix`), relative to `base`."""
        return cls([base / p for p in entry.get("parts") or [entry["prefix"]]])

    def _read(self) -> tuple:
        if self._index is None:
            heads = [read_index(Path(f"{p}.idx")) for p in self.prefixes]
            dtype = np.dtype(heads[0][0])
            if any(np.dtype(h[0]) != dtype for h in heads):
                raise ValueError(f"{self.prefixes[0]}: the parts of a shard set mix token types")
            sizes = [h[1].size for h in heads]
            self._index = (dtype, heads, np.cumsum([0, *sizes], dtype=np.int64))
        return self._index

    @property
    def dtype(self) -> np.dtype:
        return self._read()[0]

    def offsets(self) -> np.ndarray:
        """The first document of each part in the set's order, and the document count last (`parts + 1`)."""
        return self._read()[2]

    def lengths(self) -> np.ndarray:
        """Every document's length in tokens, in order (memory-mapped when the set is one prefix)."""
        heads = self._read()[1]
        return heads[0][1] if len(heads) == 1 else np.concatenate([h[1] for h in heads])

    def part_lengths(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per part: (lengths, byte pointers into that part's `.bin`)."""
        return [(h[1], h[2]) for h in self._read()[1]]

    def starts(self) -> np.ndarray:
        """Every document's first token in the set's token order (the parts' `.bin` back to back)."""
        dtype, heads, _ = self._read()
        if len(heads) == 1:
            return heads[0][2] // dtype.itemsize
        base, out = 0, []
        for _, lengths, pointers, _ in heads:
            out.append(pointers // dtype.itemsize + base)
            base += int(lengths.sum(dtype=np.int64))
        return np.concatenate(out)

    def reader(self) -> SetTokens | None:
        """`read(start, n)`: n ids from token `start` of the set (`starts`), by pread; None for a set without
        tokens (an empty pool has no `.bin`)."""
        dtype, heads, _ = self._read()
        totals = [int(h[1].sum(dtype=np.int64)) for h in heads]
        if not sum(totals):
            return None
        return SetTokens([Path(f"{p}.bin") for p in self.prefixes], totals, dtype)

    def counts(self, blocks, reserved: dict[str, int]) -> dict[str, int]:
        """Documents and exact tokens by modality, summed over the parts (each read from its `.bin`)."""
        total: dict[str, int] = {}
        for p in self.prefixes:
            for k, v in count_tokens_by_modality(p, blocks, reserved).items():
                total[k] = total.get(k, 0) + v
        return total

    def unsplit_sha256(self) -> list[str]:
        """sha256 of the `.bin` and the `.idx` that the set would be as one prefix (`split_merge`'s `whole`)."""
        h = hashlib.sha256()
        for p in self.prefixes:
            if Path(f"{p}.bin").exists():
                with open(f"{p}.bin", "rb") as f:
                    while block := f.read(1 << 22):
                        h.update(block)
        return [h.hexdigest(), index_sha256(self.prefixes)]


class SetTokens:
    """`tokens(start, n)`: n ids from token `start` of a set's parts back to back (a read never crosses a part:
    a document lies in one), by `pread`; the files stay open while this object lives."""

    def __init__(self, paths: list[Path], totals: list[int], dtype: np.dtype):
        self.paths, self.dtype = paths, dtype
        self.bases = np.cumsum([0, *totals], dtype=np.int64)
        self.files: dict[int, object] = {}

    def __call__(self, start: int, n: int) -> np.ndarray:
        k = int(np.searchsorted(self.bases, start, side="right")) - 1 if len(self.paths) > 1 else 0
        if k not in self.files:
            self.files[k] = open(self.paths[k], "rb", buffering=0)
        size = self.dtype.itemsize
        data = os.pread(self.files[k].fileno(), n * size, (start - int(self.bases[k])) * size)  # type: ignore[attr-defined]
        if len(data) != n * size:
            raise ValueError(f"{self.paths[k]} is shorter than its .idx says; re-run `curate run`")
        return np.frombuffer(data, dtype=self.dtype)

    def read_into(self, start: int, view: memoryview) -> None:
        """Fill `view` (bytes of whole tokens of this set's dtype) from token `start`, by one `preadv` straight
        into it: no array made per read (the packed hand-off reads every planned document so)."""
        k = int(np.searchsorted(self.bases, start, side="right")) - 1 if len(self.paths) > 1 else 0
        if k not in self.files:
            self.files[k] = open(self.paths[k], "rb", buffering=0)
        got = os.preadv(self.files[k].fileno(), [view], (start - int(self.bases[k])) * self.dtype.itemsize)  # type: ignore[attr-defined]
        if got != len(view):
            raise ValueError(f"{self.paths[k]} is shorter than its .idx says; re-run `curate run`")

    def __del__(self):
        for f in getattr(self, "files", {}).values():
            f.close()  # type: ignore[attr-defined]
