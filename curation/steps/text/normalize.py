"""Unicode normalisation: ftfy's fixes for mojibake and broken encodings, then NFC."""
from __future__ import annotations

import unicodedata

from curation.core.record import Drop, Record
from curation.steps.base import Step


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
            self._fix = lambda t: _ftfy.fix_text(t, config=cfg)

    def process(self, record: Record) -> Record | Drop:
        text = record.text
        if self._fix is not None:
            text = self._fix(text)
        if self.nfc:
            text = unicodedata.normalize("NFC", text)
        if not text or text.isspace():   # (not `text.strip()`: a copy of a text that may be 30 MB)
            return Drop("empty_after_normalize")
        record.text = text
        return record
