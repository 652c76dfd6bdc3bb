"""Caption checks for paired image-text data (Apertus 1.5 §2.2.1, §3.4): synthetic recaptions fail in
recognisable ways. `caption_problem(text)` returns the first problem found, or None:

- `empty_caption`        nothing but whitespace and punctuation
- `token_loop`           one word repeated 6+ times in a row ("very very very ...")
- `repetitive_caption`   half or more of the word 3-grams are repeats (a phrase cycling)
- `runaway_numbers`      a run of 12+ numbers ("1, 2, 3, 4, ..." or coordinates spilling out)
- `repeated_ending`      the last sentence repeated 2+ times at the end
- `prompt_fragment`      leftovers of the recaptioning prompt or the model's voice ("Describe the
                         image", "As an AI", "In this image, I can see" at the very start is fine;
                         instructions addressed to the model are not)
"""
from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)
_NUMBER_RUN = re.compile(r"(?:[-+]?\d+(?:[.,]\d+)?[\s,;:/xX*]+){11,}[-+]?\d+")
_PROMPT = re.compile(
    r"describe (?:this|the) (?:image|picture|photo)|provide a (?:detailed |short )?(?:description|caption)|"
    r"as an ai(?: language model)?|i(?:'m| am) (?:sorry|unable|not able)|here is (?:a|the) (?:detailed )?"
    r"(?:description|caption)|<image>|\[/?inst\]|<\|im_(?:start|end)\|>|user:|assistant:", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?]+[.!?]*")


# every reason a caption check can give (`curation.steps.image.worklist` exports the samples it flags)
CAPTION_REASONS = ("empty_caption", "token_loop", "repeated_ending", "repetitive_caption", "runaway_numbers",
                   "prompt_fragment")


def caption_problems(text: str | None) -> list[str]:
    """Every problem of the caption, in the order above (a reviewer or a recaptioning prompt sees all)."""
    words = _WORD.findall((text or "").lower())
    if not words:
        return ["empty_caption"]
    found = []
    run = 1
    for a, b in zip(words, words[1:]):
        run = run + 1 if a == b else 1
        if run >= 6:
            found.append("token_loop")
            break
    sentences = [s.strip().lower() for s in _SENTENCE.findall(text) if s.strip()]
    if len(sentences) >= 3 and sentences[-1] == sentences[-2] == sentences[-3]:
        found.append("repeated_ending")
    grams = list(zip(words, words[1:], words[2:]))
    if len(grams) >= 8 and len(set(grams)) * 2 <= len(grams):
        found.append("repetitive_caption")
    if _NUMBER_RUN.search(text):
        found.append("runaway_numbers")
    if _PROMPT.search(text):
        found.append("prompt_fragment")
    return found


def caption_problem(text: str | None) -> str | None:
    """The first problem of the caption (its quarantine reason), or None."""
    found = caption_problems(text)
    return found[0] if found else None
