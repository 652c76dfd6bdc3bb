"""Image validation, perceptual hashes and decontamination by Hamming radius per domain."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from curation.corpus.decont.images import match_images
from curation.errors import RecordError
from curation.steps.image.decode import decode
from curation.steps.image.phash import distance, phash64
from tests.conftest import SHARED_DATA

SHARED = SHARED_DATA / "images"


def picture(seed: int, size=(320, 240), mode="RGB") -> Image.Image:
    """A smooth random scene (low-frequency structure, as photos have)."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    return Image.fromarray(small).resize(size, Image.BICUBIC).convert(mode)


def encode(img: Image.Image, fmt="PNG", **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def test_decode_normalises_modes_and_orientation():
    base = picture(1)
    for mode in ("CMYK", "P", "L", "RGBA", "LA"):
        img = decode(encode(base.convert(mode), "TIFF" if mode == "CMYK" else "PNG"))
        assert img.mode == "RGB" and img.size == (320, 240)
    sixteen = Image.fromarray(np.arange(64 * 48, dtype=np.uint16).reshape(48, 64) * 16)
    assert decode(encode(sixteen)).mode == "RGB"
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated 90°: the decoded image must come out upright (portrait)
    assert decode(encode(base, "JPEG", exif=exif)).size == (240, 320)


def test_decode_rejects_with_reasons():
    good = encode(picture(2), "JPEG")
    cases = {b"": "empty_image", b"not an image at all": "corrupt_image", good[: len(good) // 2]: "truncated_image"}
    for data, reason in cases.items():
        with pytest.raises(RecordError) as e:
            decode(data)
        assert e.value.reason == reason
    with pytest.raises(RecordError) as e:
        decode(encode(Image.new("L", (400, 400))), max_pixels=100_000)
    assert e.value.reason == "decompression_bomb"


def test_phash_survives_reencoding_not_other_images():
    img = picture(3)
    h = phash64(img)
    assert distance(h, phash64(decode(encode(img, "JPEG", quality=60)))) <= 4
    assert distance(h, phash64(img.resize((160, 120)))) <= 4
    assert min(distance(h, phash64(picture(s))) for s in range(10, 30)) > 10
    assert 0 <= phash64(img, reduce=16) < 2**64  # the satellite setting: a smaller input
    with pytest.raises(ValueError):
        phash64(img, reduce=12)


def test_match_images_uses_the_domain_radius():
    bench = np.random.default_rng(0).integers(0, 2**63, 3, dtype=np.uint64)
    train = np.array([bench[0] ^ np.uint64(0b11), bench[0] ^ np.uint64(0b11), bench[2], ~bench[1]], dtype=np.uint64)
    found = match_images(train, ["natural", "satellite", "satellite", "natural"], bench)
    assert found == [(0, 0, 2), (2, 2, 0)]  # 2 bits: a match for a photo, not for a satellite tile


@pytest.mark.shared_data
@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/images is absent")
def test_real_near_duplicates():
    folder = SHARED / "near_duplicates"
    h = {p.name: phash64(decode(p.read_bytes())) for p in sorted(folder.iterdir()) if p.suffix != ".gif"}
    base = h["imagededup_ukbench00120.jpg"]
    assert distance(base, h["imagededup_ukbench00120_resize.jpg"]) <= 4
    assert distance(base, h["imagededup_ukbench00120_gray.jpg"]) <= 4
    others = [v for k, v in h.items() if "00120" not in k and "alpha" not in k]
    assert min(distance(base, o) for o in others) > 20
    train = np.array(list(h.values()), dtype=np.uint64)
    found = match_images(train, ["natural"] * len(train), np.array([base], dtype=np.uint64))
    names = list(h)
    assert {names[i] for i, _, _ in found} == {"imagededup_ukbench00120.jpg", "imagededup_ukbench00120_resize.jpg",
                                                "imagededup_ukbench00120_gray.jpg", "imagededup_alpha_channel_image.png"}


def _processed(out, source: str, records: list, domain: str) -> None:
    """The processed shard of an image source: each record through ImageCheck (size, domain, pHash)."""
    import json

    import pyarrow as pa

    from curation.core.atomic import atomic_write_parquet
    from curation.core.layout import processed_path
    from curation.steps.image.read import ImageCheck
    kept = list(ImageCheck(min_side=32, domain=domain, source=source).run(records))
    assert len(kept) == len(records)
    atomic_write_parquet(processed_path(out, source, "00000"), pa.Table.from_pylist(
        [{"id": r.id, "text": r.text, "meta": json.dumps(r.meta)} for r in kept]))


@pytest.mark.shared_data
@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/images is absent")
def test_satellite_tile_matches_its_reencoded_copy_at_the_satellite_settings(tmp_path):
    """A benchmark tile (PNG) and its JPEG-85 training copy, both hashed at the satellite domain's 16×16
    reduction: equal hashes, so the copy is removed at the satellite radius 0; other tiles are not. A
    natural photo in another source is matched at its own (32×32) reduction against the same index."""
    import pyarrow.parquet as pq

    from curation.core.layout import flags_path
    from curation.core.node import Node
    from curation.core.record import Record
    from curation.corpus.decont.images import DEFAULT_RADII
    from curation.corpus.decont.match import run_decont, run_decont_index

    sat = SHARED / "satellite"
    tile = decode((sat / "rasterio_rgb4.tif").read_bytes()).crop((0, 0, 256, 256))
    (tmp_path / "bench").mkdir()
    tile.save(tmp_path / "bench" / "tile.png")
    photo = decode((SHARED / "near_duplicates" / "imagededup_ukbench00120.jpg").read_bytes())
    photo.save(tmp_path / "bench" / "photo.png")
    landsat = decode((sat / "rasterio_RGB.byte.tif").read_bytes())
    others = [landsat.crop((x, y, x + 256, y + 256)) for x, y in ((128, 128), (384, 128), (256, 384))]
    others.append(decode((sat / "rasterio_rgb4.tif").read_bytes()).crop((136, 63, 392, 319)))
    training = [Record(id=f"t{i}", source="sat", text="", payload={"image": encode(img, "JPEG", quality=85)})
                for i, img in enumerate([tile, *others])]
    out = tmp_path / "out"
    _processed(out, "sat", training, "satellite")
    photo_jpeg = encode(photo.resize((320, 240)), "JPEG", quality=85)
    _processed(out, "photos", [Record(id="p0", source="photos", text="", payload={"image": photo_jpeg})],
               "natural")

    run_decont_index(out, Node("decont_index", None, None, "f", spec={
        "benchmarks": [], "ngram": 13, "shards": 1,
        "image_benchmarks": [{"name": "bench", "path": str(tmp_path / "bench"), "sha256": "-"}]}))
    items = pq.read_table(out / "work" / "decont" / "items.parquet").to_pylist()
    assert [sorted(dict(i["phashes"])) for i in items] == [[16, 32], [16, 32]]   # one hash per reduction in use
    flagged = {}
    for source in ("sat", "photos"):
        run_decont(out, Node("decont", source, "00000", "f", spec={"ngram": 13, "shards": 1, "threshold": 0.5,
                                                                   "image_radii": DEFAULT_RADII, "image": True}))
        flagged[source] = {(r["id"], r["item_id"], r["overlap"])
                           for r in pq.read_table(flags_path(out, source, "00000")).to_pylist()}
    assert flagged["sat"] == {("t0", "tile.png", 0)}
    assert {(i, item) for i, item, _ in flagged["photos"]} == {("p0", "photo.png")}
    copy = phash64(decode(training[0].payload["image"]), 16)
    assert distance(phash64(tile, 16), copy) == 0 < distance(phash64(tile, 32), copy)   # mixed settings miss it
