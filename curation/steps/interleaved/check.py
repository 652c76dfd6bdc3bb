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
Either way a document left with fewer than `interleaved.min_images` images is dropped (`too_few_images`).

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
        images, infos = record.media or [], record.meta["images"]
        notes["images_in"] += len(images)
        drops = {}
        for j, (data, info) in enumerate(zip(images, infos)):
            reason, detail = self._check(data, info)
            if reason is None:
                continue
            notes[f"images_dropped:{reason}"] += 1
            if self.whole:
                if reason == "image_too_small":
                    return Drop(reason)
                raise RecordError(reason, f"image {j} ({info.get('ref')}): {detail}")
            drops[j] = reason
        remove_images(record, drops)
        record.meta["domain"] = self.domain
        check_images(record)
        notes["images_kept"] += len(record.media)
        if len(record.media) < self.min_images:
            return Drop("too_few_images")
        return record
