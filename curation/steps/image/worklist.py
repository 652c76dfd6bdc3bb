"""The work list of captions to regenerate: `OUT/review/captions_to_regenerate.parquet`, written after
the tasks of a run (`curation.steps.image.recaption` describes the loop).

One row per sample the image check quarantined for a caption problem (the reasons of
`curation.steps.image.captions.CAPTION_REASONS`), read from the run's quarantine files and completed
from the input itself, so nothing is truncated:

    source, shard       the sample's source and input shard (`OUT/quarantine/<source>/<shard>.process.jsonl`)
    id                  its id: what the recaption file's `id` must repeat
    input, position     the input file (as the recipe names it) and the sample's place in it, 1-based:
                        the row of a Parquet file, the sample of a WebDataset tar (whose members are
                        `<id>.*`, the WebDataset key)
    image               the image bytes, as the input holds them
    caption             the caption of the input
    regenerated_caption the caption a recaption file gave it on this run and that failed again (else null)
    reasons             every problem of the caption that was checked (`caption_problems`)

Rows are in recipe source order, then shard, then position. The file is rewritten on every run that
has image sources (an empty table when nothing was flagged), so it always describes the last run.
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from curation.core.atomic import atomic_write_parquet
from curation.core.layout import quarantine_path, review_dir
from curation.core.record import QuarantineSink
from curation.steps.base import Reject
from curation.steps.image.captions import CAPTION_REASONS, caption_problems
from curation.steps.image.declaration import image_settings
from curation.steps.image.modality import IMAGE
from curation.steps.image.recaption import check_file, load_recaptions

WORKLIST = "captions_to_regenerate.parquet"
SCHEMA = pa.schema([("source", pa.string()), ("shard", pa.string()), ("id", pa.string()), ("input", pa.string()),
                    ("position", pa.int64()), ("image", pa.binary()), ("caption", pa.string()),
                    ("regenerated_caption", pa.string()), ("reasons", pa.list_(pa.string()))])


def flagged_ids(out: Path, source: str, shard: str) -> set[str]:
    """Ids the image check of one process task quarantined for a caption problem."""
    path = quarantine_path(out, source, shard, "process")
    if not path.is_file():
        return set()
    ids = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            e = json.loads(line)
            if e["step"] == "image_check" and e["reason"] in CAPTION_REASONS:
                ids.add(e["id"])
    return ids


def _recaptions(loaded, src) -> dict[str, str]:
    name = image_settings(src).recaptions
    if name is None:
        return {}
    path = loaded.resolve(name)
    return load_recaptions(str(path), check_file(path, src.name), src.name)


def worklist_rows(loaded, out: Path) -> list[dict]:
    """The rows of the work list for a loaded recipe (`curation.recipe.LoadedRecipe`) and its run's output."""
    rows = []
    for src in loaded.recipe.sources:
        if src.modality != "image":
            continue
        recaptions = None
        for f in loaded.inputs.get(src.name, []):
            wanted = flagged_ids(out, src.name, f.shard_id)
            if not wanted:
                continue
            recaptions = _recaptions(loaded, src) if recaptions is None else recaptions
            reader = IMAGE.reader(src, f.path, shard_label=f.rel, source=src.name, sink=QuarantineSink())
            for position, item in enumerate(reader.parse(), start=1):
                if isinstance(item, Reject) or item.id not in wanted:
                    continue
                wanted.discard(item.id)   # a repeated id was quarantined by the reader: its first copy is the one
                again = recaptions.get(item.id)
                rows.append({"source": src.name, "shard": f.shard_id, "id": item.id, "input": f.rel,
                             "position": position, "image": item.payload["image"], "caption": item.text,
                             "regenerated_caption": again,
                             "reasons": caption_problems(item.text if again is None else again)})
    return rows


def write_worklist(loaded, out: Path) -> Path | None:
    """Write `OUT/review/captions_to_regenerate.parquet`; None when the recipe has no image source."""
    if not any(s.modality == "image" for s in loaded.recipe.sources):
        return None
    path = review_dir(out) / WORKLIST
    atomic_write_parquet(path, pa.Table.from_pylist(worklist_rows(loaded, out), schema=SCHEMA))
    return path
