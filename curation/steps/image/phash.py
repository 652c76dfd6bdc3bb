"""64-bit perceptual hashes (imagehash's pHash: grey, resized to `reduce`×`reduce`, DCT, the top-left
8×8 coefficients against their median), with the per-domain settings of Apertus 1.5 §2.2.1: a 32×32
reduction by default, a smaller input (16×16) for satellite imagery, where fine texture makes
unrelated tiles differ.

Two hashes are comparable only when both were computed at the same reduction, so every caller goes
through `domain_phash` (the hash of an image for a domain, a source's explicit `phash_reduce` taking
precedence) and records the reduction it used: image dedup and decontamination compare a training
image only with hashes made at its own reduction, and benchmark images are hashed once per reduction
in use (`default_reductions` covers every domain's built-in setting)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from PIL import Image

DEFAULT_REDUCE = 32
DOMAIN_REDUCE = {"satellite": 16}     # domains whose pHash input differs from the default


def phash64(img: Image.Image, reduce: int = DEFAULT_REDUCE) -> int:
    if reduce % 8 or reduce < 8:
        raise ValueError("reduce must be a multiple of 8, at least 8")
    import imagehash  # the [images] extra: loaded when an image is hashed, so text-only runs never need it
    bits = imagehash.phash(img, hash_size=8, highfreq_factor=reduce // 8).hash.flatten()
    return int(np.packbits(bits).view(">u8")[0])


def domain_reduce(domain: str, reduce: int | None = None) -> int:
    """The pHash input size of an image of `domain`: `reduce` when a source sets it, else the domain's."""
    return int(reduce) if reduce is not None else DOMAIN_REDUCE.get(domain, DEFAULT_REDUCE)


def domain_phash(img: Image.Image, domain: str, reduce: int | None = None) -> str:
    """The pHash of `img` for `domain` as 16 hex digits (see `domain_reduce` for the input size)."""
    return f"{phash64(img, domain_reduce(domain, reduce)):016x}"


def default_reductions() -> list[int]:
    """Every reduction a domain uses without a source override: what benchmark images are hashed at."""
    return sorted({DEFAULT_REDUCE, *DOMAIN_REDUCE.values()})


def distance(a: int, b: int) -> int:
    return (a ^ b).bit_count()
