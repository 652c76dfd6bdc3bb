"""Text tokenization with HF `tokenizers` into the shared vocabulary (EOD appended).

Each record writes one sequence to the source's shards; with `reasoning` (SFT data with reasoning
spans, `curation.steps.text.reasoning`) it also writes the copy without them to the
`.no_reasoning` shards, so both hold the same documents in the same order.
"""
from __future__ import annotations

import numpy as np

from curation.core.layout import NO_REASONING
from curation.core.record import Drop, Record
from curation.core.vocab import Vocabulary
from curation.errors import RecordError
from curation.steps.base import BatchStep
from curation.steps.text.reasoning import ReasoningStripper
from curation.steps.text.turns import END, MARKERS, split_turns


class TextTokenizer(BatchStep):
    name = "tokenize"

    def __init__(self, vocab: Vocabulary, *, batch_size: int = 256, reasoning: dict | None = None, **kw):
        super().__init__(**kw)
        self.vocab, self.tokenizer = vocab, vocab.tokenizer
        self.eod = vocab.eod_id
        self.batch_size = batch_size
        fast = getattr(self.tokenizer, "encode_batch_fast", None)  # no offsets: faster, same ids
        self._encode = fast or self.tokenizer.encode_batch
        self.stripper = ReasoningStripper(self.tokenizer, self.eod, **reasoning) if reasoning else None

    def _turns(self, record: Record) -> np.ndarray:
        """A conversation: per turn its role marker, tokens and end-of-turn (see `curation.steps.text.turns`)."""
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

    def _one(self, record: Record, ids: list[int] | None) -> Record | Drop | Exception:
        if ids is None:  # a conversation with roles
            try:
                tokens = self._turns(record)
            except Exception as exc:  # noqa: BLE001 - quarantined with its reason
                return exc
        elif not ids:
            return Drop("no_text_tokens")
        else:
            tokens = np.empty(len(ids) + 1, dtype=np.int32)
            tokens[:-1] = ids
            tokens[-1] = self.eod
        record.shards = {"": [tokens]}
        if self.stripper is not None:
            record.shards[NO_REASONING] = [self.stripper(record.text, tokens)]
        return record

    def handle(self, batch: list[Record]) -> list[Record | Drop | Exception]:
        plain = [r for r in batch if "roles" not in r.meta]
        encodings = dict(zip(map(id, plain), self._encode([r.text for r in plain], add_special_tokens=False)))
        return [self._one(r, encodings[id(r)].ids if id(r) in encodings else None) for r in batch]
