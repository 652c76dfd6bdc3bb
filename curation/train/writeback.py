"""Write what a training run consumed back into the ledger of the run that produced its manifest.

One row per (training run, source): tokens fed to the model by modality, tokens of repeated
documents, documents seen, and the stage's planned tokens beside them, so `curate report` can
show planned vs consumed. Rows of the same training run are replaced (a resumed run updates its
own rows); other tables are rewritten unchanged, so the manifest's table digests still hold.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from curation.ledger.store import read_rows, write_ledger


def previous_consumed(ledger_dir: Path) -> list[dict]:
    path = ledger_dir / "consumed.parquet"
    return pq.read_table(path).to_pylist() if path.is_file() else []


def consumed_rows(manifest: dict, training: str, steps: int, consumed, planned: dict[str, int]) -> list[dict]:
    rows = []
    for name in sorted(planned):
        by = {m: n for (s, m), n in consumed.tokens.items() if s == name}
        text, image, audio = by.get("text", 0), by.get("image", 0), by.get("audio", 0)
        total = sum(by.values())
        rows.append({"run": manifest["recipe_fingerprint"], "stage": manifest["stage"], "source": name,
                     "training": training, "steps": steps, "text_tokens": text, "image_tokens": image,
                     "audio_tokens": audio, "other_tokens": total - text - image - audio, "total_tokens": total,
                     "repeat_tokens": consumed.repeat_tokens.get(name, 0),
                     "documents": consumed.documents.get(name, 0), "planned_tokens": planned[name]})
    return rows


def write_back(ledger_dir: Path, training: str, rows: list[dict]) -> None:
    tables = read_rows(ledger_dir)
    tables["consumed"] = [r for r in tables["consumed"] if r["training"] != training] + rows
    write_ledger(tables, ledger_dir)
