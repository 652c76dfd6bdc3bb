"""The image check of interleaved documents: every image validated like an image sample's.

Each image is decoded and validated (`curation.steps.image.decode`: `empty_image`, `corrupt_image`,
`truncated_image`, `decompression_bomb`; CMYK, palette, 16-bit, alpha and EXIF-rotated images are
normalised for hashing), held against `images.min_side` (`image_too_small`), and gets its size and the
64-bit pHash of the source's domain (`curation.steps.image.phash.domain_phash`, with the reduction used)
for dedup and decontamination; images the reader could not get arrive with their `problem`.

What a bad image does is the source's `interleaved.on_bad_image`:
- `drop_image` (default): the image leaves the document (bytes, metadata and its place in the layout)
  and is counted in the document's `meta["image_drops"]` by reason; the document stays. A web page
  keeps its text when one of its images is broken, as OBELICS and MINT-1T keep pages whose images
  failed to download.
- `drop_document`: the document goes with the image's reason (quarantined for unreadable images,
  dropped as `image_too_small`), as an image sample would.
Either way a document left with fewer than `interleaved.min_images` images is dropped (`too_few_images`),
its detail naming each image it lost and why (`image 0 (img/a.png): missing_image`).

A document this step drops or quarantines never reaches the tokenizer, whose notes feed the ledger's
`interleaved` table, so its images are noted here: each removed image by its own reason
(`images_dropped_with_document:<reason>`), the usable images that go with it as `too_few_images` or as
the reason of the image that took the document, and the images it listed (`images_listed_with_document`).

The step's notes count images in, kept and dropped by reason (`images_dropped:<reason>`), and the
documents it checks conserve their images (`curation.steps.interleaved.document.check_images`).
"""
from __future__ import annotations

from curation.core.record import Drop, Record
from curation.errors import RecordError
from curation.steps.base import Step
from curation.steps.image.decode import decode
from curation.steps.image.phash import domain_phash, domain_reduce
from curation.steps.interleaved.document import check_images, remove_images

WITH_DOCUMENT = "images_dropped_with_document:"
LISTED_WITH_DOCUMENT = "images_listed_with_document"


class InterleavedCheck(Step):
    name = "image_check"

    def __init__(self, *, min_side: int, domain: str, phash_reduce: int | None = None, min_images: int = 1,
                 on_bad_image: str = "drop_image", **kw):
        super().__init__(**kw)
        self.min_side, self.domain, self.phash_reduce = min_side, domain, domain_reduce(domain, phash_reduce)
        self.min_images, self.whole = min_images, on_bad_image == "drop_document"

    def _check(self, data: bytes | None, info: dict) -> tuple[str | None, str]:
        """(reason the image is unusable or None, detail); a usable image's metadata is filled in."""
        if info.get("problem"):
            return info["problem"], str(info.get("ref"))
        try:
            img = decode(data)
        except RecordError as e:
            return e.reason, e.detail
        if min(img.size) < self.min_side:
            return "image_too_small", f"{img.width}×{img.height} pixels, min_side {self.min_side}"
        info.update(width=img.width, height=img.height, phash=domain_phash(img, self.domain, self.phash_reduce),
                    phash_reduce=self.phash_reduce)
        info.pop("problem", None)
        return None, ""

    def process(self, record: Record) -> Record | Drop:
        notes = self.stats.notes
        images, infos = record.payload.get("media") or [], record.meta["images"]
        notes["images_in"] += len(images)
        drops, why = {}, []
        for j, (data, info) in enumerate(zip(images, infos)):
            reason, detail = self._check(data, info)
            if reason is None:
                continue
            notes[f"images_dropped:{reason}"] += 1
            if self.whole:
                self._with_document(record, reason, {j: reason})
                if reason == "image_too_small":
                    return Drop(reason, f"image {j} ({info.get('ref')}): {detail}")
                raise RecordError(reason, f"image {j} ({info.get('ref')}): {detail}")
            drops[j] = reason
            why.append(f"image {j} ({info.get('ref')}): {reason}")
        remove_images(record, drops)
        record.meta["domain"] = self.domain
        check_images(record)
        notes["images_kept"] += len(record.payload["media"])
        if len(record.payload["media"]) < self.min_images:
            self._with_document(record, "too_few_images")
            listed = record.meta.get("images_listed", len(images))
            return Drop("too_few_images", f"{len(record.payload['media'])} of {listed} image(s) usable, min_images "
                        f"{self.min_images}" + (f"; {'; '.join(why)}" if why else ""))
        return record

    def _with_document(self, record: Record, rest: str, bad: dict[int, str] | None = None) -> None:
        """Note the images of a document dropped whole: those removed (`meta["image_drops"]`, and `bad`, not
        yet removed) by their own reasons, the usable rest as `rest`."""
        notes, bad = self.stats.notes, bad or {}
        counts = dict(record.meta.get("image_drops", {}))
        for reason in bad.values():
            counts[reason] = counts.get(reason, 0) + 1
        usable = len(record.payload.get("media") or []) - len(bad)
        notes[LISTED_WITH_DOCUMENT] += int(record.meta.get("images_listed", usable + sum(counts.values())))
        for reason, n in counts.items():
            notes[WITH_DOCUMENT + reason] += n
        if usable:
            notes[WITH_DOCUMENT + rest] += usable
