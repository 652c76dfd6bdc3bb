"""The corpus-wide phases over interleaved documents: every image takes part in pHash dedup with image samples
(a duplicate image leaves its document, a duplicate sample goes whole), and decontamination flags a document by
any of its images."""
from __future__ import annotations

from curation.core.layout import processed_path
from curation.core.record import Record
from curation.steps.image.decode import decode
from curation.steps.image.phash import domain_phash
from tests.interleaved_data import encoded, picture
from tests.interleaved_data import record as document


def _write(out, modality: str, source: str, records: list[Record]) -> None:
    from curation.steps.registry import MODALITIES
    w = MODALITIES[modality].writer(processed_path(out, source, "00000"))
    for r in records:
        w.add(r)
    w.close()


def _sample(rid: str, data: bytes) -> Record:
    img = decode(data)
    return Record(id=rid, source="photos", text="", payload={"image": data},
                  meta={"domain": "natural", "phash": domain_phash(img, "natural"), "phash_reduce": 32,
                        "width": img.width, "height": img.height})


def _doc(rid: str, items: list) -> Record:
    r = document(rid, items)
    for m, data in zip(r.meta["images"], r.payload["media"]):
        m.update(phash=domain_phash(decode(data), "natural"), phash_reduce=32)
    r.meta["domain"] = "natural"
    return r


def test_images_inside_documents_are_deduplicated_with_image_samples(tmp_path):
    from curation.corpus.image_near import image_duplicates
    cat, moon, sea = (encoded(picture(s)) for s in (1, 2, 3))
    cat_copy = encoded(picture(1), "JPEG", quality=85)
    _write(tmp_path, "image", "photos", [_sample("p0", cat), _sample("p1", sea)])
    _write(tmp_path, "interleaved", "pages", [_doc("a", ["intro", cat_copy, "text", moon, "more", moon]),
                                              _doc("b", ["other", sea])])
    _write(tmp_path, "image", "late", [_sample("q0", moon)])
    shards = [("photos", "00000"), ("pages", "00000"), ("late", "00000")]
    rows, clusters = image_duplicates(tmp_path, shards, {"natural": 4}, set())
    assert sorted((r["source"], r["id"], r["image"]) for r in rows) == [
        ("late", "q0", None),        # a sample whose earlier copy sits in a document goes whole
        ("pages", "a", 0),           # the re-encoded photo leaves page a; the page stays
        ("pages", "a", 2),           # the page repeats its own image: the second copy goes
        ("pages", "b", 0)]           # the sea photo, first seen as a sample
    members = sorted(c["members"] for c in clusters.to_pylist())
    assert members == [["pages/a#1", "pages/a#2", "late/q0"], ["photos/p0", "pages/a#0"],
                       ["photos/p1", "pages/b#0"]]


def test_decontamination_flags_a_document_by_any_of_its_images(tmp_path):
    import pyarrow.parquet as pq

    from curation.core.layout import flags_path
    from curation.core.node import Node
    from curation.corpus.decont.match import run_decont, run_decont_index
    bench = tmp_path / "bench"
    bench.mkdir()
    picture(7).resize((150, 125)).save(bench / "q.png")
    out = tmp_path / "out"
    _write(out, "interleaved", "pages", [_doc("clean", ["a text", encoded(picture(8))]),
                                         _doc("hit", ["b text", encoded(picture(9)), "c", encoded(picture(7))])])
    spec = {"benchmarks": [], "image_benchmarks": [{"name": "vqa", "path": str(bench), "sha256": "x"}],
            "ngram": 13, "shards": 1, "phash_reductions": [32]}
    run_decont_index(out, Node("decont_index", None, None, "f", spec=spec))
    run_decont(out, Node("decont", "pages", "00000", "g", spec={
        "ngram": 13, "shards": 1, "threshold": 0.5, "image_radii": {"natural": 4}, "image": True}))
    flags = pq.read_table(flags_path(out, "pages", "00000")).to_pylist()
    assert [(f["id"], f["benchmark"], f["item_id"]) for f in flags] == [("hit", "vqa", "q.png")]
