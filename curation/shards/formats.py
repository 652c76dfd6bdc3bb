"""The writer seam: what a trainer's on-disk format provides to receive a training stage.

A stage's plan is one list of training sequences (`curation.mixture.sequences`: which tokens, in which
order, each with the planned tokens it holds per source). A trainer format only says how they lie on disk
for its trainer and what the trainer is told to read them. The protocol lives here, below the planner, and
imports nothing of it: the planner hands a format its stage's sequences (`StageInput.sequences`). Every format is an object with the methods of
`TrainerFormat`, registered by name in `curation.mixture.handoffs.FORMATS` (the recipe's `trainers:`
names them); the manifest carries one section per format under that name, and `curate verify`, the Merkle
root and `verify --relocate` reach each format only through these methods. Today: `megatron` (Megatron
indexed datasets, `curation.mixture.megatron`, always written: the manifest's `samples` and `blend` are its)
and `olmo_core` (token-id arrays and a `NumpyFSLDatasetConfig`, `curation.mixture.olmo_core`).

A format's section holds paths relative to the manifest's folder, and in `files` every file that names the
output folder (a trainer's data arguments or config), each `{"path", "sha256"}` with the output folder
written as `{out}` in the digest, so the same run digests the same wherever its folder lives.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

import numpy as np

# a stage's sequences, each `seq_length` tokens, padded with the id given, each with the planned tokens
# it holds per source index (into `StageInput.sources`)
Sequences = Callable[[int], Iterator[tuple[np.ndarray, dict[int, int]]]]


@dataclass(frozen=True)
class StageInput:
    """Everything a format may read to write one stage's hand-off."""
    out: Path                      # the output folder (local)
    mdir: Path                     # the manifests folder: the section's paths are relative to it
    stage: str
    seq_length: int
    sources: list[dict]            # the manifest's source entries, sampling plans included
    packing: np.ndarray | None     # a long-context stage's (source, document, sequence) bins
    vocab: dict                    # the manifest's `vocabulary` section
    root: Path | str               # how written files name the output folder (its URL when published)
    stage_fp: str                  # the stage fingerprint (seeds the plan's order)
    mode: str                      # the recipe's Megatron `handoff` mode for the stage
    sequences: Sequences           # the stage's sequences in the plan's order
    max_prefix_tokens: int | None = None   # `shards.max_handoff_bytes` / 4: the most tokens of one packed prefix
    # runs independent calls `tasks(fn, [(key, args), ...], label) -> {key: result}` (the run's executor's
    # `map`, when its tasks write this output folder); None: in this process
    tasks: Callable | None = None


class TrainerFormat(Protocol):
    """A trainer's format: write a stage, list what it wrote, count what the trainer draws, check it."""

    name: str   # the recipe's spelling and the manifest section's key
    # the section's fields and their types, checked before anything reads them (a hand-edited manifest
    # gets a message naming the field, never a traceback)
    fields: ClassVar[dict[str, type | tuple[type, ...]]]

    def write(self, stage: StageInput) -> dict:
        """Write the stage's files under `core.layout.handoff_dir(out, name, stage)` (Megatron's: `OUT/megatron/
        <stage>/`); return the manifest section: `draws` (per planned source, `{"name", "planned_tokens",
        "drawn_tokens"}`: what the trainer draws of the plan) and `files` (as the module says) at least."""
        ...

    def leaves(self, section: dict) -> list[str]:
        """`path:sha256` of every file the section names, for the manifest's Merkle root."""
        ...

    def texts(self, section: dict, root: Path | str, base: Path, seq_length: int) -> dict[str, str]:
        """The contents of the section's path-holding `files` for the output folder at `root` (`base`: the
        manifests folder), as `write` wrote them; `verify --relocate` rewrites them from this."""
        ...

    def check(self, m: dict, base: Path, check_location: bool) -> list[str]:
        """Every problem of the stage's section in manifest `m` against what is on disk and what the plan
        gives (recomputed, never trusted), as messages naming the file; `check_location`: the path-holding
        files must name this output folder."""
        ...

    def summary(self, section: dict, seq_length: int) -> str:
        """One line for `curate verify`'s output once `check` found nothing."""
        ...


def smallest_uint(vocab_size: int) -> np.dtype:
    """The narrowest unsigned integer that holds every id below `vocab_size` (what numpy-array trainers
    such as OLMo-core assume from the vocabulary size)."""
    for dtype in (np.uint8, np.uint16, np.uint32, np.uint64):
        if vocab_size - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    raise ValueError(f"vocabulary size {vocab_size} does not fit 64-bit ids")


def text_digest(text: str, root: Path | str) -> str:
    """sha256 of a path-holding hand-off file with the output folder written as `{out}` (the same wherever
    it lives)."""
    import hashlib
    return hashlib.sha256(text.replace(f"{root}/", "{out}/").encode()).hexdigest()


def check_texts(label: str, section: dict, want: dict[str, str], base: Path, check_location: bool,
                what: str = "the stage's hand-off") -> list[str]:
    """A format's path-holding files (`want`: their texts for the output folder `{out}`) against the manifest's
    digests and the disk: edited is a problem; written for another location of this folder, a problem only
    with `check_location`. Used by every trainer format (`curation.shards.formats`)."""
    problems: list[str] = []
    out = base.parent
    for name in want:
        entry = section["files"].get(name)
        if entry is None:
            problems.append(f"{label}: the manifest lists no {name}")
            continue
        if entry["sha256"] != text_digest(want[name], "{out}"):
            problems.append(f"{label}: {name}'s digest in the manifest does not match {what}")
        fp = Path(os.path.normpath(base / entry["path"]))
        try:
            text = fp.read_text()
        except (OSError, UnicodeDecodeError) as e:
            problems.append(f"{label}: {fp} cannot be read ({e}); re-run `curate run` to write the hand-off")
            continue
        if text.replace(f"{out}/", "{out}/") == want[name]:
            continue
        moved = _other_root(text, want[name])
        if moved is None:
            problems.append(f"{label}: {fp} differs from {what} (edited after it was written)")
        elif check_location:
            problems.append(f"{label}: {fp} names the files of {moved}, not of this output folder {out} (moved or "
                            f"copied): rewrite it with `curate verify --relocate MANIFEST` or re-run "
                            f"`curate run` here (completed tasks are skipped)")
    return problems


def _other_root(text: str, template: str) -> str | None:
    """The output folder `text` was written for, when it is `template` for another folder."""
    head = template.split("{out}/", 1)[0]
    if "{out}/" not in template or not text.startswith(head):
        return None
    rest = text[len(head):]
    tail = template.split("{out}/", 1)[1].split("\n", 1)[0].split(" ", 1)[0].split('"', 1)[0]
    at = rest.find("/" + tail)
    root = rest[:at] if at > 0 else None
    if root is None or any(c.isspace() for c in root) or not (root.startswith("/") or "://" in root):
        return None      # an output folder is an absolute path or URL: `2 /out` is an edit, not a move
    return root if text == template.replace("{out}/", f"{root}/") else None
