"""The shared multimodal vocabulary: block layout, marker ids and the text tokenizer.

A vocabulary YAML under `tokenizers/` declares contiguous id blocks (text, reserved markers,
image codes, audio codes); `Vocabulary.load` checks them and exposes absolute ids, e.g.

    >>> v = Vocabulary.load("tokenizers/curate-demo-v1.yaml")
    >>> v.block("image").start, v.marker("image_start")
    (131272, 131072)
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import yaml

from curation.errors import RecipeError


@dataclass(frozen=True)
class Block:
    name: str
    start: int
    size: int

    @property
    def stop(self) -> int:
        return self.start + self.size

    def __contains__(self, token_id: int) -> bool:
        return self.start <= token_id < self.stop


@dataclass
class Vocabulary:
    id: str
    path: Path
    blocks: list[Block]
    padded_size: int
    reserved: dict[str, int]
    text_tokenizer_path: Path
    eod_token: str
    pad_token: str
    image_layout: dict
    sha256: str

    REQUIRED_BLOCKS = ("text", "reserved", "image", "audio")

    @classmethod
    def load(cls, path: str | Path) -> Vocabulary:
        path = Path(path).resolve()
        raw = path.read_bytes()
        try:
            data = yaml.safe_load(raw)
            blocks, start = [], 0
            for b in data["blocks"]:
                if int(b["size"]) <= 0:
                    raise ValueError(f"block {b['name']!r} has size {b['size']}; sizes must be > 0")
                blocks.append(Block(str(b["name"]), start, int(b["size"])))
                start += int(b["size"])
            names = [b.name for b in blocks]
            if tuple(names) != cls.REQUIRED_BLOCKS:
                raise ValueError(f"blocks must be {list(cls.REQUIRED_BLOCKS)} in that order, got {names}")
            padded = int(data["padded_size"])
            if padded < start:
                raise ValueError(f"padded_size {padded} is smaller than the {start} ids the blocks need")
            reserved_size = blocks[1].size
            reserved = {str(k): int(v) for k, v in data.get("reserved", {}).items()}
            for k, off in reserved.items():
                if not 0 <= off < reserved_size:
                    raise ValueError(f"reserved marker {k!r} offset {off} is outside 0..{reserved_size - 1}")
            if len(set(reserved.values())) != len(reserved):
                raise ValueError("two reserved markers share an offset")
            v = cls(id=str(data["id"]), path=path, blocks=blocks, padded_size=padded, reserved=reserved,
                    text_tokenizer_path=(path.parent / data["text_tokenizer"]).resolve(),
                    eod_token=str(data["eod_token"]), pad_token=str(data["pad_token"]),
                    image_layout=dict(data.get("image_layout", {})),
                    sha256=hashlib.sha256(raw).hexdigest())
        except (KeyError, TypeError, ValueError, yaml.YAMLError) as e:
            raise RecipeError(f"{path}: invalid vocabulary file: {e}") from None
        if not v.text_tokenizer_path.is_file():
            raise RecipeError(f"{path}: text_tokenizer {v.text_tokenizer_path} not found; "
                              f"train one with `curate tokenizer train`")
        return v

    @staticmethod
    @lru_cache(maxsize=4)
    def cached(path: str) -> Vocabulary:
        """One loaded vocabulary (and tokenizer) per path and process: tasks of a worker share it."""
        return Vocabulary.load(path)

    @property
    def size(self) -> int:
        return self.blocks[-1].stop

    def block(self, name: str) -> Block:
        for b in self.blocks:
            if b.name == name:
                return b
        raise KeyError(name)

    def marker(self, name: str) -> int:
        return self.block("reserved").start + self.reserved[name]

    def modality_of(self, token_id: int) -> str:
        for b in self.blocks:
            if token_id in b:
                return b.name
        raise ValueError(f"token id {token_id} is outside the vocabulary (0..{self.size - 1})")

    @cached_property
    def tokenizer(self):
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(str(self.text_tokenizer_path))
        if tok.get_vocab_size() > self.block("text").size:
            raise RecipeError(f"{self.text_tokenizer_path}: {tok.get_vocab_size()} text ids do not fit "
                              f"the text block of {self.block('text').size}")
        for t in (self.eod_token, self.pad_token):
            if tok.token_to_id(t) is None:
                raise RecipeError(f"{self.text_tokenizer_path}: special token {t!r} is not in the tokenizer")
        return tok

    @property
    def eod_id(self) -> int:
        return self.tokenizer.token_to_id(self.eod_token)

    @property
    def pad_id(self) -> int:
        return self.tokenizer.token_to_id(self.pad_token)
