"""Image samples from WebDataset tars or Parquet rows, and the image checks of the process phase.

A WebDataset shard is a tar whose consecutive members sharing a key (`dir/key.jpg`, `dir/key.txt`,
`dir/key.json`) form one sample: one image member, optionally a caption (`.txt`, or the `caption`
field of `.json`, whose other fields become metadata such as the page `url`). The read step's unit
is a sample; a sample without an image member, a caption that is not UTF-8, or the rest of a
truncated tar are quarantined with a reason, as is a repeated sample key. A link member (symlink or
hard link) is read only when it names an earlier file member of the same tar, whose bytes it then
stands for (GNU tar stores the second name of a hard-linked file that way); a sample with any other
link member is quarantined as `link_outside_input`: its bytes would come from outside the tar.
"""
from __future__ import annotations

import json
import posixpath
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pyarrow as pa

from curation.core.extras import require
from curation.core.media import IMAGE_EXTS, key_of
from curation.core.record import Drop, Record
from curation.errors import RecordError
from curation.steps.base import Reader, Reject, Step
from curation.steps.image.captions import CAPTION_REASONS, caption_problem, caption_problems
from curation.steps.image.recaption import load_recaptions


def _link_target(m: tarfile.TarInfo) -> str:
    """The member name a link member points at: hard links name it from the archive root, symlinks
    relative to their own folder; an absolute or `..`-escaping target names no member."""
    if m.linkname.startswith("/"):
        return ""
    base = "" if m.islnk() else posixpath.dirname(m.name)
    target = posixpath.normpath(posixpath.join(base, m.linkname))
    return "" if target == ".." or target.startswith("../") else target


class WebDatasetReader(Reader):
    def __init__(self, path: Path, *, metadata_fields: list[str], shard_label: str, **kw):
        super().__init__(path, shard_label=shard_label, **kw)
        self.metadata_fields = metadata_fields

    def _samples(self) -> Iterator[tuple[str, dict[str, bytes]] | Reject]:
        key, members, links = None, {}, []
        regular: dict[str, tarfile.TarInfo] = {}   # earlier file members, by normalised name
        try:
            with tarfile.open(self.path, "r:*") as tar:
                for m in tar:
                    if not (m.isfile() or m.issym() or m.islnk()):
                        continue                    # folders; devices and fifos carry no sample data
                    k = key_of(m.name)
                    if k != key and (members or links):
                        yield self._sample(key, members, links)
                        members, links = {}, []
                    key = k
                    ext = m.name[len(k):].lstrip(".").lower()
                    if m.isfile():
                        regular[posixpath.normpath(m.name)] = m
                        members[ext] = tar.extractfile(m).read()
                        continue
                    target = _link_target(m)
                    if target in regular:           # a link to an earlier member: its bytes, from this tar
                        members[ext] = tar.extractfile(regular[target]).read()
                    else:
                        links.append(f"{m.name} -> {m.linkname}")
        except (tarfile.TarError, EOFError, OSError) as e:
            yield Reject(f"{self.shard_label}:{key or 0}", "truncated_tar",
                         f"{self.path}: the archive breaks after sample {key!r} ({e}); re-fetch it")
            return
        if members or links:
            yield self._sample(key, members, links)

    def _sample(self, key: str, members: dict[str, bytes], links: list[str]) -> tuple[str, dict[str, bytes]] | Reject:
        if links:
            return Reject(f"{self.shard_label}:{key}", "link_outside_input",
                          f"{self.path}: sample {key!r} has link members pointing outside the tar ({', '.join(links)}); "
                          f"links are read only when they name an earlier file member")
        return key, members

    def parse(self) -> Iterator[Record | Reject]:
        for item in self._samples():
            if isinstance(item, Reject):
                yield item
                continue
            key, members = item
            loc = f"{self.shard_label}:{key}"
            image = next((members[e] for e in sorted(members) if f".{e}" in IMAGE_EXTS), None)
            if image is None:
                yield Reject(loc, "no_image", f"{self.path}: sample {key!r} has no image member ({sorted(members)})")
                continue
            meta, caption = {}, ""
            try:
                if "json" in members:
                    obj = json.loads(members["json"].decode("utf-8"))
                    if isinstance(obj, dict):
                        caption = obj.get("caption") if isinstance(obj.get("caption"), str) else ""
                        meta = {k: obj[k] for k in self.metadata_fields if k in obj}
                if "txt" in members:
                    caption = members["txt"].decode("utf-8").strip()
                # a JSON escape of a lone surrogate ("\ud800") decodes, but is no text a shard can hold
                json.dumps([caption, meta], ensure_ascii=False).encode("utf-8")
            except (UnicodeError, json.JSONDecodeError) as e:
                yield Reject(loc, "bad_caption_encoding", f"{self.path}: sample {key!r}: {e}")
                continue
            yield Record(id=key, source=self.source, text=caption, meta=meta, payload={"image": image})


class ParquetImageReader(Reader):
    """Image samples from Parquet rows (a Hugging Face dataset snapshot): `image_field` holds the encoded
    bytes or a `{bytes, path}` struct, `caption_field` the caption when the column exists. A row without
    image bytes is quarantined; an unreadable file is one `corrupt_file` unit."""

    def __init__(self, path: Path, *, image_field: str, caption_field: str, id_field: str | None,
                 metadata_fields: list[str], shard_label: str, **kw):
        super().__init__(path, shard_label=shard_label, **kw)
        self.image_field, self.caption_field = image_field, caption_field
        self.id_field, self.metadata_fields = id_field, metadata_fields

    def parse(self) -> Iterator[Record | Reject]:
        import pyarrow as pa
        import pyarrow.parquet as pq
        row = 0
        try:
            for batch in pq.ParquetFile(self.path).iter_batches(batch_size=256):
                for obj in batch.to_pylist():
                    row += 1
                    loc = f"{self.shard_label}:{row}"
                    value = obj.get(self.image_field)
                    image = value.get("bytes") if isinstance(value, dict) else value
                    if not isinstance(image, (bytes, bytearray)) or not image:
                        yield Reject(loc, "no_image", f"{self.path} row {row}: no bytes in {self.image_field!r}")
                        continue
                    rid = str(obj[self.id_field]) if self.id_field and obj.get(self.id_field) is not None else loc
                    caption = obj.get(self.caption_field)
                    yield Record(id=rid, source=self.source, text=caption if isinstance(caption, str) else "",
                                 meta={k: obj[k] for k in self.metadata_fields if k in obj}, payload={"image": bytes(image)})
        except (pa.ArrowException, OSError) as e:
            yield Reject(f"{self.shard_label}:{row + 1}", "corrupt_file",
                         f"{self.path}: unreadable after row {row} ({e}); re-fetch the file")


class ImageCheck(Step):
    """Decode and validate the image (reasons from `curation.steps.image.decode`), enforce the minimum side,
    check the caption of paired samples (quarantined with the problem as reason), and record the
    image's size, domain, 64-bit pHash and the pHash's input size (`phash_reduce`: the source's setting,
    else the domain's) in the metadata for dedup and decontamination.

    With `recaptions` (the source's `images.recaptions` file), a listed sample's caption is replaced
    by its regenerated one before the check (`curation.steps.image.recaption`); the step's notes count
    `captioned`, `caption_regenerated` and `caption_regenerated_flagged`, the ledger table `captions`
    shows them per source."""
    name = "image_check"

    def __init__(self, *, min_side: int, domain: str, phash_reduce: int | None = None,
                 recaptions: str | None = None, recaptions_sha256: str | None = None, **kw):
        super().__init__(**kw)
        require("images", "image sources")
        # Pillow and imagehash load here, not when the module is imported: text-only runs import this module
        from curation.steps.image.decode import decode
        from curation.steps.image.phash import domain_phash, domain_reduce
        self._decode, self._phash = decode, domain_phash
        self.min_side, self.domain, self.phash_reduce = min_side, domain, domain_reduce(domain, phash_reduce)
        self.recaptions = load_recaptions(recaptions, recaptions_sha256, self.source) if recaptions else {}

    def _caption(self, record: Record) -> None:
        """Replace a regenerated caption, then check the caption (RecordError: quarantined by the base)."""
        notes = self.stats.notes
        new = self.recaptions.get(record.id)
        if new is not None:
            notes["caption_regenerated"] += 1
            replaced = caption_problems(record.text) if record.text else []
            record.meta.update({"caption_regenerated": True, **({"caption_flagged": replaced} if replaced else {})})
            record.text = new
        elif not record.text:
            return                                  # an unpaired image: no caption to check
        notes["captioned"] += 1
        if problem := caption_problem(record.text):
            if new is not None:
                notes["caption_regenerated_flagged"] += 1
            raise RecordError(problem, ("regenerated caption " if new is not None else "") + repr(record.text[:200]))

    def process(self, record: Record) -> Record | Drop:
        img = self._decode(record.payload["image"])  # RecordError -> quarantined by the base class with its reason
        if min(img.size) < self.min_side:
            return Drop("image_too_small")
        self._caption(record)
        record.meta.update({"width": img.width, "height": img.height, "domain": self.domain,
                            "phash": self._phash(img, self.domain, self.phash_reduce),
                            "phash_reduce": self.phash_reduce})
        return record

    # the ledger table this step contributes (`curation.ledger.rows` asks `LEDGER_STEPS`)
    ledger_tables: ClassVar[dict[str, pa.Schema]] = {"captions": pa.schema([
        ("run", pa.string()), ("source", pa.string()), ("checked", pa.int64()), ("flagged", pa.int64()),
        ("regenerated", pa.int64()), ("regenerated_kept", pa.int64()), ("regenerated_flagged", pa.int64())])}

    @staticmethod
    def ledger_rows(run: str, source: str, stats) -> dict[str, list[dict]]:
        """Captions checked (regenerations included), quarantined by a caption check, replaced by a
        regenerated caption, and of those kept or quarantined again."""
        n = stats.notes
        regenerated, again = int(n["caption_regenerated"]), int(n["caption_regenerated_flagged"])
        return {"captions": [{"run": run, "source": source, "checked": int(n["captioned"]),
                              "flagged": sum(stats.quarantined[r] for r in CAPTION_REASONS),
                              "regenerated": regenerated, "regenerated_kept": regenerated - again,
                              "regenerated_flagged": again}]}
