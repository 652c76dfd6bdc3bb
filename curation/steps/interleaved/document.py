"""An interleaved image-text document as a record, and the operations every step does on it.

A document read from parallel `texts`/`images` lists (`curation.steps.interleaved.read`) becomes

- `text`: its text segments joined by `JOIN` (a newline, the private-use `SEPARATOR`, a newline), so the
  text steps (normalisation, filters, PII, MinHash, decontamination) see the whole text while the
  segment boundaries survive rewriting (`segments` splits them again);
- `media`: the encoded bytes of its images, in reading order (None for an image that could not be read);
- `meta["layout"]`: the reading order, `[["text", segment], ["image", image], ...]`;
- `meta["images"]`: one object per image: where it came from (`ref`), why the reader could not get it
  (`problem`), and after the image check its `width`, `height`, `phash`, `phash_reduce`;
- `meta["images_listed"]`: the images the input listed; `meta["image_drops"]`: {reason: images removed}.

Every image the input listed is, at every point, either in `media` or counted in `image_drops`
(`check_images`), so images are conserved per document as records are per step.
"""
from __future__ import annotations

from collections.abc import Iterator

from curation.errors import ConservationError, RecordError
from curation.steps.conversation.turns import SEPARATOR
from curation.steps.image.phash import DEFAULT_REDUCE

JOIN = f"\n{SEPARATOR}\n"


def join_texts(texts: list[str]) -> str:
    return JOIN.join(t.replace(SEPARATOR, "") for t in texts)


def segments(text: str, n: int) -> list[str]:
    """The `n` text segments of a document's (possibly rewritten) text; `segments_lost` when a text step
    removed or added a separator."""
    if n == 0:
        if text.strip(SEPARATOR + "\n"):
            raise RecordError("segments_lost", "a document without text segments has text")
        return []
    parts = text.split(SEPARATOR)
    if len(parts) != n:
        raise RecordError("segments_lost", f"the document has {n} text segments, its text {len(parts)}: the "
                          f"segment separators did not survive the text steps")
    out = []
    for i, p in enumerate(parts):   # the newlines of JOIN around each separator are layout, not content
        if i > 0:
            p = p.removeprefix("\n")
        if i < n - 1:
            p = p.removesuffix("\n")
        out.append(p)
    return out


def text_count(meta: dict) -> int:
    return sum(kind == "text" for kind, _ in meta["layout"])


def remove_images(record, drops: dict[int, str]) -> None:
    """Take the images at `drops` (index -> reason) out of the document: bytes, metadata and layout, the
    remaining images renumbered in order; each counted in `meta["image_drops"]` by its reason."""
    if not drops:
        return
    meta = record.meta
    counts = meta.setdefault("image_drops", {})
    for reason in drops.values():
        counts[reason] = counts.get(reason, 0) + 1
    meta["image_drops"] = dict(sorted(counts.items()))
    new = {}
    for old in range(len(meta["images"])):
        if old not in drops:
            new[old] = len(new)
    record.payload["media"] = [b for i, b in enumerate(record.payload["media"]) if i in new]
    meta["images"] = [m for i, m in enumerate(meta["images"]) if i in new]
    meta["layout"] = [[k, new[v] if k == "image" else v] for k, v in meta["layout"] if k != "image" or v in new]


def check_images(record) -> None:
    """Conservation of one document's images: listed = kept + removed (by reason)."""
    meta = record.meta
    kept, removed = len(record.payload.get("media") or []), sum(meta.get("image_drops", {}).values())
    placed = sum(kind == "image" for kind, _ in meta["layout"])
    if meta["images_listed"] != kept + removed or placed != kept or len(meta["images"]) != kept:
        raise ConservationError(f"document {record.id!r}: {meta['images_listed']} image(s) listed, {kept} kept, "
                                f"{removed} removed, {placed} placed in its layout; the counts must add up")


def runs(layout: list, texts: list[str]) -> Iterator[tuple[str, object]]:
    """The document in reading order as ("text", str) and ("image", index) items: consecutive text segments
    (adjacent in the input, or once an image between them was removed) are one run, joined by a blank line."""
    pending: list[str] = []
    for kind, i in layout:
        if kind == "text":
            pending.append(texts[i])
            continue
        if pending:
            yield "text", "\n\n".join(pending)
            pending = []
        yield "image", i
    if pending:
        yield "text", "\n\n".join(pending)


def image_hashes(meta: dict) -> list[tuple[int | None, int, str, int]]:
    """(image index or None, 64-bit pHash, domain, pHash reduction) of every image of a processed record: one
    entry with index None for an image sample, one per image for an interleaved document. Image dedup and
    decontamination compare these (only hashes of equal reduction)."""
    if "phash" in meta:
        return [(None, int(meta["phash"], 16), meta["domain"], int(meta.get("phash_reduce", DEFAULT_REDUCE)))]
    return [(k, int(m["phash"], 16), meta["domain"], int(m["phash_reduce"]))
            for k, m in enumerate(meta.get("images", [])) if "phash" in m]
