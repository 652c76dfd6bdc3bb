"""Bounded memory per record: a 200 MB JSON line and a 1 GB gzip bomb (and a WARC whose one record
inflates to 1 GB) are refused without the reading process growing by more than a stated bound.

Each case runs the reader in a fresh subprocess and reads its peak RSS (VmHWM, `tests/peak.py`); the bound is on
the growth over the same subprocess reading a one-line file, so that interpreter and import memory
do not count. The bound, 96 MiB, is three times the default `max_record_bytes` (32 MiB): a record up
to the limit may be held while it is read; nothing longer may be.
"""
from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # writes ~200 MB and inflates 1 GB streams: about 10 s

REPO = Path(__file__).resolve().parents[3]
BOUND = 96 * 2**20
_CHILD = r"""
import json, sys
from pathlib import Path
from curation.core.record import QuarantineSink
from tests.peak import peak
kind, path = sys.argv[1], Path(sys.argv[2])
if kind == "jsonl":
    from curation.steps.text.readers.read import JsonlReader
    reader = JsonlReader(path, text_field="text", id_field=None, metadata_fields=[], shard_label=path.name,
                         source="s", sink=QuarantineSink())
else:
    from curation.steps.text.readers.web_read import WarcReader
    reader = WarcReader(path, shard_label=path.name, source="s", sink=QuarantineSink())
n = sum(1 for _ in reader.run())
print(json.dumps({"records": n, "quarantined": dict(reader.stats.quarantined),
                  "peak": peak()}))
"""


def _peak(kind: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, kind, str(path)], cwd=REPO, capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def _growth(kind: str, path: Path, tmp_path: Path) -> tuple[dict, int]:
    small = tmp_path / ("small.jsonl" if kind == "jsonl" else "small.warc")
    if kind == "jsonl":
        small.write_text('{"text": "one small line"}\n')
    else:
        from tests.steps.text.readers.web_pages import crawl
        crawl(small, gz=False)
    base = _peak(kind, small)
    result = _peak(kind, path)
    return result, result["peak"] - base["peak"]


def test_a_200_mb_line_is_not_held(tmp_path):
    p = tmp_path / "long.jsonl"
    with open(p, "wb") as f:
        f.write(b'{"text": "first"}\n{"text": "')
        block = b"abcdefghij" * (1 << 20)
        for _ in range(20):
            f.write(block)  # 200 MiB of one string
        f.write(b'"}\n{"text": "last"}\n')
    result, growth = _growth("jsonl", p, tmp_path)
    assert result["records"] == 2 and result["quarantined"] == {"record_too_large": 1}
    assert growth < BOUND, f"reading grew by {growth / 2**20:.0f} MiB (bound {BOUND / 2**20:.0f} MiB)"


def _bomb(f, total: int, head: bytes = b'{"text": "', byte: bytes = b"a") -> None:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    f.write(c.compress(head))
    block = byte * (16 << 20)
    for _ in range(total // len(block)):
        f.write(c.compress(block))
    f.write(c.compress(b'"}\n') + c.flush())


def test_a_1_gb_gzip_bomb_is_refused_not_expanded(tmp_path):
    p = tmp_path / "bomb.jsonl.gz"
    with open(p, "wb") as f:
        f.write(gzip.compress(b'{"text": "before the bomb"}\n', mtime=0))
        _bomb(f, 1 << 30)
    assert p.stat().st_size < 2 << 20
    result, growth = _growth("jsonl", p, tmp_path)
    assert result["records"] == 1 and result["quarantined"] == {"decompression_bomb": 1}
    assert growth < BOUND, f"reading grew by {growth / 2**20:.0f} MiB (bound {BOUND / 2**20:.0f} MiB)"


def test_a_warc_record_inflating_to_1_gb_is_refused(tmp_path):
    from warcio.warcwriter import WARCWriter

    from tests.steps.text.readers.web_pages import article, response
    size = 1 << 30
    head = (b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:bomb>\r\nWARC-Target-URI: https://x.example/"
            b"\r\nWARC-Date: 2024-01-01T00:00:00Z\r\nContent-Type: application/http; msgtype=response\r\n"
            b"Content-Length: %d\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html><body>" % (size + 68))
    p = tmp_path / "bomb.warc.gz"
    with open(p, "wb") as f:
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        f.write(c.compress(head))
        block = b" " * (16 << 20)
        for _ in range(size // len(block)):
            f.write(c.compress(block))
        f.write(c.compress(b"</body></html>\r\n\r\n") + c.flush())
        buf = io.BytesIO()
        response(WARCWriter(buf, gzip=True), "after", "https://x.example/after", article("After").encode())
        f.write(buf.getvalue())
    result, growth = _growth("warc", p, tmp_path)
    assert result["records"] == 1 and result["quarantined"] == {"decompression_bomb": 1}
    assert growth < BOUND, f"reading grew by {growth / 2**20:.0f} MiB (bound {BOUND / 2**20:.0f} MiB)"


