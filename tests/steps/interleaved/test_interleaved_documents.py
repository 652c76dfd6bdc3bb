"""Interleaved image-text documents: OBELICS-style Parquet and MINT-1T-style WebDataset read into one record
form, every image checked (dropped from its document with a counted reason, or taking the document with it),
segments that survive the text steps, and per-image drop lists."""
from __future__ import annotations

import numpy as np
import pytest

from curation.core.record import QuarantineSink
from curation.steps.interleaved.check import InterleavedCheck
from curation.steps.interleaved.declaration import Interleaved
from curation.steps.interleaved.document import check_images, runs, segments, text_count
from curation.steps.interleaved.read import (
    ParquetInterleavedReader,
    WebDatasetInterleavedReader,
)
from tests.interleaved_data import (
    encoded,
    english,
    obelics_rows,
    picture,
    write_mint_tar,
    write_parquet,
)
from tests.interleaved_data import record as _doc


def _read(cls, path, **settings):
    sink = QuarantineSink()
    kw = {"id_field": "id"} if cls is ParquetInterleavedReader else {}
    reader = cls(path, settings=Interleaved(**settings), url_field="url", metadata_fields=[], shard_label="s",
                 source="web", sink=sink, **kw)
    return list(reader.run()), sink.entries, reader.stats


def _check(records, **kw):
    step = InterleavedCheck(min_side=kw.pop("min_side", 32), domain="natural", sink=QuarantineSink(), **kw)
    return list(step.run(records)), step


def test_obelics_rows_keep_reading_order_and_resolve_every_kind_of_image_entry(tmp_path):
    a, b = picture(1), picture(2)
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "b.png").write_bytes(encoded(b))
    url = ("https://cdn.example.org/c.jpg",)
    # Hugging Face image structs: bytes, or a path next to the file; a URL as OBELICS publishes them
    rows = obelics_rows([[english(0), {"bytes": encoded(a), "path": "a.png"}, english(1),
                          {"bytes": None, "path": "img/b.png"}, {"bytes": None, "path": url[0]}, english(2)]])
    rows[0]["texts"].insert(1, None)   # a position that holds neither takes no place
    rows[0]["images"].insert(1, None)
    write_parquet(tmp_path / "s.parquet", rows, image_type="struct")
    (r,), quarantined, _ = _read(ParquetInterleavedReader, tmp_path / "s.parquet")
    assert not quarantined
    assert r.id == "doc0" and r.meta["url"] == "https://example.org/page0"   # from general_metadata
    assert r.meta["layout"] == [["text", 0], ["image", 0], ["text", 1], ["image", 1], ["image", 2], ["text", 2]]
    assert segments(r.text, 3) == [english(0), english(1), english(2)]
    assert r.payload["media"][:2] == [encoded(a), encoded(b)] and r.payload["media"][2] is None
    assert [m.get("problem") for m in r.meta["images"]] == [None, None, "image_not_acquired"]
    assert r.meta["images_listed"] == 3
    # a string column: paths (a missing one too) and URLs
    write_parquet(tmp_path / "p.parquet", obelics_rows([[english(0), ("img/none.png",), ("img/b.png",), url]]),
                  image_type="string")
    (s,), _, _ = _read(ParquetInterleavedReader, tmp_path / "p.parquet")
    assert s.payload["media"][1] == encoded(b) and s.payload["media"][0] is None and s.payload["media"][2] is None
    assert [m.get("problem") for m in s.meta["images"]] == ["missing_image", None, "image_not_acquired"]
    write_parquet(tmp_path / "x.parquet", obelics_rows([[english(0), ("../s.parquet",)]]), image_type="string")
    (x,), _, _ = _read(ParquetInterleavedReader, tmp_path / "x.parquet", image_root="img")
    assert x.meta["images"][0]["problem"] == "path_outside_input"   # outside the image root: never read


@pytest.mark.parametrize("row,reason", [
    ({"texts": ["a", None], "images": [None]}, "bad_interleaving"),
    ({"texts": ["a", "b"], "images": [None, "x.png"]}, "bad_interleaving"),
    ({"texts": None, "images": []}, "missing_texts"),
    ({"texts": [None], "images": [None]}, "empty_document"),
    ({"texts": [None] * 3, "images": ["a.png", "b.png", "c.png"]}, "too_many_images"),
])
def test_documents_that_are_not_a_faithful_reading_order_are_quarantined(tmp_path, row, reason):
    write_parquet(tmp_path / "p.parquet", [{"id": "d", "metadata": None, "general_metadata": None, **row}],
                  image_type="string")
    records, quarantined, stats = _read(ParquetInterleavedReader, tmp_path / "p.parquet", max_images=2)
    assert records == [] and [q["reason"] for q in quarantined] == [reason] and stats.balanced()


@pytest.mark.parametrize("tiff", [False, True])
def test_mint_webdataset_samples_with_named_members_or_tiff_frames(tmp_path, tiff):
    import io

    from PIL import Image
    pics = [picture(5), picture(6, (64, 72))]
    docs = [("k0", [english(3), pics[0], english(4), pics[1]], "https://pdfs.example.org/a.pdf"),
            ("k1", [pics[0]], "https://pdfs.example.org/b.pdf")]
    path = write_mint_tar(tmp_path / "m.tar", docs, tiff=tiff)
    records, quarantined, _ = _read(WebDatasetInterleavedReader, path)
    assert not quarantined and [r.id for r in records] == ["k0", "k1"]
    r = records[0]
    assert r.meta["url"] == "https://pdfs.example.org/a.pdf"
    assert r.meta["layout"] == [["text", 0], ["image", 0], ["text", 1], ["image", 1]]
    decoded = [Image.open(io.BytesIO(m)).convert("RGB") for m in r.payload["media"]]
    assert [d.size for d in decoded] == [(96, 80), (64, 72)]
    assert all((np.asarray(d) == np.asarray(p)).all() for d, p in zip(decoded, pics))   # lossless either way


def test_a_sample_without_its_json_or_an_image_member_is_reported(tmp_path):
    import tarfile

    from tests.interleaved_data import add_member
    with tarfile.open(tmp_path / "m.tar", "w") as tar:
        add_member(tar, "a.png", encoded(picture(1)))
        add_member(tar, "b.json", b'{"texts": ["hi", null], "images": [null, "gone"]}')
    records, quarantined, _ = _read(WebDatasetInterleavedReader, tmp_path / "m.tar")
    assert [q["reason"] for q in quarantined] == ["no_document_json"]
    assert records[0].payload["media"] == [None] and records[0].meta["images"][0]["problem"] == "missing_image"


def test_bad_images_leave_their_document_counted_by_reason_and_the_document_stays():
    good, small = encoded(picture(1)), encoded(picture(2, (20, 40)))
    doc = _doc("d", ["intro", good, "middle", b"broken", small, "end", good])
    (kept,), step = _check([doc])
    assert kept.meta["image_drops"] == {"corrupt_image": 1, "image_too_small": 1}
    assert kept.meta["layout"] == [["text", 0], ["image", 0], ["text", 1], ["text", 2], ["image", 1]]
    assert [m["width"] for m in kept.meta["images"]] == [96, 96] and len(kept.meta["images"][0]["phash"]) == 16
    assert [k for k, _ in runs(kept.meta["layout"], ["intro", "middle", "end"])] == ["text", "image", "text", "image"]
    assert list(runs(kept.meta["layout"], ["intro", "middle", "end"]))[2] == ("text", "middle\n\nend")
    check_images(kept)
    n = step.stats.notes
    assert (n["images_in"], n["images_kept"], n["images_dropped:corrupt_image"], n["images_dropped:image_too_small"]) \
        == (4, 2, 1, 1) and step.stats.balanced()


def test_drop_document_mode_and_min_images():
    good = encoded(picture(1))
    docs = [_doc("corrupt", ["a", good, b"x"]), _doc("small", ["b", encoded(picture(2, (20, 20)))]),
            _doc("fine", ["c", good])]
    kept, step = _check(docs, on_bad_image="drop_document")
    assert [r.id for r in kept] == ["fine"]
    assert step.stats.quarantined == {"corrupt_image": 1} and step.stats.dropped == {"image_too_small": 1}
    kept, step = _check([_doc("one", ["a", good, b"x"]), _doc("none", ["b", b"x"])], min_images=1)
    assert [r.id for r in kept] == ["one"] and step.stats.dropped == {"too_few_images": 1}
    kept, _ = _check([_doc("text only", ["b", b"x"])], min_images=0)
    assert kept[0].payload["media"] == [] and kept[0].meta["image_drops"] == {"corrupt_image": 1}


def test_segments_survive_normalisation_and_pii_and_refuse_lost_separators():
    from curation.errors import RecordError
    from curation.steps.text.normalize import Normalize
    from curation.steps.text.pii import PIIRedactor
    doc = _doc("d", ["Caf\u0065\u0301 opens at nine.", None, "Write to anna@example.org today.", "Bye"])
    out = list(PIIRedactor(kinds=("email",)).run(Normalize(nfc=True, ftfy=True).run([doc])))
    texts = segments(out[0].text, text_count(out[0].meta))
    assert texts[0] == "Café opens at nine." and "anna@example.org" not in texts[1] and texts[2] == "Bye"
    with pytest.raises(RecordError) as e:
        segments(out[0].text.replace("\ue000", " "), 3)
    assert e.value.reason == "segments_lost"


def test_drop_lists_remove_single_images_by_index_and_whole_records_by_id(tmp_path):
    from curation.steps.droplist import DropListed, read_drops, write_drops
    write_drops(tmp_path / "a.parquet", [("d1", "image_near_duplicate", "src/d0#0", 1), ("d2", "near_duplicate", "")])
    write_drops(tmp_path / "b.parquet", [("d1", "contaminated:vqa", "vqa/7")])
    reasons = read_drops(tmp_path / "a.parquet")
    assert reasons == {("image", "d1", 1): ("image_near_duplicate", "src/d0#0"), "d2": ("near_duplicate", "")}
    step = DropListed("exact_dedup", reasons)
    kept = list(step.run([_doc("d1", ["a", b"x", b"y"]), _doc("d2", ["b"])]))
    assert [r.id for r in kept] == ["d1"] and kept[0].meta["drop_images"] == {"1": "image_near_duplicate"}
    reasons.update(read_drops(tmp_path / "b.parquet"))   # a whole-record drop of another phase wins
    assert [r.id for r in DropListed("x", reasons).run([_doc("d1", ["a"])])] == []


def test_the_process_fingerprint_covers_the_image_files_rows_refer_to(tmp_path):
    from curation.recipe.schema import Source
    from curation.steps.interleaved.modality import image_files
    src = Source.model_validate({"name": "s", "license": "CC0-1.0", "modality": "interleaved",
                                 "input": {"format": "parquet", "paths": ["*.parquet"]}})
    (tmp_path / "a.png").write_bytes(encoded(picture(1)))
    write_parquet(tmp_path / "s.parquet", obelics_rows([["x", ("a.png",), ("https://cdn.example.org/x.png",)]]),
                  image_type="string")
    write_parquet(tmp_path / "b.parquet", obelics_rows([["x", encoded(picture(2))]]), image_type="binary")
    before = image_files(src, tmp_path / "s.parquet")
    (tmp_path / "a.png").write_bytes(encoded(picture(3)))          # the referenced image changed: so does the hash
    assert image_files(src, tmp_path / "s.parquet") != before
    assert image_files(src, tmp_path / "b.parquet") is None         # bytes in the rows: the file's hash covers them


def test_tiff_frames_of_any_mode_are_kept_lossless():
    import io

    from PIL import Image

    from curation.steps.image.decode import decode
    from curation.steps.interleaved.read import tiff_frames
    rgb, cmyk = picture(1), picture(2).convert("CMYK")
    buf = io.BytesIO()
    rgb.save(buf, "TIFF", save_all=True, append_images=[cmyk])
    frames = tiff_frames(buf.getvalue())
    assert [p for _, p in frames] == [None, None]
    assert Image.open(io.BytesIO(frames[1][0])).mode == "CMYK"
    assert (np.asarray(decode(frames[0][0])) == np.asarray(rgb)).all()
    assert tiff_frames(b"not a tiff") == []


@pytest.mark.parametrize("changes,message", [
    ({"input": {"format": "jsonl", "paths": ["x"]}}, "reads Parquet rows"),
    ({"images": {"caption": "before"}}, "does not apply to interleaved documents"),
    ({"modality": "text"}, "apply to `modality: interleaved` sources"),
    ({"interleaved": {"min_images": 3, "max_images": 2}}, "min_images"),
])
def test_recipe_settings_of_interleaved_sources_are_checked(changes, message):
    from pydantic import ValidationError

    from curation.recipe.schema import Source
    base = {"name": "s", "license": "CC0-1.0", "modality": "interleaved", "interleaved": {},
            "input": {"format": "parquet", "paths": ["*.parquet"]}}
    assert Source.model_validate(base).settings_for("interleaved").on_bad_image == "drop_image"
    with pytest.raises(ValidationError, match=message):
        Source.model_validate(base | changes)


def _png_header(width: int, height: int) -> bytes:
    """A PNG that declares `width`×`height` pixels and holds almost none (a decompression bomb's header)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


def test_documents_dropped_for_their_images_keep_each_image_reason(tmp_path):
    """Issue 22.9: documents whose only image is outside the tree, missing, a bomb or not an image are
    dropped as too_few_images with a detail naming each image's reason, and the `interleaved` table
    counts their images by those reasons (it showed images_dropped 0)."""
    from curation.core.record import StepStats
    from curation.recipe.schema import Source
    from curation.steps.interleaved.modality import _ledger_row
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "good.png").write_bytes(encoded(picture(1)))
    (tmp_path / "img" / "bomb.png").write_bytes(_png_header(40000, 40000))
    (tmp_path / "img" / "text.png").write_bytes(b"this is not an image")
    refs = ["../../../../etc/passwd", "none.png", "bomb.png", "text.png", "good.png"]   # under image_root img/
    write_parquet(tmp_path / "d.parquet", obelics_rows([[english(i), (ref,)] for i, ref in enumerate(refs)]),
                  image_type="string")
    records, quarantined, _ = _read(ParquetInterleavedReader, tmp_path / "d.parquet", image_root="img")
    assert not quarantined and len(records) == 5
    sink = QuarantineSink()
    step = InterleavedCheck(min_side=32, domain="natural", sink=sink)
    kept = list(step.run(records))
    assert [r.id for r in kept] == ["doc4"]
    why = {d[1]: (d[3], d[4]) for d in sink.decisions}
    expected = {"doc0": "path_outside_input", "doc1": "missing_image", "doc2": "decompression_bomb",
                "doc3": "corrupt_image"}
    for doc, reason in expected.items():
        assert why[doc][0] == "too_few_images" and "image 0 (" in why[doc][1] and why[doc][1].endswith(reason), why[doc]
    tokenize = StepStats("tokenize")   # what the tokenizer notes for the one document it writes
    tokenize.notes.update({"images": 1, "images_listed": 1})
    src = Source.model_validate({"name": "web", "license": "CC0-1.0", "modality": "interleaved",
                                 "input": {"paths": [str(tmp_path / "d.parquet")], "format": "parquet"}})
    row = _ledger_row("run", src, {"image_check": step.stats, "tokenize": tokenize},
                      {"documents": 1, "image": 0, "text": 0})
    assert row["images_dropped"] == 4 and row["images_listed"] == 5 and row["images"] == 1
    assert dict(row["images_dropped_by_reason"]) == {r: 1 for r in expected.values()}
