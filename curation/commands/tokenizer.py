"""Train the small byte-level BPE text tokenizer that the demo vocabulary names.

Reproducible: the same input files (read in sorted order) and settings give a byte-identical
`tokenizer.json` (HF `tokenizers` trains single-threaded here for that reason).

    curate tokenizer train recipes/demo/corpus --vocab-size 16384 --out tokenizers/curate-demo-bpe.json
"""
from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path

from curation.errors import InputError

SPECIAL_TOKENS = ["<|endoftext|>", "<|pad|>"]


def _texts(paths: list[Path], field: str) -> Iterator[str]:
    for path in paths:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)[field]


def train_tokenizer(inputs: list[Path], out: Path, vocab_size: int = 16384, field: str = "text") -> Path:
    os.environ["RAYON_NUM_THREADS"] = "1"  # parallel merges are not tie-stable across runs
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )

    files: list[Path] = []
    for p in inputs:
        if p.is_dir():
            files.extend(sorted(x for x in p.rglob("*.jsonl*") if x.is_file()))
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(f"{p}: tokenizer training input not found")
    if not files:
        raise InputError(f"no .jsonl(.gz) files under {[str(p) for p in inputs]}")
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=2)
    tok.train_from_iterator(_texts(sorted(files), field), trainer=trainer)
    out.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(out), pretty=False)
    return out
