"""Small interleaved image-text inputs built in the tests: synthetic pictures (smooth, seeded, so their pHashes
are distinct and stable under re-encoding), OBELICS-style Parquet rows and MINT-1T-style WebDataset samples."""
from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np


def picture(seed: int, size: tuple[int, int] = (96, 80)) -> Image.Image:  # noqa: F821
    """A smooth RGB picture: per channel, three low-frequency waves with seeded directions and phases."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    w, h = size
    y, x = np.mgrid[0:h, 0:w] / max(w, h)
    channels = []
    for _ in range(3):
        v = sum(np.sin(2 * np.pi * (rng.uniform(0.3, 2.5) * x * np.cos(a) + rng.uniform(0.3, 2.5) * y * np.sin(a))
                       + rng.uniform(0, 2 * np.pi)) for a in rng.uniform(0, np.pi, 3))
        channels.append((v - v.min()) / (np.ptp(v) + 1e-9) * 255)
    return Image.fromarray(np.stack(channels, -1).astype(np.uint8))


def encoded(img, fmt: str = "PNG", **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


WORDS = ("harbour museum wing visitor history shipyard wooden hull steel photograph tool family worker river "
         "bridge market bakery morning evening train station library garden festival village mountain lake "
         "school teacher student lesson painting music orchestra concert winter summer autumn spring road "
         "journey letter archive map island lighthouse fisherman net storm weather season harvest field").split()


def english(i: int, words: int = 60) -> str:
    """A distinct English-looking paragraph per `i` (seeded word choice: no two share many 5-grams)."""
    rng = np.random.default_rng(1000 + i)
    picked = rng.choice(WORDS, size=words)
    sentences = [" ".join(["The", *picked[k:k + 10]]) + "." for k in range(0, words, 10)]
    return f"Page {i}. " + " ".join(sentences)


def obelics_rows(docs: list[list], url: str = "https://example.org/page{i}") -> list[dict]:
    """OBELICS rows from documents given as lists of items: a str is a text, anything else an image entry
    (bytes, a {bytes, path} struct, a path or a URL string wrapped in a one-item tuple)."""
    rows = []
    for i, items in enumerate(docs):
        texts = [it if isinstance(it, str) else None for it in items]
        images = [None if isinstance(it, str) else (it[0] if isinstance(it, tuple) else it) for it in items]
        rows.append({"id": f"doc{i}", "texts": texts, "images": images,
                     "metadata": json.dumps([None if isinstance(it, str) else {"alt": f"image {k}"}
                                             for k, it in enumerate(items)]),
                     "general_metadata": json.dumps({"url": url.format(i=i), "warc": "CC-MAIN-2023-06"})})
    return rows


def write_parquet(path: Path, rows: list[dict], image_type: str = "binary") -> Path:
    """`image_type`: `binary` (image bytes), `struct` (Hugging Face {bytes, path}) or `string` (paths/URLs)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    kind = {"binary": pa.binary(), "string": pa.string(),
            "struct": pa.struct([("bytes", pa.binary()), ("path", pa.string())])}[image_type]
    schema = pa.schema([("id", pa.string()), ("texts", pa.list_(pa.string())), ("images", pa.list_(kind)),
                        ("metadata", pa.string()), ("general_metadata", pa.string())])
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def add_member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), 0
    tar.addfile(info, io.BytesIO(data))


def write_mint_tar(path: Path, docs: list[tuple[str, list, str]], tiff: bool = False) -> Path:
    """MINT-1T-style WebDataset samples: (key, items, url) with items as in `obelics_rows` (images as PIL
    pictures). Images are members `key.<name>.png` (`tiff=False`) or the frames of one `key.tiff`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for key, items, url in docs:
            names, pics = [], []
            for k, it in enumerate(items):
                names.append(None if isinstance(it, str) else f"page_{k // 3}_image_{k}")
                if not isinstance(it, str):
                    pics.append((names[-1], it))
            obj = {"texts": [it if isinstance(it, str) else None for it in items], "images": names, "url": url,
                   "image_metadata": [{"width": p.width, "height": p.height} for _, p in pics]}
            add_member(tar, f"{key}.json", json.dumps(obj).encode())
            if tiff and pics:
                buf = io.BytesIO()
                pics[0][1].save(buf, "TIFF", save_all=True, append_images=[p for _, p in pics[1:]])
                add_member(tar, f"{key}.tiff", buf.getvalue())
            else:
                for name, p in pics:
                    add_member(tar, f"{key}.{name}.png", encoded(p))
    return path


def record(rid: str, items: list):
    """A record as the interleaved reader makes it, from items (str: a text; bytes or None: an image)."""
    from curation.core.record import Record
    from curation.steps.interleaved.document import join_texts
    texts = [it for it in items if isinstance(it, str)]
    layout, t, i = [], 0, 0
    for it in items:
        layout.append(["text", t] if isinstance(it, str) else ["image", i])
        t, i = (t + 1, i) if isinstance(it, str) else (t, i + 1)
    media = [it for it in items if not isinstance(it, str)]
    return Record(id=rid, source="web", text=join_texts(texts), payload={"media": media},
                  meta={"layout": layout, "images": [{"ref": f"{rid}/{k}"} for k in range(len(media))],
                        "images_listed": len(media)})
