"""Optional parts of the distribution: which extra brings which modules, and a clear error without it.

A text-only install (`pip install curate-llm`) has neither torch nor megatron-core; image sources,
audio sources and training need `curate-llm[images]`, `[audio]`, `[train]`. Modules that need an
extra import its libraries inside functions, and the entry points call `require` first, so a
missing extra is one sentence naming it, before any work, never an ImportError from a Ray task.
"""
from __future__ import annotations

import importlib.util

from curation.errors import CurateError

DISTRIBUTION = "curate-llm"

# extra -> import names it provides (what `require` checks)
EXTRAS: dict[str, tuple[str, ...]] = {
    "images": ("PIL", "imagehash", "torch"),
    "audio": ("lhotse", "soundfile", "soxr", "scipy", "torch"),
    "train": ("torch",),
}


def missing(extra: str) -> list[str]:
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def require(extra: str, what: str) -> None:
    """Raise a CurateError naming the extra when one of its modules is not installed."""
    if gone := missing(extra):
        raise CurateError(f"{what}: the optional dependencies {', '.join(gone)} are not installed; "
                          f"pip install '{DISTRIBUTION}[{extra}]'")
