"""Text tokenization with HF `tokenizers` into the shared vocabulary (EOD appended)."""
from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from curation.core.record import Record
from curation.core.vocab import Vocabulary
from curation.steps.base import BatchStep
from curation.steps.text.turns import END, MARKERS, split_turns


class TextTokenizer(BatchStep):
    name = "tokenize"

    def __init__(self, vocab: Vocabulary, *, batch_size: int = 256, **kw):
        super().__init__(**kw)
        self.vocab, self.tokenizer = vocab, vocab.tokenizer
        self.eod = vocab.eod_id
        self.batch_size = batch_size
        fast = getattr(self.tokenizer, "encode_batch_fast", None)  # no offsets: faster, same ids
        self._encode = fast or self.tokenizer.encode_batch

    def _turns(self, record: Record) -> np.ndarray:
        """A conversation: per turn its role marker, tokens and end-of-turn (see `curation.steps.text.turns`)."""
        from curation.errors import RecordError
        turns = split_turns(record.text, record.meta["roles"])
        if turns is None:
            raise RecordError("turns_lost", "the turn separators did not survive the text steps")
        try:
            marker = {role: self.vocab.marker(name) for role, name in MARKERS.items()}
            end = self.vocab.marker(END)
        except KeyError as e:
            raise RecordError("no_turn_markers", f"vocabulary {self.vocab.id} has no reserved marker {e}") from None
        parts = []
        for role, enc in zip(record.meta["roles"], self._encode(turns, add_special_tokens=False)):
            parts += [marker[role], *enc.ids, end]
        return np.asarray([*parts, self.eod], dtype=np.int32)

    def _flush(self, batch: list[Record]) -> Iterator[Record]:
        start = time.perf_counter()
        plain = [r for r in batch if "roles" not in r.meta]
        # `Encoding.ids` builds a new Python list on every access: read it once per record
        ids = dict(zip(map(id, plain), (e.ids for e in self._encode([r.text for r in plain],
                                                                      add_special_tokens=False))))
        out = []
        eod = self.eod
        for record in batch:
            if "roles" in record.meta:
                try:
                    record.tokens = self._turns(record)
                except Exception as exc:  # noqa: BLE001 - quarantined with its reason
                    self.fail(record, exc)
                    continue
                out.append(record)
                continue
            seq = ids[id(record)]
            if not seq:
                self.drop(record, "no_text_tokens")
                continue
            tokens = np.empty(len(seq) + 1, dtype=np.int32)
            tokens[:-1] = seq
            tokens[-1] = eod
            record.tokens = tokens
            out.append(record)
        self.stats.records_out += len(out)
        self.stats.seconds += time.perf_counter() - start
        yield from out
