"""JSON lines read with the right reasons and bounded memory: BOM, not gzip vs truncated, zstd, oversized
lines and decompression bombs."""
from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest
import zstandard

from curation.core.record import QuarantineSink
from curation.steps.text.readers.inputs import Limits
from curation.steps.text.readers.read import JsonlReader
from tests.conftest import english_doc

ROWS = [json.dumps({"id": str(i), "text": english_doc(i)}) for i in range(300)]
DATA = ("\n".join(ROWS) + "\n").encode()


def read(path: Path, **kw):
    sink = QuarantineSink()
    reader = JsonlReader(path, text_field="text", id_field=kw.pop("id_field", "id"), metadata_fields=[],
                         shard_label=path.name, source="s", sink=sink, **kw)
    records = list(reader.run())
    assert reader.stats.balanced(), reader.stats.to_json()
    return records, reader.stats, sink


def test_a_leading_bom_is_tolerated_on_any_line(tmp_path):
    p = tmp_path / "bom.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + ROWS[0].encode() + b"\n" + b"\xef\xbb\xbf" + ROWS[1].encode() + b"\n")
    records, stats, _ = read(p)
    assert [r.id for r in records] == ["0", "1"] and not stats.quarantined


def test_not_gzip_is_not_truncated_gzip(tmp_path):
    page = tmp_path / "error.jsonl.gz"
    page.write_bytes(b"<html><body>404 Not Found</body></html>\n")
    records, stats, sink = read(page)
    assert records == [] and dict(stats.quarantined) == {"not_gzip": 1}
    assert "not the gzip magic" in sink.entries[0]["detail"]
    cut = tmp_path / "cut.jsonl.gz"
    packed = gzip.compress(DATA, mtime=0)
    cut.write_bytes(packed[: len(packed) // 2])
    records, stats, sink = read(cut)
    assert 0 < len(records) < 300 and dict(stats.quarantined) == {"truncated_gzip": 1}
    assert f"lines 1-{len(records)} were read" in sink.entries[0]["detail"]


def test_corrupt_gzip_data_has_its_own_reason(tmp_path):
    packed = bytearray(gzip.compress(DATA, mtime=0))
    for i in range(len(packed) // 2, len(packed) // 2 + 64):
        packed[i] ^= 0xFF
    p = tmp_path / "flipped.jsonl.gz"
    p.write_bytes(bytes(packed))
    records, stats, _ = read(p)
    assert len(records) < 300 and set(stats.quarantined) <= {"corrupt_gzip", "malformed_json", "invalid_utf8",
                                                             "missing_text", "duplicate_id"}
    assert stats.quarantined["corrupt_gzip"] == 1


def test_multi_member_gzip_and_zstd(tmp_path):
    two = tmp_path / "two.jsonl.gz"
    half = len(ROWS) // 2
    two.write_bytes(gzip.compress(("\n".join(ROWS[:half]) + "\n").encode(), mtime=0) +
                    gzip.compress(("\n".join(ROWS[half:]) + "\n").encode(), mtime=0))
    assert len(read(two)[0]) == 300
    z = tmp_path / "rows.jsonl.zst"
    frames = zstandard.ZstdCompressor().compress(DATA[:5000]) + zstandard.ZstdCompressor().compress(DATA[5000:])
    z.write_bytes(frames)
    records, stats, _ = read(z)
    assert [r.id for r in records] == [str(i) for i in range(300)] and not stats.quarantined
    z.write_bytes(frames[: len(frames) // 2])
    records, stats, _ = read(z)
    assert 0 < len(records) < 300 and dict(stats.quarantined) == {"truncated_zstd": 1}
    (tmp_path / "fake.jsonl.zst").write_bytes(DATA)
    assert dict(read(tmp_path / "fake.jsonl.zst")[1].quarantined) == {"not_zstd": 1}


def test_an_oversized_line_is_quarantined_with_size_and_preview(tmp_path):
    big = json.dumps({"id": "big", "text": "x" * 200_000})
    p = tmp_path / "big.jsonl"
    p.write_bytes((ROWS[0] + "\n" + big + "\n" + ROWS[1] + "\n").encode())
    records, stats, sink = read(p, limits=Limits(max_record_bytes=64 * 1024))
    assert [r.id for r in records] == ["0", "1"] and dict(stats.quarantined) == {"record_too_large": 1}
    entry = sink.entries[0]
    assert entry["id"] == "big.jsonl:2" and f"{len(big):,} bytes" in entry["detail"]
    assert entry["raw"].startswith('{"id": "big"') and len(entry["raw"]) <= 200


def test_a_line_of_exactly_the_limit_is_kept(tmp_path):
    row = json.dumps({"id": "edge", "text": "y" * 1000})
    p = tmp_path / "edge.jsonl"
    p.write_bytes(row.encode())  # no final newline
    assert [r.id for r in read(p, limits=Limits(max_record_bytes=len(row)))[0]] == ["edge"]
    assert dict(read(p, limits=Limits(max_record_bytes=len(row) - 1))[1].quarantined) == {"record_too_large": 1}


@pytest.mark.slow
@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_a_bomb_of_small_lines_is_refused_past_the_ratio(tmp_path, codec):
    line = b'{"text": "a"}\n' * 4096
    if codec == "gzip":
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        packed = b"".join(c.compress(line) for _ in range(2048)) + c.flush()  # 112 MiB of lines
        p = tmp_path / "bomb.jsonl.gz"
    else:
        packed = zstandard.ZstdCompressor(level=19).compress(line * 2048)
        p = tmp_path / "bomb.jsonl.zst"
    p.write_bytes(packed)
    records, stats, sink = read(p, id_field=None, limits=Limits(ratio_floor_bytes=4 << 20))
    assert dict(stats.quarantined) == {"decompression_bomb": 1} and "max_ratio" in sink.entries[0]["detail"]
    # the lines before the refusal are kept: no more than the floor's worth (plus one buffer) was read
    assert 0 < len(records) <= ((4 << 20) + (1 << 20)) // len(b'{"text": "a"}\n')
