"""Normalized rank-choice accuracy of a proxy model on a held-out multiple-choice set (Soofi S Appendix C;
the lm-eval-harness convention for base models, which Soofi's proxy runs were evaluated with):

- the context is the set's template filled with the item's question (`Question: ...\nAnswer:`), the
  continuation of choice c is `" " + c` (lm-eval's default `target_delimiter`);
- a choice's score is the summed log-likelihood of its continuation tokens given the context, the
  context tokenized alone and the continuation as what `encode(context + continuation)` adds to it
  (lm-eval's split); the sequence starts with the end-of-document token, as every document of a
  packed training stream follows one;
- `acc` picks the highest summed log-likelihood; `acc_norm` (the ranking signal) the highest
  log-likelihood divided by the character length of the choice text, exactly lm-eval's definition:
  `completion_len = np.array([float(len(i)) for i in choices])`, `pred_norm = np.argmax(lls /
  completion_len)` in `ConfigurableTask.process_results` (`lm_eval/api/task.py`), where `choices` are
  the answer strings without the delimiter and `len` counts code points. `normalize: bytes` divides by
  the choice's UTF-8 bytes instead: not an lm-eval metric, offered for scripts where characters and
  bytes part ways; a recipe that wants Soofi's criterion keeps the default `chars`;
- a tie goes to the first choice (numpy's argmax, as in lm-eval).
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from curation.errors import RecipeError


@dataclass(frozen=True)
class Item:
    id: str
    question: str
    choices: tuple[str, ...]
    answer: int


def _item(row: dict, fmt: str, where: str) -> Item:
    try:
        if fmt == "arc":
            labels, texts = row["choices"]["label"], row["choices"]["text"]
            if row["answerKey"] not in labels:
                raise ValueError(f"answerKey {row['answerKey']!r} is not one of the labels {labels}")
            answer, choices, ident = labels.index(row["answerKey"]), texts, row["id"]
        else:
            choices, answer = row["choices"], row["answer"]
            ident = row.get("id") or f"{row.get('subject', 'item')}-{row.get('idx', where.rpartition(':')[2])}"
        if not isinstance(answer, int) or not 0 <= answer < len(choices) or len(choices) < 2:
            raise ValueError(f"answer {answer!r} is not an index into {len(choices)} choices (at least 2)")
        if not all(isinstance(c, str) and c for c in choices) or not isinstance(row["question"], str):
            raise ValueError("question and every choice must be non-empty strings")
        return Item(str(ident), row["question"], tuple(choices), answer)
    except (KeyError, TypeError, ValueError) as e:
        raise RecipeError(f"{where}: not a {fmt!r} multiple-choice row ({type(e).__name__}: {e})") from None


def load_choice_set(cs, base: Path) -> list[Item]:
    """The items of one `ablation.choice_sets` entry (`path` relative to the recipe's folder `base`)."""
    path = (base / cs.path) if not Path(cs.path).is_absolute() else Path(cs.path)
    if not path.is_file():
        raise RecipeError(f"ablation choice set {cs.name!r}: {path} does not exist (build the demo sets with "
                          f"`python recipes/demo/build_choice_sets.py`)")
    opener = gzip.open if path.name.endswith(".gz") else open
    items = []
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise RecipeError(f"{path}:{n}: not JSON ({e})") from None
            items.append(_item(row, cs.format, f"{path}:{n}"))
            if cs.limit and len(items) == cs.limit:
                break
    if not items:
        raise RecipeError(f"ablation choice set {cs.name!r}: {path} holds no items")
    return items


def pick(logliks: list[float], choices: tuple[str, ...] | list[str], normalize: str | None) -> int:
    """The chosen index: the highest log-likelihood, per character or byte of the choice when normalized."""
    ll = np.asarray(logliks, dtype=np.float64)
    if normalize == "chars":
        ll = ll / np.asarray([len(c) for c in choices], dtype=np.float64)
    elif normalize == "bytes":
        ll = ll / np.asarray([len(c.encode("utf-8")) for c in choices], dtype=np.float64)
    elif normalize is not None:
        raise ValueError(f"normalize must be chars, bytes or None, got {normalize!r}")
    return int(np.argmax(ll))


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False).ids


@torch.no_grad()
def continuation_logliks(trainer, tokenizer, context: str, continuations: list[str]) -> list[float]:
    """Summed log-likelihood (nats) of each continuation after `context`, by the trainer's model.

    The choices of one item run as one batch, right-padded: the model is causal, so the padding after a
    row changes none of its real positions (it is also its own document, as in a packed batch). The
    output head runs on the continuation positions only, the one place a choice's score is read from."""
    eod = trainer.manifest["vocabulary"]["eod"]
    ctx = [eod] + _encode(tokenizer, context)
    width = trainer.cfg.seq_length
    rows, spans = [], []
    for cont in continuations:
        whole = [eod] + _encode(tokenizer, context + cont)
        n_cont = len(whole) - len(ctx)
        if n_cont < 1:
            raise RecipeError(f"continuation {cont!r} adds no token to its context")
        if n_cont > width:
            raise RecipeError(f"continuation {cont[:40]!r} is {n_cont} tokens, longer than the proxy's window "
                              f"({width}, ablation.seq_length); shorten the choice or raise seq_length")
        rows.append(whole[-(width + 1):])     # left-truncated to the model's window, as lm-eval does
        spans.append(n_cont)
    T = max(len(r) for r in rows) - 1
    inputs = torch.full((len(rows), T), eod, dtype=torch.int64)
    labels = torch.full((len(rows), T), eod, dtype=torch.int64)
    docs = torch.ones((len(rows), T), dtype=torch.int64)     # padding: document 1, after the row's own
    for i, r in enumerate(rows):
        inputs[i, :len(r) - 1] = torch.tensor(r[:-1])
        labels[i, :len(r) - 1] = torch.tensor(r[1:])
        docs[i, :len(r) - 1] = 0
    h, _ = trainer.model.hidden(inputs, docs)
    out = []
    for i, (r, n_cont) in enumerate(zip(rows, spans)):
        at = slice(len(r) - 1 - n_cont, len(r) - 1)            # positions predicting the continuation
        head = trainer.lut[labels[i, at]]
        if (head < 0).any():
            raise RecipeError(f"continuation {continuations[i]!r} holds a token the model's output head does "
                              f"not predict")
        logp = F.log_softmax(trainer.model.head(h[i, at]).float(), dim=-1)
        out.append(float(logp[torch.arange(n_cont), head].sum()))
    return out


def choice_accuracy(trainer, tokenizer, items: list[Item], template: str, normalize: str) -> dict:
    """`acc`, `acc_norm` (the ranking signal) and the item count of one set."""
    was_training = trainer.model.training
    trainer.model.eval()
    right = right_norm = 0
    for it in items:
        ll = continuation_logliks(trainer, tokenizer, template.format(question=it.question),
                                  [" " + c for c in it.choices])
        right += pick(ll, it.choices, None) == it.answer
        right_norm += pick(ll, it.choices, normalize) == it.answer
    if was_training:
        trainer.model.train()
    return {"acc": right / len(items), "acc_norm": right_norm / len(items), "items": len(items),
            "normalize": normalize}
