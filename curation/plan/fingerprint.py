"""Digests a node can be skipped by when its plan fingerprint moved but what it reads did not.

A tokenize node's plan fingerprint covers the fingerprints of the phases whose drop lists it reads,
so adding a source (which changes the exact-dedup phase) changes every tokenize fingerprint. What a
tokenize task actually reads of a phase is its own shard's slice, one file per phase; its digest
covers those files' content instead, so a shard whose slices are unchanged is not re-tokenized. A
merge's digest covers its parts' digests. The runtime skips a node when its marker matches either
its fingerprint or its digest (and writes the new fingerprint into the marker).
"""
from __future__ import annotations

import json
from pathlib import Path

from curation.core.hashing import fingerprint, sha256_file
from curation.core.layout import drops_path, marker_path
from curation.core.node import CODE_EPOCH, Node


def digest(out: Path, node: Node) -> str | None:
    """The node's digest over what it reads, or None when the node has no cheaper identity than its
    fingerprint (or an input is missing)."""
    if node.phase == "tokenize":
        assert node.source and node.shard, node.key   # a tokenize node is one shard of one source
        try:
            slices = [[name, sha256_file(drops_path(out, name, node.source, node.shard))]
                      for _, names in node.spec["drops"] for name in names]
        except FileNotFoundError:
            return None
        return fingerprint({"v": CODE_EPOCH, "phase": "tokenize", "process": node.spec["process_fingerprint"],
                            "encoder": node.spec["encoder"], "slices": slices, "decisions": node.spec["decisions"]})
    if node.phase == "merge":
        parts = []
        for key in node.deps:
            try:
                parts.append(json.loads(marker_path(out, key).read_text())["digest"])
            except (FileNotFoundError, KeyError, json.JSONDecodeError):
                return None
        sized = {"max_part_bytes": node.spec["max_part_bytes"]} if "max_part_bytes" in node.spec else {}
        return fingerprint({"v": CODE_EPOCH, "phase": "merge", "parts": parts, "outputs": node.spec["outputs"],
                            **sized})
    return None
