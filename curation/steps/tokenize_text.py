"""Text tokenization with HF `tokenizers` into the shared vocabulary (EOD appended)."""
from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from curation.steps.base import BatchStep, Record
from curation.vocab import Vocabulary


class TextTokenizer(BatchStep):
    name = "tokenize"

    def __init__(self, vocab: Vocabulary, *, batch_size: int = 256, **kw):
        super().__init__(**kw)
        self.tokenizer = vocab.tokenizer
        self.eod = vocab.eod_id
        self.batch_size = batch_size
        fast = getattr(self.tokenizer, "encode_batch_fast", None)  # no offsets: faster, same ids
        self._encode = fast or self.tokenizer.encode_batch

    def _flush(self, batch: list[Record]) -> Iterator[Record]:
        start = time.perf_counter()
        encodings = self._encode([r.text for r in batch], add_special_tokens=False)
        out = []
        for record, enc in zip(batch, encodings):
            if not enc.ids:
                self.drop(record, "no_text_tokens")
                continue
            tokens = np.empty(len(enc.ids) + 1, dtype=np.int32)
            tokens[:-1] = enc.ids
            tokens[-1] = self.eod
            record.tokens = tokens
            out.append(record)
        self.stats.records_out += len(out)
        self.stats.seconds += time.perf_counter() - start
        yield from out
