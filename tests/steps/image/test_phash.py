"""One pHash per domain: the domain's reduction unless a source sets one, recorded next to the hash."""
from __future__ import annotations

import io

import numpy as np
from PIL import Image

from curation.core.record import Record
from curation.steps.image.declaration import Images
from curation.steps.image.phash import (
    default_reductions,
    domain_phash,
    domain_reduce,
    phash64,
)
from curation.steps.image.read import ImageCheck


def _scene(seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize((320, 240), Image.BICUBIC)


def test_domain_settings():
    assert domain_reduce("natural") == 32 and domain_reduce("satellite") == 16 and domain_reduce("charts") == 32
    assert domain_reduce("satellite", 24) == 24 and domain_reduce("natural", 16) == 16
    assert default_reductions() == [16, 32]
    img = _scene(1)
    assert domain_phash(img, "satellite") == f"{phash64(img, 16):016x}"
    assert domain_phash(img, "natural") == f"{phash64(img, 32):016x}"
    assert Images().phash_reduce is None and Images(phash_reduce=24).phash_reduce == 24


def test_image_check_records_the_hash_and_its_reduction():
    buf = io.BytesIO()
    _scene(2).save(buf, "PNG")
    for domain, reduce, expected in (("satellite", None, 16), ("natural", None, 32), ("satellite", 32, 32)):
        [rec] = ImageCheck(min_side=32, domain=domain, phash_reduce=reduce).run(
            [Record(id="a", source="s", text="", payload={"image": buf.getvalue()})])
        assert rec.meta["phash_reduce"] == expected and rec.meta["domain"] == domain
        assert rec.meta["phash"] == f"{phash64(Image.open(io.BytesIO(buf.getvalue())).convert('RGB'), expected):016x}"
