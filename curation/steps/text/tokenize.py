"""Text tokenization with HF `tokenizers` into the shared vocabulary (EOD appended); conversations are
rendered in the chat template (`conversation_tokens`).

Each record writes one sequence to the source's shards; with `reasoning` (SFT data with reasoning
spans, `curation.steps.conversation.reasoning`) it also writes the copy without them to the
`.no_reasoning` shards, so both hold the same documents in the same order. With `tasks` (a source's
`synthetic_tasks:`, `curation.steps.text.longtasks`) each plain document is first turned into one task
conversation; a task's plain context (the CWE document) precedes the rendered conversation in the same
sequence, so it stays a training target while the turns are masked as any conversation's.
"""
from __future__ import annotations

import numpy as np

from curation.core.layout import NO_REASONING
from curation.core.record import Drop, Record
from curation.core.vocab import Vocabulary
from curation.errors import RecordError
from curation.recipe.modalities import Conversations
from curation.steps.base import BatchStep
from curation.steps.conversation.chat import ChatMarkers, Rendered, render
from curation.steps.conversation.reasoning import ReasoningStripper
from curation.steps.conversation.turns import SEPARATOR, from_roles, is_conversation, parse_conversation
from curation.steps.text.longtasks import make_task
from curation.steps.text.pieces import PieceEncoder

_TASK_FORM = Conversations(tools_field=None, system_field=None, images_field=None, audios_field=None)


class TextTokenizer(BatchStep):
    name = "tokenize"

    def __init__(self, vocab: Vocabulary, *, batch_size: int = 256, reasoning: dict | None = None,
                 tasks: dict | None = None, **kw):
        super().__init__(**kw)
        self.vocab, self.tokenizer = vocab, vocab.tokenizer
        self.eod = vocab.eod_id
        self.batch_size = batch_size
        fast = getattr(self.tokenizer, "encode_batch_fast", None)  # no offsets: faster, same ids
        self._encode = fast or self.tokenizer.encode_batch
        self.pieces = PieceEncoder(self.tokenizer)   # plain texts: only ids kept, long ones in pieces
        self._chat_markers = None
        self.stripper = ReasoningStripper(self, **reasoning) if reasoning else None
        self.tasks = tasks

    @property
    def chat_markers(self) -> ChatMarkers:
        if self._chat_markers is None:
            self._chat_markers = ChatMarkers.from_vocab(self.vocab)
        return self._chat_markers

    def render_conversation(self, record: Record, *, thinking: bool = True) -> Rendered:
        """A conversation (`meta["chat"]`, or `meta["roles"]` as earlier versions stored it) in the Apertus 1.5
        chat template (`curation.steps.conversation.chat`), with its placeholders' positions; `thinking=False` leaves
        the thinking spans out. `placeholder_mismatch` when the placeholders are not one per media item."""
        chat, text = record.meta.get("chat"), record.text
        if chat is None:
            parsed = from_roles(record.text, record.meta["roles"])
            chat, text = parsed.chat, parsed.text
        rendered = render(chat, text.split(SEPARATOR), self.chat_markers,
                          lambda texts: [e.ids for e in self._encode(texts, add_special_tokens=False)],
                          self.eod, thinking=thinking, special=(self.eod, self.vocab.pad_id))
        media = record.meta.get("media", [])
        if [k for _, k in rendered.placeholders] != [m["kind"] for m in media]:
            raise RecordError("placeholder_mismatch", f"{len(rendered.placeholders)} placeholder(s) "
                              f"{[k for _, k in rendered.placeholders]}, {len(media)} media item(s) "
                              f"{[m['kind'] for m in media]} in the record")
        return rendered

    def conversation_tokens(self, record: Record, *, thinking: bool = True) -> np.ndarray:
        """The rendered conversation's tokens (`render_conversation`). Its media placeholders stay single tokens
        unless the source expands them (`curation.steps.conversation.media_tokenize`)."""
        return self.render_conversation(record, thinking=thinking).tokens

    def _one(self, record: Record, tokens: np.ndarray | None) -> Record | Drop | Exception:
        """`tokens`: the plain text's ids with EOD (empty for a text with none), None for a conversation."""
        if tokens is None:  # a conversation
            try:
                tokens = self.conversation_tokens(record)
            except Exception as exc:  # noqa: BLE001 - quarantined with its reason
                return exc
        elif not len(tokens):
            return Drop("no_text_tokens")
        record.shards = {"": [tokens]}
        if self.stripper is not None:
            record.shards[NO_REASONING] = [self.stripper(record, tokens)]
        return record

    def _task(self, record: Record) -> Record | Exception:
        """`record` as its synthetic task conversation (`meta["chat"]`, `meta["task"]`, and the plain
        `meta["task_context"]` for a CWE task); a document too short for its task is quarantined."""
        try:
            task = make_task(record.text, record.id, seed=self.tasks["seed"], weights=self.tasks["weights"],
                             hard_below_words=self.tasks["hard_below_words"])
            parsed = parse_conversation({"messages": task.messages}, _TASK_FORM)
        except Exception as exc:  # noqa: BLE001 - quarantined with its reason
            return exc
        record.text = parsed.text
        record.meta.update(chat=parsed.chat, task={"kind": task.kind, "bucket": task.bucket})
        if task.context is not None:
            record.meta["task_context"] = task.context
        return record

    def handle(self, batch: list[Record]) -> list[Record | Drop | Exception]:
        if self.tasks:
            converted = [self._task(r) for r in batch]
            done = [self._one(r, None) if isinstance(r, Record) else r for r in converted]
            contexts = [r for r in done if isinstance(r, Record) and "task_context" in r.meta]
            for r, ids in zip(contexts, self.pieces.ids([r.meta.pop("task_context") for r in contexts])):
                r.shards[""] = [np.concatenate([ids.astype(np.int32), r.shards[""][0]])]
            return done
        plain = [r for r in batch if not is_conversation(r)]
        encoded = dict(zip(map(id, plain), self.pieces.ids([r.text for r in plain], end=self.eod)))
        return [self._one(r, encoded.get(id(r))) for r in batch]
