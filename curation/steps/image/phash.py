"""64-bit perceptual hashes (imagehash's pHash: grey, resized to `reduce`×`reduce`, DCT, the top-left
8×8 coefficients against their median), as Apertus 1.5 §2.2.1 uses them: 32×32 by default, a smaller
input for satellite imagery, where fine texture makes unrelated tiles differ."""
from __future__ import annotations

import imagehash
import numpy as np
from PIL import Image


def phash64(img: Image.Image, reduce: int = 32) -> int:
    if reduce % 8 or reduce < 8:
        raise ValueError("reduce must be a multiple of 8, at least 8")
    bits = imagehash.phash(img, hash_size=8, highfreq_factor=reduce // 8).hash.flatten()
    return int(np.packbits(bits).view(">u8")[0])


def distance(a: int, b: int) -> int:
    return (a ^ b).bit_count()
