r"""Token ids of texts of any length in bounded memory, identical to encoding each text whole.

HF `tokenizers` keeps a whole `Encoding` per text (tokens, offsets, masks: about 425 bytes per token
even without offsets), so one 30 MB record costs gigabytes while only `.ids` are kept. Here a long
text is cut into pieces of about `PIECE_CHARS` characters at boundaries where encoding the pieces
gives the same ids as encoding the whole, the pieces are encoded in groups of at most
`BUDGET_CHARS` characters, and only int32 ids are kept.

Why the cuts are safe (for the byte-level BPE the vocabularies use: an NFC (or no) normalizer, the
GPT-2 regex pre-tokenizer, BPE merges that never cross a pre-token):
- the text is NFC-normalised once first (a no-op, and no copy, for text already in NFC); a prefix of
  an NFC text is NFC, and so is a suffix that starts at a starter (combining class 0), so the
  tokenizer's own NFC of each piece changes nothing;
- a cut is the start of a pre-token found by pre-tokenizing a window that itself starts at a cut (so
  its matches are the whole text's), at least `_TAIL` characters before the window's end (the regex
  looks at most one character past a match, so a match that ends there is the whole text's too);
  the character before a cut is not whitespace: the regex's `\s+(?!\S)` looks one past a whitespace
  run, so a run ending at a cut could match differently in the left piece ("\n\nWord" is "\n", "\n",
  "Word" whole, but a piece ending "\n\n" would make it one pre-token). Any other match that ends at
  a cut ends there whatever follows it, and no match that ends before it looks at it, so the left
  piece pre-tokenizes to the same matches, and the right one (from the same position) too;
- no cut falls inside an occurrence of an added token (`<|endoftext|>` in a text is split before
  pre-tokenization).
A pre-token longer than a piece (a run of letters or whitespace with no boundary) is not cut: the
window grows until it holds a boundary, so such a text is encoded whole, as before. A tokenizer of
another shape (another normalizer or pre-tokenizer) is encoded whole too: ids before memory.
"""
from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterator, Sequence

import numpy as np

PIECE_CHARS = 1 << 16     # a text longer than this is cut into pieces of about this size
BUDGET_CHARS = 1 << 18    # characters encoded per call: bounds the transient Encodings (~30 MB)
_TAIL = 16                # a cut stays this far from its window's end (the regex looks 1 past a match)
# characters some regex engines' \s matched in older Unicode versions: never cut after them either
_SPACE_LIKE = frozenset("\u180e\u200b\u200c\u200d\u2060\ufeff")


def _splittable(tokenizer) -> bool:
    pre, norm = tokenizer.pre_tokenizer, tokenizer.normalizer
    pre_ok = (type(pre).__name__ == "ByteLevel" and getattr(pre, "use_regex", False)
              and not getattr(pre, "add_prefix_space", True))   # a prefix space per piece would change ids
    norm_ok = norm is None or type(norm).__name__ == "NFC"
    return pre_ok and norm_ok


class PieceEncoder:
    """`ids(texts)`: one int32 array of token ids per text, as `encode_batch(texts)` would give."""

    def __init__(self, tokenizer, *, piece_chars: int = PIECE_CHARS, budget_chars: int = BUDGET_CHARS):
        self.tokenizer = tokenizer
        fast = getattr(tokenizer, "encode_batch_fast", None)  # no offsets: faster, same ids
        self._encode: Callable = fast or tokenizer.encode_batch
        self.piece_chars, self.budget_chars = piece_chars, max(budget_chars, piece_chars)
        self.splittable = _splittable(tokenizer)
        self._added = [t.content for t in tokenizer.get_added_tokens_decoder().values()] if self.splittable else []

    def cuts(self, text: str) -> list[int]:
        """The offsets (in `text`, already NFC) at which it is cut; empty for a short text."""
        if not self.splittable or len(text) <= self.piece_chars:
            return []
        pre = self.tokenizer.pre_tokenizer
        out, start, n = [], 0, len(text)
        while n - start > self.piece_chars:
            width, cut = self.piece_chars, None
            while cut is None and start + width < n:
                window = text[start:start + width + _TAIL]
                limit = len(window) - _TAIL
                # the last pre-token start in the window's safe part that is a starter and no added token spans
                for _, (b, _e) in reversed(pre.pre_tokenize_str(window)):
                    if 0 < b <= limit and self._safe(text, start + b):
                        cut = start + b
                        break
                width *= 2
            if cut is None:   # one pre-token runs to the end: encode the rest whole
                break
            out.append(cut)
            start = cut
        return out

    def _safe(self, text: str, at: int) -> bool:
        if unicodedata.combining(text[at]):
            return False
        if text[at - 1].isspace() or text[at - 1] in _SPACE_LIKE:
            return False
        for tok in self._added:
            lo = max(0, at - len(tok) + 1)
            hit = text.find(tok, lo, at + len(tok) - 1)
            if hit != -1 and hit < at:
                return False
        return True

    def _pieces(self, texts: Sequence[str]) -> Iterator[tuple[int, str]]:
        """(text index, piece), lazily: only the pieces of one encoding group exist at a time."""
        for i, text in enumerate(texts):
            if self.splittable and len(text) > self.piece_chars:
                text = unicodedata.normalize("NFC", text)   # the same object when already NFC
                bounds = [0, *self.cuts(text), len(text)]
                for a, b in zip(bounds, bounds[1:]):
                    yield i, text[a:b]
            else:
                yield i, text

    def ids(self, texts: Sequence[str], end: int | None = None) -> list[np.ndarray]:
        """`end`, when given, is appended to every non-empty array (the EOD id) in the one final copy."""
        parts: list[list[np.ndarray]] = [[] for _ in texts]
        group: list[tuple[int, str]] = []
        size = 0
        for item in self._pieces(texts):
            if group and size + len(item[1]) > self.budget_chars:
                self._flush(group, parts)
                group, size = [], 0
            group.append(item)
            size += len(item[1])
        if group:
            self._flush(group, parts)
        tail = [np.array([end], np.int32)] if end is not None else []
        return [np.concatenate([*p, *tail]) if sum(map(len, p)) else np.empty(0, np.int32) for p in parts]

    def _flush(self, group: list[tuple[int, str]], parts: list[list[np.ndarray]]) -> None:
        for (i, _), enc in zip(group, self._encode([s for _, s in group], add_special_tokens=False)):
            parts[i].append(np.asarray(enc.ids, dtype=np.int32))
