"""Synthetic verifiable long-context tasks built from one long document (Apertus 1.5 section 3.3).

Each document of a source with `synthetic_tasks:` becomes one training example of one task, injected as
Q&A turns and rendered in the chat template (`curation.steps.conversation.chat`):

- `cwe`, common-word extraction: how often does each of several sampled words occur in the document?
  A word is a maximal run of letters (`str.isalpha`), compared lower-cased. The document is plain text
  before the conversation, so it stays a training target (the paper masks only DocOrder and needles).
- `docorder`, document-order reconstruction: the document is cut into sections at paragraph (else word)
  boundaries, the sections are shuffled and labelled, and the original order of the labels is asked.
  The document is in the user turn, so the loss mask (`curation.train.chat_mask`) leaves it out.
- `needles`, artificial needles: synthetic registry listings (a name and a code each) are planted
  between the document's paragraphs; a question asks for the code of a listed name. The document and its
  listings are in the user turn (masked).

Both buckets quiz each document with a different density: `easy` asks 5 CWE questions, 4 DocOrder
sections, 2 needles; `hard` 10 questions, 8 sections, 4 needles. Each task has 10 question/answer
formats. The task, the bucket, the format and every sample are drawn from a generator seeded by the
recipe's seed and the document id alone, so a run is deterministic whatever the worker count.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np

from curation.errors import RecordError

TASKS = ("cwe", "docorder", "needles")
QUESTIONS = {"easy": {"cwe": 5, "docorder": 4, "needles": 2}, "hard": {"cwe": 10, "docorder": 8, "needles": 4}}
LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_WORD = re.compile(r"[^\W\d_]+")   # letters only: the same runs as str.isalpha() groups

# (question, answer): {word}/{count}; the first CWE turn carries the instruction
CWE_FORMATS = [
    ("How many times does the word \"{word}\" occur in the text above?", "{count}"),
    ("Count the occurrences of \"{word}\" in the document (case-insensitive, whole words).", "\"{word}\" occurs {count} times."),
    ("In the text above, how often is the word '{word}' used?", "{count}"),
    ("Word: {word}. Number of occurrences in the document?", "{word}: {count}"),
    ("Give the frequency of the word «{word}» in the preceding document.", "The word «{word}» appears {count} times."),
    ("How frequent is \"{word}\" in the document? Answer with a number.", "{count}"),
    ("Tell me how many times '{word}' appears above, ignoring case.", "It appears {count} times."),
    ("Occurrences of the word {word}?", "{count} occurrences"),
    ("What is the count of the whole word \"{word}\" in the text?", "Count: {count}"),
    ("Please count the word \"{word}\" in the document above.", "I count {count} occurrences of \"{word}\"."),
]
DOC_FORMATS = [
    ("The sections of a document below are shuffled. Give their original order as labels separated by commas.", "{order}"),
    ("Reorder the labelled sections into the order of the original document.", "The original order is {order}."),
    ("These passages come from one document, out of order. In what order did they appear?", "{order}"),
    ("Sort the sections back into the document's order; list the labels.", "Order: {order}"),
    ("Reconstruct the original sequence of the sections below.", "{order}"),
    ("Which order of the labelled parts restores the document?", "The document reads {order}."),
    ("List the section labels in their original order.", "{order}"),
    ("The following parts were shuffled. Recover the order they had in the source text.", "Original order: {order}"),
    ("Arrange the labelled sections as in the original document.", "{order}"),
    ("Put the sections in the right order (labels only, comma-separated).", "{order}"),
]
NEEDLE_FORMATS = [
    ("What is the access code of {name}?", "{code}"),
    ("According to the registry listings in the document, which code belongs to {name}?", "The code of {name} is {code}."),
    ("Find the listing for {name} and give its code.", "{code}"),
    ("Look up {name} in the listings above. Code?", "{name}: {code}"),
    ("Which number is listed for {name}?", "{code}"),
    ("Retrieve the code registered to {name}.", "It is {code}."),
    ("In the registry entries, what code does {name} have?", "Code {code}"),
    ("Report the registry code for {name}.", "{code}"),
    ("What code is assigned to {name} in the document?", "{name} has code {code}."),
    ("Give me {name}'s code from the listings.", "{code}"),
]
NEEDLE_LISTING = "[Registry listing] {name}: access code {code}."
_FIRST = ("Amara", "Bruno", "Chiara", "Dmitri", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kaito",
          "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tamar", "Ulla", "Viktor")
_LAST = ("Achterberg", "Bianchi", "Castell", "Dubois", "Eriksen", "Fontaine", "Gruber", "Horvat", "Ivanova",
         "Jansen", "Kowalski", "Lindqvist", "Moreau", "Novak", "Ortega", "Petrov", "Quist", "Rossi", "Schmid")


@dataclass
class Task:
    kind: str                   # cwe | docorder | needles
    bucket: str                 # easy | hard
    context: str | None         # plain text before the conversation (a training target), or None
    messages: list[dict]        # user/assistant turns: the questions and their computed answers
    answers: list               # what the answers state: counts, label order, codes


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _rng(seed: int, doc_id: str) -> np.random.Generator:
    return np.random.default_rng(int.from_bytes(hashlib.sha256(f"{seed}:{doc_id}".encode()).digest()[:8], "little"))


def _pick(rng: np.random.Generator, weights: dict[str, float]) -> str:
    kinds = [k for k in TASKS if weights.get(k, 0) > 0]
    p = np.asarray([weights[k] for k in kinds], dtype=np.float64)
    return kinds[int(rng.choice(len(kinds), p=p / p.sum()))]


def cwe(text: str, n: int, rng: np.random.Generator, fmt: int) -> Task:
    ws = words(text)
    vocab = sorted({w for w in ws if len(w) >= 4})
    if len(vocab) < n:
        raise RecordError("too_short_for_task", f"common-word extraction needs {n} distinct words of 4+ letters, "
                          f"the document has {len(vocab)}")
    sampled = [vocab[i] for i in rng.choice(len(vocab), size=n, replace=False)]
    counts = {w: 0 for w in sampled}
    for w in ws:
        if w in counts:
            counts[w] += 1
    q, a = CWE_FORMATS[fmt]
    messages = []
    for i, w in enumerate(sampled):
        lead = "Answer questions about the document above. " if i == 0 else ""
        messages += [{"role": "user", "content": lead + q.format(word=w)},
                     {"role": "assistant", "content": a.format(word=w, count=counts[w])}]
    return Task("cwe", "", text, messages, [counts[w] for w in sampled])


def sections(text: str, n: int) -> list[str]:
    """`text` cut into `n` consecutive non-empty sections at paragraph boundaries where there are enough,
    else at word boundaries; joined with blank lines they hold every word of `text` in order."""
    paras = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    if len(paras) < n:
        paras = text.split()
        if len(paras) < n:
            raise RecordError("too_short_for_task", f"document order needs {n} sections, the document has "
                              f"{len(paras)} words")
        sep = " "
    else:
        sep = "\n\n"
    cuts = np.linspace(0, len(paras), n + 1).round().astype(int)
    return [sep.join(paras[cuts[i]:cuts[i + 1]]) for i in range(n)]


def docorder(text: str, n: int, rng: np.random.Generator, fmt: int) -> Task:
    parts = sections(text, n)
    perm = rng.permutation(n)                 # perm[j]: the original index of the j-th shown section
    shown = [f"[{LABELS[j]}]\n{parts[k]}" for j, k in enumerate(perm)]
    order = [LABELS[int(np.flatnonzero(perm == i)[0])] for i in range(n)]
    q, a = DOC_FORMATS[fmt]
    messages = [{"role": "user", "content": q + "\n\n" + "\n\n".join(shown)},
                {"role": "assistant", "content": a.format(order=", ".join(order))}]
    return Task("docorder", "", None, messages, order)


def needles(text: str, n: int, rng: np.random.Generator, fmt: int, distractors: int = 6) -> Task:
    paras = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()] or [text]
    names = [f"{first} {last}" for first in _FIRST for last in _LAST]
    total = n + distractors
    chosen = [names[i] for i in rng.choice(len(names), size=total, replace=False)]
    codes = [int(c) for c in rng.choice(900_000, size=total, replace=False) + 100_000]
    spots = sorted(int(s) for s in rng.integers(0, len(paras) + 1, size=total))
    body, k = [], 0
    for i in range(len(paras) + 1):
        while k < total and spots[k] == i:
            body.append(NEEDLE_LISTING.format(name=chosen[k], code=codes[k]))
            k += 1
        if i < len(paras):
            body.append(paras[i])
    asked = sorted(int(i) for i in rng.choice(total, size=n, replace=False))
    q, a = NEEDLE_FORMATS[fmt]
    messages = [{"role": "user", "content": "\n\n".join(body) + "\n\n" + q.format(name=chosen[asked[0]])},
                {"role": "assistant", "content": a.format(name=chosen[asked[0]], code=codes[asked[0]])}]
    for i in asked[1:]:
        messages += [{"role": "user", "content": q.format(name=chosen[i])},
                     {"role": "assistant", "content": a.format(name=chosen[i], code=codes[i])}]
    return Task("needles", "", None, messages, [codes[i] for i in asked])


BUILDERS = {"cwe": cwe, "docorder": docorder, "needles": needles}


def make_task(text: str, doc_id: str, *, seed: int, weights: dict[str, float], hard_below_words: int) -> Task:
    """One task for one document: the kind by `weights`, the hard bucket for documents shorter than
    `hard_below_words` words (the paper's hard bucket draws shorter documents), one of 10 formats."""
    rng = _rng(seed, doc_id)
    kind = _pick(rng, weights)
    bucket = "hard" if len(text.split()) < hard_below_words else "easy"
    fmt = int(rng.integers(len(CWE_FORMATS)))
    task = BUILDERS[kind](text, QUESTIONS[bucket][kind], rng, fmt)
    task.bucket = bucket
    return task
