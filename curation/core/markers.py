"""Completion markers: `work/markers/<node key>.json` holds a node's fingerprint and its counts.

A node is done when its marker exists with the node's current fingerprint; a re-run skips it and
reads its counts from the marker, so the ledger is the same whether or not work was redone.
"""
from __future__ import annotations

import json
from pathlib import Path

from curation.core.atomic import atomic_write_json
from curation.core.layout import marker_path


def read_marker(out: Path, key: str, fingerprint: str | None) -> dict | None:
    """The node's marker if it holds `fingerprint` (None: whatever fingerprint it holds)."""
    path = marker_path(out, key)
    try:
        marker = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return marker if fingerprint is None or marker.get("fingerprint") == fingerprint else None


def write_marker(out: Path, key: str, fingerprint: str, payload: dict) -> dict:
    marker = {"fingerprint": fingerprint, **payload}
    atomic_write_json(marker_path(out, key), marker)
    return marker
