"""Unicode normalisation: ftfy's fixes for mojibake and broken encodings, then NFC."""
from __future__ import annotations

import io
import unicodedata

from curation.core.record import Drop, Record
from curation.steps.base import Step


def fix_text_lines(text: str, config) -> str:
    """`ftfy.fix_text(text, config)`, the same result, without copying a text it does not change.

    ftfy fixes a text line by line (at most `max_decode_length` characters at a time, `unescape_html:
    auto` off from the first segment holding a `<`) and joins every fixed line into a new string: for
    a 30 MB record that is the text, its lines and the join, about four copies, even when nothing
    changes. The same loop here keeps only the lines that changed, returns the text itself when none
    did, and otherwise builds the result once."""
    from ftfy import fix_and_explain
    changed: list[tuple[int, int, str]] = []
    pos, n = 0, len(text)
    while pos < n:
        textbreak = text.find("\n", pos) + 1
        if textbreak == 0:
            textbreak = n
        if textbreak - pos > config.max_decode_length:
            textbreak = pos + config.max_decode_length
        segment = text[pos:textbreak]
        if config.unescape_html == "auto" and "<" in segment:
            config = config._replace(unescape_html=False)
        fixed, _ = fix_and_explain(segment, config)
        if fixed != segment:
            changed.append((pos, textbreak, fixed))
        pos = textbreak
    if not changed:
        return text
    out, prev = io.StringIO(), 0
    for a, b, fixed in changed:
        out.write(text[prev:a])
        out.write(fixed)
        prev = b
    out.write(text[prev:])
    return out.getvalue()


class Normalize(Step):
    name = "normalize"

    def __init__(self, *, nfc: bool = True, ftfy: bool = True, **kw):
        super().__init__(**kw)
        self.nfc = nfc
        self._fix = None
        if ftfy:
            import ftfy as _ftfy
            # NFC is applied below on its own; uncurl_quotes would rewrite legitimate typography.
            cfg = _ftfy.TextFixerConfig(normalization=None, uncurl_quotes=False, explain=False)
            self._fix = lambda t: fix_text_lines(t, cfg)

    def process(self, record: Record) -> Record | Drop:
        if self._fix is not None:
            record.text = self._fix(record.text)   # the read text is released before NFC makes its copy
        text = record.text
        if self.nfc:
            text = unicodedata.normalize("NFC", text)
        if not text or text.isspace():   # (not `text.strip()`: a copy of a text that may be 30 MB)
            return Drop("empty_after_normalize")
        record.text = text
        return record
