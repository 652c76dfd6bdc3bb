"""Ledger rows for report tests, built in memory with the ledger's own schema (no run needed): a
Soofi-like mixture of many sources in seven categories over three stages, with a long tail of
language-ID drops, quarantined records, a zero-epoch source and a source admitting unknown licences."""
from __future__ import annotations

import hashlib

from curation.ledger.environment import LIBRARIES
from curation.ledger.schema import SCHEMAS
from curation.steps.compliance.licences import UNKNOWN_ADMITTED

CATEGORIES = ("English Web", "Academic & Wiki", "Code", "Mathematics", "SFT", "Reasoning", "German")
STEPS = ("read", "licence", "normalize", "length", "language", "gopher_quality", "near_dedup", "tokenize")
LANGUAGES = ("es", "fr", "it", "nl", "pl", "pt", "ru", "sv", "cs", "da", "fi", "hu", "ja", "ko", "zh", "tr")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def soofi_like(n_sources: int = 24, run: str = "f00dfeedc0ffee00") -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {name: [] for name in SCHEMAS}
    rows["runs"].append({"run": run, "recipe": "soofi-like", "vocabulary": "curate-demo-v1",
                         "vocabulary_sha256": _sha("vocab"), "curate_version": "0.1.0",
                         "stages": "phase1, phase2, long-context", "started_at": "2026-03-24T09:15:02Z",
                         "finished_at": "2026-03-24T11:02:40Z", "host": "node-1",
                         **{c: "1.0" for c in LIBRARIES}, "fasttext_version": "fasttext-numpy2-wheel 0.9.2; "
                                                                             "fasttext-predict 0.9.2.4"})
    rows["stages"] = [{"run": run, "stage": s, "seq_length": 4096, "budget_tokens": b}
                      for s, b in (("phase1", 23_051_000), ("phase2", 6_303_000), ("long-context", 188_000))]
    for i in range(n_sources):
        name, cat = f"src_{i:02d}_{'de' if i % 7 == 6 else 'en'}", CATEGORIES[i % len(CATEGORIES)]
        tokens = 40_000 + 97_000 * ((i * 37) % 23)
        decision = f"included; {UNKNOWN_ADMITTED}" if i == 3 else "included"
        rows["sources"].append({"run": run, "source": name, "source_fingerprint": _sha(name)[:16], "modality": "text",
                                "category": cat, "revision": "a" * 40 if i == 0 else None, "licence": "CC-BY-4.0",
                                "licence_class": "permissive", "weight": 1.0, "included": True,
                                "excluded_reason": None, "input_files": 2, "input_bytes": 1000,
                                "licence_decision": decision, "optout_mode": "none", "pii": "none",
                                "acquired": "urls" if i == 1 else None,
                                "fetched_sha256": _sha("fetched") if i == 1 else None})
        rows["inputs"] += [{"run": run, "source": name, "shard": f"{k:05d}", "path": f"{name}/part-{k}.jsonl",
                            "bytes": 500, "sha256": _sha(f"{name}{k}")} for k in range(2)]
        n = 1000 + 10 * i
        left = n
        for pos, step in enumerate(STEPS):
            lost = {"length": 40 + i, "language": 120 if i % 3 == 0 else 2, "gopher_quality": 30,
                    "near_dedup": 5 + i % 4}.get(step, 0)
            quarantined = 3 if step == "read" and i % 5 == 0 else 0
            rows["steps"].append({"run": run, "source": name, "position": pos, "step": step, "records_in": left,
                                  "records_out": left - lost - quarantined, "dropped": lost,
                                  "quarantined": quarantined, "seconds": 0.5})
            if step == "language" and lost > 2:
                per = [lost - 3 * (len(LANGUAGES) - 1)] + [3] * (len(LANGUAGES) - 1)
                rows["drops"] += [{"run": run, "source": name, "step": step, "reason": f"language_{lang}", "records": k}
                                  for lang, k in zip(LANGUAGES, per)]
            elif lost:
                rows["drops"].append({"run": run, "source": name, "step": step, "records": lost,
                                      "reason": {"length": "too_few_words", "language": "language_low_score",
                                                 "gopher_quality": "gopher_below_alpha_threshold",
                                                 "near_dedup": "near_duplicate"}[step]})
            if quarantined:
                rows["quarantine"].append({"run": run, "source": name, "step": step, "reason": "bad_json",
                                           "records": quarantined})
            left -= lost + quarantined
        rows["tokens"].append({"run": run, "source": name, "pool": "main", "documents": left, "text_tokens": tokens,
                               "image_tokens": 0, "audio_tokens": 0, "total_tokens": tokens})
        for st in (s["stage"] for s in rows["stages"]):
            epochs = 0.0 if (st == "phase2" and i % 4 == 1) or (st == "long-context" and cat != "SFT" and i % 2) \
                else 1.0 + (i % 3)
            rows["mixture"].append({"run": run, "stage": st, "source": name, "category": cat, "raw_tokens": tokens,
                                    "documents": left, "epochs": epochs, "effective_tokens": int(tokens * epochs),
                                    "share": 0.0, "target_share": None, "max_epochs": 4.0,
                                    "exhausted_at_tokens": None, "excluded": "0 epochs" if not epochs else None})
    rows["clusters"].append({"run": run, "cluster": "src_00_en/d1", "kept_source": "src_00_en", "kept_id": "d1",
                             "size": 2, "members": ["src_00_en/d1", "src_07_en/d9"],
                             "sources": ["src_00_en", "src_07_en"]})
    for st in rows["stages"]:
        mix = [m for m in rows["mixture"] if m["stage"] == st["stage"]]
        total = sum(m["effective_tokens"] for m in mix) or 1
        for m in mix:
            m["share"] = m["effective_tokens"] / total
    return rows
