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


def require_all(extras: list[str], what: str) -> None:
    """`require` for several extras at once: one error naming every missing extra and one pip command."""
    short = [e for e in extras if missing(e)]
    if not short:
        return
    gone = sorted({m for e in short for m in missing(e)})
    raise CurateError(f"{what}: the optional dependencies {', '.join(gone)} are not installed; "
                      f"pip install '{DISTRIBUTION}[{','.join(short)}]'")


def import_spacy() -> None:
    """Import spaCy without the torch that thinc (spaCy's model library) imports when it is installed.

    curate uses spaCy's blank tokenizers only (datatrove's word tokenizers), which never touch thinc's
    torch backend, yet `import spacy` imports torch whenever it is installed (`thinc.compat`): 1.8 s and
    180 MB more per process on this machine (`python -c "import spacy"`: 2.8 s and 284 MB against 1.0 s and
    104 MB), in every worker of a text run. So torch is hidden from thinc while spaCy is imported
    (`sys.modules["torch"] = None` makes `import torch` raise ImportError, which thinc catches: its
    `has_torch` is False) and is importable again afterwards, for the image and audio codecs. Where spaCy or
    torch is already imported this does nothing: a process never holds thinc without torch next to a torch
    it did import. Call it from the thread that builds the steps, before the first word tokenizer."""
    import sys
    if "spacy" in sys.modules or "torch" in sys.modules:
        return
    sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        import spacy  # noqa: F401
    finally:
        if sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
