"""Training sequences from a manifest: its sampling plans, in a deterministic, resumable order.

Each source's plan (`plans/<stage>/<source>.npy`, repeat count per document, see `curation.mixture.sampling`)
lists which documents the stage uses and how often. Every (source, document) occurrence is put in one
order, shuffled with a seed from the stage fingerprint, and rows of `seq_length + 1` tokens are cut
from that stream of documents (a document may continue in the next row). The position is
(occurrence, token offset): saving and restoring it continues the exact same stream. Over the whole
stage the tokens per source are exactly the plan's; over a prefix they follow the plan's shares up
to sampling error (`tests/train/test_train.py` checks both, and checks the shares against megatron-core's
blended dataset on the same manifest).

Each row also carries, per token, a document number (for cross-document masking) and the source
index; `Consumed` counts what a run actually fed the model, per source and modality, and how much
of it repeated documents already seen.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from curation.mixture.manifests import load_manifest
from curation.mixture.sampling import read_plan
from curation.mixture.sequences import plan_order
from curation.shards.shardset import ShardSet


@dataclass
class Batch:
    tokens: np.ndarray     # (B, T+1) int64
    doc: np.ndarray        # (B, T+1) int64: document number within the row (0, 1, ...)
    source: np.ndarray     # (B, T+1) int64: index into ManifestData.names
    # per row: the tokens of its first document before the row (empty when the row starts a document), so a
    # loss mask that depends on earlier markers (conversations, `curation.train.chat_mask`) sees its state
    lead: list = field(default_factory=list)


@dataclass
class Consumed:
    """Tokens fed to the model per source and modality, and the share that repeated seen documents."""
    tokens: dict[tuple[str, str], int] = field(default_factory=dict)
    repeat_tokens: dict[str, int] = field(default_factory=dict)
    documents: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, modality_counts: dict[str, int], repeat: bool, new_document: bool) -> None:
        for modality, n in modality_counts.items():
            self.tokens[name, modality] = self.tokens.get((name, modality), 0) + n
        if repeat:
            self.repeat_tokens[name] = self.repeat_tokens.get(name, 0) + sum(modality_counts.values())
        if new_document:
            self.documents[name] = self.documents.get(name, 0) + 1

    def state(self) -> dict:
        return {"tokens": [[s, m, n] for (s, m), n in sorted(self.tokens.items())],
                "repeat_tokens": dict(self.repeat_tokens), "documents": dict(self.documents)}

    @classmethod
    def from_state(cls, d: dict) -> Consumed:
        return cls({(s, m): int(n) for s, m, n in d["tokens"]}, {k: int(v) for k, v in d["repeat_tokens"].items()},
                   {k: int(v) for k, v in d["documents"].items()})


class ManifestData:
    def __init__(self, manifest_path: str | Path, seq_length: int | None = None):
        self.path = Path(manifest_path)
        m = load_manifest(self.path)
        base = self.path.resolve().parent
        self.manifest, self.seq_length = m, int(seq_length or m["seq_length"])
        self.names, self._shards, self._tokens, self._pointers, self._lengths = [], [], [], [], []
        counts_of = []
        for s in m["sources"]:
            if "plan" not in s or s["effective_tokens"] == 0:
                continue
            shards = ShardSet.of_entry(base, s)   # one prefix, or the parts of a split shard set
            self.names.append(s["name"])
            self._shards.append(shards)
            self._tokens.append(shards.reader())
            self._pointers.append(shards.starts())
            self._lengths.append(shards.lengths())
            counts_of.append(read_plan(base / s["plan"]["path"]))
        if not self.names:
            raise ValueError(f"{self.path}: no source of stage {m['stage']} has planned tokens")
        # the order an ordinary stage's packed Megatron hand-off holds too (`curation.mixture.sequences`)
        self.order_source, self.order_doc = plan_order(m["stage_fingerprint"], counts_of)
        self.blocks = [(b["name"], b["start"], b["start"] + b["size"]) for b in m["vocabulary"]["blocks"]]
        self.cursor, self.offset, self.passes = 0, 0, 0
        self.consumed = Consumed()
        self._seen = [np.zeros(n.size, dtype=bool) for n in self._lengths]   # documents fed at least once

    def token_arrays(self):
        """The token arrays of every planned source's parts (memory-mapped)."""
        return [np.memmap(f"{p}.bin", dtype=sh.dtype, mode="r") for sh in self._shards for p in sh.prefixes
                if Path(f"{p}.bin").exists()]

    def planned_tokens(self) -> dict[str, int]:
        return {s["name"]: s["plan"]["tokens"] for s in self.manifest["sources"] if s["name"] in self.names}

    def _modalities(self, toks: np.ndarray) -> dict[str, int]:
        out = {}
        for name, lo, hi in self.blocks:
            n = int(((toks >= lo) & (toks < hi)).sum())
            if n:
                out[name] = n
        return out

    def next_batch(self, batch_size: int) -> Batch:
        width = self.seq_length + 1
        tokens = np.empty((batch_size, width), dtype=np.int64)
        doc = np.empty_like(tokens)
        source = np.empty_like(tokens)
        lead = []
        for row in range(batch_size):
            filled, number = 0, 0
            while filled < width:
                s, d = int(self.order_source[self.cursor]), int(self.order_doc[self.cursor])
                start, length = int(self._pointers[s][d]), int(self._lengths[s][d])
                take = min(length - self.offset, width - filled)
                if filled == 0:
                    lead.append(self._tokens[s](start, self.offset))
                piece = np.asarray(self._tokens[s](start + self.offset, take))
                tokens[row, filled:filled + take] = piece
                doc[row, filled:filled + take] = number
                source[row, filled:filled + take] = s
                first = self.offset == 0
                seen = bool(self._seen[s][d])
                self.consumed.add(self.names[s], self._modalities(piece), repeat=seen, new_document=first and not seen)
                filled += take
                self.offset += take
                number += 1
                if self.offset == length:
                    self._seen[s][d] = True
                    self.cursor, self.offset = self.cursor + 1, 0
                    if self.cursor == self.order_doc.size:   # the stage's plan is used up: start it again
                        self.cursor, self.passes = 0, self.passes + 1
        return Batch(tokens, doc, source, lead)

    def state_dict(self) -> dict:
        """Plain values and NumPy arrays (the checkpoint stores the arrays as tensors)."""
        return {"cursor": self.cursor, "offset": self.offset, "passes": self.passes,
                "consumed": self.consumed.state(), "seen": [a.copy() for a in self._seen]}

    def load_state_dict(self, st: dict) -> None:
        self.cursor, self.offset, self.passes = int(st["cursor"]), int(st["offset"]), int(st["passes"])
        self.consumed = Consumed.from_state(st["consumed"])
        self._seen = [np.asarray(a, dtype=bool).copy() for a in st["seen"]]
