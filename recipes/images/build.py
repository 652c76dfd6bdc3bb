"""Build the image demo's two WebDataset shards from public-domain/CC0 images of scikit-image's
bundled data (copies in ../shared/data/images, see SOURCES.md), downscaled so the repo stays small:

    shards/captioned-00000.tar   8 photos with a caption each (.jpg + .txt), plus a re-encoded copy of
                                 one (a perceptual duplicate), a 20-pixel thumbnail (too small), a
                                 corrupt file and a caption with a token loop: each shows a check
    shards/uncaptioned-00000.tar 5 images without captions (textures, microscopy, the moon)

Deterministic (fixed tar metadata, fixed JPEG settings). Run: python recipes/images/build.py
"""
from __future__ import annotations

import csv
import io
import tarfile
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[2] / "shared" / "data" / "images"
CAPTIONED = ["astronaut", "camera", "chelsea", "coffee", "rocket", "clock_motion", "hubble_deep_field", "coins"]
UNCAPTIONED = ["brick", "grass", "cell", "ihc", "moon"]


def jpeg(img: Image.Image, quality: int = 85, side: int = 192) -> bytes:
    img = img.convert("RGB")
    img.thumbnail((side, side), Image.BICUBIC)
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality, optimize=False)
    return buf.getvalue()


def add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.uname, info.gname = len(data), 0, 0o644, "", ""
    tar.addfile(info, io.BytesIO(data))


def main() -> None:
    desc = {Path(r["file"]).stem.removeprefix("skimage_"): r["description"]
            for r in csv.DictReader(open(DATA / "manifest.csv", encoding="utf-8"))}
    src = {p.stem.removeprefix("skimage_"): p for p in (DATA / "natural").iterdir()}
    (HERE / "shards").mkdir(exist_ok=True)
    with tarfile.open(HERE / "shards" / "captioned-00000.tar", "w", format=tarfile.USTAR_FORMAT) as tar:
        for i, name in enumerate(CAPTIONED):
            img = Image.open(src[name])
            add(tar, f"{i:04d}.jpg", jpeg(img))
            add(tar, f"{i:04d}.txt", f"{desc[name]}.".encode())
        add(tar, "0100.jpg", jpeg(Image.open(src["chelsea"]), quality=60, side=160))  # the same cat, re-encoded
        add(tar, "0100.txt", b"A tabby cat resting, photographed indoors.")
        add(tar, "0101.jpg", jpeg(Image.open(src["coffee"]), side=20))
        add(tar, "0101.txt", b"A tiny thumbnail of a coffee cup.")
        add(tar, "0102.jpg", b"\xff\xd8\xff\xe0 this is not really a JPEG")
        add(tar, "0102.txt", b"A broken file.")
        add(tar, "0103.jpg", jpeg(Image.open(src["moon"])))
        add(tar, "0103.txt", b"the moon the moon the moon the moon the moon the moon the moon the moon")
    with tarfile.open(HERE / "shards" / "uncaptioned-00000.tar", "w", format=tarfile.USTAR_FORMAT) as tar:
        for i, name in enumerate(UNCAPTIONED):
            add(tar, f"{i:04d}.jpg", jpeg(Image.open(src[name])))


if __name__ == "__main__":
    main()
