"""The review export of flagged samples: `<out>/review/decontamination.parquet` and an HTML page that
shows each flagged sample next to the benchmark item it matched, with the shared n-grams highlighted
(in normalised form: lower case, punctuation folded, as they were matched). A reviewer who finds a
false positive lists it as `source/id` in `decontamination.false_positives`; the next run keeps it."""
from __future__ import annotations

import html
import os
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.atomic import atomic_write_bytes
from curation.core.layout import decont_dir
from curation.corpus.decont.index import overlap_words
from curation.corpus.decont.match import decont_text_batches
from curation.steps.text.minhash import Shingler

_CAP = 400  # flagged samples shown in the page (all are in the Parquet file)


def _highlight(words: list[str], marks: list[bool]) -> str:
    out, run, on = [], [], False
    for w, m in zip(words, marks):
        if m != on and run:
            text = html.escape(" ".join(run))
            out.append(f"<mark>{text}</mark>" if on else text)
            run = []
        on = m
        run.append(w)
    if run:
        text = html.escape(" ".join(run))
        out.append(f"<mark>{text}</mark>" if on else text)
    return " ".join(out)


REVIEW_SCHEMA = pa.schema(
    [("source", pa.string()), ("shard", pa.string()), ("id", pa.string()), ("benchmark", pa.string()),
     ("item", pa.int64()), ("item_id", pa.string()), ("overlap", pa.int64()), ("item_ngrams", pa.int64()),
     ("ratio", pa.float64()), ("status", pa.string()), ("text", pa.string()), ("item_text", pa.string())])


def _page_order(r: dict) -> tuple:
    return (-r["ratio"], r["source"], r["id"])


def write_review(out: Path, shard_flags: Iterable[tuple[str, str, list[dict]]], n: int,
                 modalities: dict[str, str] | None = None) -> Path:
    """`shard_flags`: (source, shard, its flags with `status`) per shard, in canonical order; `modalities`:
    source -> modality, for the text each sample was matched on (`decont_text_batches`). Streams: the
    Parquet file gets one row group per shard with flags, and only the `_CAP` samples the page shows are
    held (texts are read from the processed shard in batches, keeping the flagged ones)."""
    item_table = pq.read_table(decont_dir(out) / "items.parquet", columns=["text", "phash"])
    items, phashes = item_table.column("text").to_pylist(), item_table.column("phash").to_pylist()
    folder = out / "review"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "decontamination.parquet"
    tmp = target.with_name(target.name + ".tmp")
    writer = pq.ParquetWriter(tmp, REVIEW_SCHEMA)
    shown, total = [], 0
    try:
        for source, shard, flags in shard_flags:
            if not flags:
                continue
            wanted, texts = {f["id"] for f in flags}, {}
            for ids, batch in decont_text_batches(out, source, shard, (modalities or {}).get(source, "text")):
                texts.update((rid, t) for rid, t in zip(ids, batch) if rid in wanted)
            rows = [f | {"text": texts[f["id"]], "item_text": items[f["item"]]} for f in flags]
            writer.write_table(pa.Table.from_pylist(rows, schema=REVIEW_SCHEMA))
            total += len(rows)
            shown = sorted(shown + rows, key=_page_order)[:_CAP]   # stable: ties keep canonical order
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
    writer.close()
    os.replace(tmp, target)
    shingler = Shingler(n)
    cards = []
    for r in shown:
        if phashes[r["item"]] is not None:  # an image match: there are no n-grams to highlight
            cards.append(
                f"<section class='{r['status']}'><h2>{html.escape(r['source'])}/{html.escape(r['id'])} · "
                f"{html.escape(r['benchmark'])} image {html.escape(r['item_id'])} · pHash distance "
                f"{r['overlap']} of 64 bits · {r['status']}</h2><p>caption: {html.escape(r['text'][:500]) or '—'}"
                f"</p></section>")
            continue
        doc_words, item_words = shingler.words(r["text"]), shingler.words(r["item_text"])
        doc_marks = overlap_words(doc_words, set(shingler(r["text"]).tolist()) & set(shingler(r["item_text"]).tolist()), n)
        item_marks = overlap_words(item_words, set(shingler(r["text"]).tolist()), n)
        cards.append(
            f"<section class='{r['status']}'><h2>{html.escape(r['source'])}/{html.escape(r['id'])} · "
            f"{html.escape(r['benchmark'])} item {html.escape(r['item_id'])} · {100 * r['ratio']:.0f}% of the item's "
            f"{r['item_ngrams']} {n}-grams · {r['status']}</h2><div class='pair'><div><h3>training sample</h3>"
            f"<p>{_highlight(doc_words, doc_marks)}</p></div><div><h3>benchmark item</h3>"
            f"<p>{_highlight(item_words, item_marks)}</p></div></div></section>")
    page = folder / "decontamination.html"
    atomic_write_bytes(page, (
        "<!doctype html><meta charset='utf-8'><title>Decontamination review</title><style>"
        "body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;color:#222}"
        ".pair{display:grid;grid-template-columns:1fr 1fr;gap:1.5em}.pair p{font-size:13px;line-height:1.5;"
        "max-height:22em;overflow:auto;background:#fafafa;padding:.6em}mark{background:#ffd54f}"
        "section{border-top:1px solid #ddd;padding-top:.5em}section.readmitted h2{color:#2e7d32}"
        "h2{font-size:15px}h3{font-size:13px;margin:.2em 0}</style>"
        f"<h1>Decontamination review</h1><p>{total} flagged sample(s); highest overlap first"
        f"{f', the first {_CAP} shown' if total > _CAP else ''}. Highlighted: the {n}-grams the sample and "
        "the item share (normalised text). To keep a false positive, add <code>source/id</code> to "
        "<code>decontamination.false_positives</code> in the recipe.</p>" + "".join(cards)).encode())
    return page
