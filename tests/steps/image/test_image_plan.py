"""Scanning image tars without decoding, and the deterministic batch plan."""
from __future__ import annotations

import io
import tarfile

import numpy as np
from PIL import Image

from curation.steps.image.plan import plan
from curation.steps.image.resize import target_size
from curation.steps.image.scan import scan_tar


def _tar(path, images: dict[str, Image.Image], captions: dict[str, str]):
    with tarfile.open(path, "w") as tar:
        for name, img in images.items():
            buf = io.BytesIO()
            img.save(buf, format="JPEG" if name.endswith(".jpg") else "PNG")
            info = tarfile.TarInfo(name)
            info.size = len(buf.getvalue())
            tar.addfile(info, io.BytesIO(buf.getvalue()))
        for name, text in captions.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))


def test_scan_reads_headers_only(tmp_path, monkeypatch):
    exif = Image.Exif()
    exif[0x010E] = "x" * 20_000  # a big EXIF block pushes the JPEG size marker past the first read
    big = io.BytesIO()
    Image.new("RGB", (640, 480), "red").save(big, "JPEG", exif=exif)
    images = {"s/000.jpg": Image.open(io.BytesIO(big.getvalue())), "s/001.png": Image.new("L", (33, 17)),
              "s/002.jpg": Image.new("RGB", (1000, 10))}
    _tar(tmp_path / "a.tar", images, {"s/000.txt": "a red square", "s/001.txt": "grey"})
    decoded = []
    monkeypatch.setattr(Image.Image, "load", lambda self: decoded.append(1))  # decoding pixels would call load()
    rows = scan_tar(tmp_path / "a.tar")
    assert decoded == []
    assert [(r.key, r.width, r.height, r.format) for r in rows] == [
        ("s/000", 640, 480, "JPEG"), ("s/001", 33, 17, "PNG"), ("s/002", 1000, 10, "JPEG")]
    raw = (tmp_path / "a.tar").read_bytes()
    assert raw[rows[1].offset:rows[1].offset + 8] == b"\x89PNG\r\n\x1a\n"


def test_plan_batches_are_shape_uniform_within_budget_and_windows_snap_to_documents():
    rng = np.random.default_rng(0)
    n = 5000
    width = rng.choice([640, 800, 1024, 333], n)
    height = rng.choice([480, 600, 768, 1000], n)
    document = np.repeat(np.arange(n // 5), 5)[:n]  # documents of 5 images
    p = plan(width, height, document, area=256 * 256, budget=4096, ranks=8, window=512)
    w, h = target_size(width, height, 256 * 256)
    for b in range(p.tokens.size):
        rows = np.flatnonzero(p.batch == b)
        assert len({(int(h[r]), int(w[r])) for r in rows}) == 1          # one tensor shape per batch
        assert p.tokens[b] == ((w[rows] // 16) * (h[rows] // 16)).sum() <= 4096
    assert all(np.unique(p.window[document == d]).size == 1 for d in range(n // 5))  # windows snap to documents
    assert np.unique(p.window).size > 5
    assert p.imbalance(8) < 0.02
    again = plan(width, height, document, area=256 * 256, budget=4096, ranks=8, window=512)
    assert np.array_equal(again.batch, p.batch) and np.array_equal(again.rank, p.rank)
    replan = plan(width, height, document, area=256 * 256, budget=8192, ranks=3, window=512)
    assert replan.tokens.max() <= 8192 and replan.imbalance(3) < 0.02


def test_one_resize_rule_for_the_plan_and_the_encoder_path():
    """The plan's shapes (arrays) are the shapes the encoder path resizes each image to (ints): one rule."""
    rng = np.random.default_rng(1)
    width, height = rng.integers(1, 5000, 3000), rng.integers(1, 5000, 3000)
    for area in (256, 16384, 512 * 512):
        w, h = target_size(width, height, area)
        assert w.dtype == h.dtype == np.int64
        pairs = [target_size(int(a), int(b), area) for a, b in zip(width, height)]
        assert all(type(x) is int and type(y) is int for x, y in pairs)
        assert [p[0] for p in pairs] == w.tolist() and [p[1] for p in pairs] == h.tolist()
        assert (w % 16 == 0).all() and (h % 16 == 0).all() and (w >= 16).all() and (h >= 16).all()
    assert target_size(1000, 600, 256 * 256) == (336, 192)        # 330.4 → 336, 198.3 → 192
    assert target_size(1, 4000, 256 * 256) == (16, 16192)         # at least one patch per side
    assert target_size(24, 24, 24 * 24) == (32, 32)               # 1.5 patches rounds half to even: 2
    assert target_size(40, 40, 40 * 40) == (32, 32)               # 2.5 → 2


def test_fast_headers_agree_with_pil():
    from curation.steps.image.scan import _fast_header
    for fmt, mode, size in (("PNG", "RGB", (31, 7)), ("JPEG", "RGB", (640, 33)), ("JPEG", "L", (5, 900)),
                            ("GIF", "P", (12, 34)), ("JPEG", "CMYK", (70, 50))):
        buf = io.BytesIO()
        Image.new(mode, size).save(buf, format=fmt, **({"progressive": True} if fmt == "JPEG" else {}))
        assert _fast_header(buf.getvalue()[:4096]) == (*size, fmt)
