"""The one resize rule of the image codec path: keep the aspect ratio, aim at `area` pixels, round both
sides to multiples of the codec's patch (half to even; at least one patch). The batch plan computes
every image's post-resize shape with it from scanned sizes (arrays in, arrays out) and the encoder path
resizes each decoded image to it (ints in, ints out), so a planned batch is always shape-uniform.
NumPy only: planning never imports torch.

Emu3.5's own `smart_resize` rounds differently (height first, truncated, then half up to 16; width
from the truncated height), so for some sizes its grid is one patch off this one.
"""
from __future__ import annotations

import numpy as np


def target_size(width, height, area: int, patch: int = 16):
    """(width, height) to resize to: ints for ints, arrays for arrays."""
    w, h = np.asarray(width), np.asarray(height)
    scale = np.sqrt(area / (w.astype(np.float64) * h))
    tw = np.maximum(patch, np.round(w * scale / patch).astype(np.int64) * patch)
    th = np.maximum(patch, np.round(h * scale / patch).astype(np.int64) * patch)
    return (int(tw), int(th)) if tw.ndim == 0 else (tw, th)
