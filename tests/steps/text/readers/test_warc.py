"""WARC/WET reading: every record is a document, a drop by design or a quarantine entry with a reason."""
from __future__ import annotations

import gzip
import io
import os
from pathlib import Path

import pytest
from warcio.warcwriter import WARCWriter

from curation.core.record import QuarantineSink
from curation.steps.text.readers.inputs import Limits
from curation.steps.text.readers.web_read import WarcReader
from tests.conftest import SHARED_DATA
from tests.steps.text.readers.web_pages import (
    CRAWL_DOCUMENTS,
    CRAWL_DROPS,
    PARAS,
    article,
    crawl,
    members,
    response,
)


def read(path: Path, **kw):
    sink = QuarantineSink()
    reader = WarcReader(path, shard_label=path.name, source="web", sink=sink, **kw)
    records = list(reader.run())
    assert reader.stats.balanced(), reader.stats.to_json()
    return records, reader.stats, sink


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip-per-record"])
def test_crawl_records_are_documents_or_counted_drops(tmp_path, gz):
    path = crawl(tmp_path / ("c.warc.gz" if gz else "c.warc"), gz=gz)
    records, stats, sink = read(path)
    assert [r.id for r in records] == CRAWL_DOCUMENTS
    assert dict(stats.dropped) == CRAWL_DROPS and not stats.quarantined and not sink.entries
    first = records[0]
    assert first.meta == {"url": "https://news.example/a", "crawl_date": "2024-05-18T01:58:10Z",
                          "warc_record_id": "urn:uuid:resp-a", "charset": "utf-8"}
    for r in records[:4]:  # chunked and gzip-encoded payloads decode to the same article text
        assert PARAS[0] in r.text and PARAS[2] in r.text
        assert "All rights reserved" not in r.text and "Log in" not in r.text  # boilerplate is not main text
    assert records[4].text == "Mill bridge\n" + "\n".join(PARAS)  # WET: the conversion text as it is


def test_plain_and_gzip_warcs_give_identical_records(tmp_path):
    plain, _, _ = read(crawl(tmp_path / "c.warc", gz=False))
    packed, _, _ = read(crawl(tmp_path / "c.warc.gz", gz=True))
    assert [(r.id, r.text, r.meta) for r in plain] == [(r.id, r.text, r.meta) for r in packed]


def test_whole_file_gzip_and_misnamed_plain_warc_are_read(tmp_path):
    plain = crawl(tmp_path / "c.warc", gz=False)
    whole = tmp_path / "whole.warc.gz"
    whole.write_bytes(gzip.compress(plain.read_bytes(), mtime=0))
    misnamed = tmp_path / "misnamed.warc.gz"
    misnamed.write_bytes(plain.read_bytes())
    for path in (whole, misnamed):
        records, stats, _ = read(path)
        assert [r.id for r in records] == CRAWL_DOCUMENTS and not stats.quarantined


def test_a_file_that_is_not_a_warc_is_refused_with_its_reason(tmp_path):
    page = tmp_path / "error.warc.gz"
    page.write_bytes(b"<html><body>403 Forbidden</body></html>")
    _, stats, sink = read(page)
    assert dict(stats.quarantined) == {"not_gzip": 1} and "neither a WARC record" in sink.entries[0]["detail"]
    other = tmp_path / "notes.warc"
    other.write_bytes(b"just some notes\n")
    assert dict(read(other)[1].quarantined) == {"not_warc": 1}


def test_truncated_last_member_keeps_the_records_before_it(tmp_path):
    path = crawl(tmp_path / "c.warc.gz", gz=True)
    data = path.read_bytes()
    start, end = members(data)[-1]  # the WET conversion record
    path.write_bytes(data[: start + (end - start) // 2])
    records, stats, sink = read(path)
    assert [r.id for r in records] == CRAWL_DOCUMENTS[:-1]
    assert dict(stats.quarantined) == {"truncated_gzip": 1}
    assert sink.entries[0]["id"] == "c.warc.gz:urn:uuid:wet-a" and "re-fetch" in sink.entries[0]["detail"]


def test_a_corrupt_member_is_quarantined_and_reading_resumes_at_the_next(tmp_path):
    path = crawl(tmp_path / "c.warc.gz", gz=True)
    data = bytearray(path.read_bytes())
    start, end = members(bytes(data))[2]  # the first response
    for i in range(start + 40, end - 10, 7):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    records, stats, _ = read(path)
    assert [r.id for r in records] == CRAWL_DOCUMENTS[1:]
    assert sum(stats.quarantined.values()) == 1 and set(stats.quarantined) <= {"corrupt_gzip", "warc_bad_header"}


def _bad_header_warc(gz: bool) -> bytes:
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=gz)
    response(w, "one", "https://x.example/1", article("One").encode())
    good = buf.getvalue()
    buf2 = io.BytesIO()
    w2 = WARCWriter(buf2, gzip=gz)
    response(w2, "two", "https://x.example/2", article("Two").encode())
    broken = b"WRAC/1.0 garbage line\r\nWARC-Type: response\r\n\r\n" + b"junk " * 50 + b"\r\n\r\n"
    return good + (gzip.compress(broken, mtime=0) if gz else broken) + buf2.getvalue()


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip-per-record"])
def test_a_record_with_a_bad_header_is_quarantined_and_the_next_is_read(tmp_path, gz):
    path = tmp_path / ("bad.warc.gz" if gz else "bad.warc")
    path.write_bytes(_bad_header_warc(gz))
    records, stats, sink = read(path)
    assert [r.id for r in records] == ["urn:uuid:one", "urn:uuid:two"]
    assert dict(stats.quarantined) == {"warc_bad_header": 1}
    assert "WRAC/1.0" in sink.entries[0]["detail"]


def test_a_record_shorter_than_its_content_length_is_warc_truncated(tmp_path):
    plain = crawl(tmp_path / "c.warc", gz=False).read_bytes()
    cut = tmp_path / "cut.warc"
    cut.write_bytes(plain[: plain.index(b"Mill bridge\n" + PARAS[0].encode()) + 50])  # inside the WET record
    records, stats, _ = read(cut)
    assert [r.id for r in records] == CRAWL_DOCUMENTS[:-1] and dict(stats.quarantined) == {"warc_truncated": 1}


def test_oversized_payload_is_quarantined_with_its_size(tmp_path):
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=True)
    response(w, "big", "https://x.example/big", article("Big", PARAS * 400).encode())
    response(w, "small", "https://x.example/small", article("Small").encode())
    path = tmp_path / "big.warc.gz"
    path.write_bytes(buf.getvalue())
    records, stats, sink = read(path, limits=Limits(max_record_bytes=64 * 1024))
    assert [r.id for r in records] == ["urn:uuid:small"] and dict(stats.quarantined) == {"record_too_large": 1}
    assert "over max_record_bytes = 65,536" in sink.entries[0]["detail"] and sink.entries[0]["raw"].startswith("<!DOCTYPE")


@pytest.mark.slow
def test_a_gzip_bomb_member_is_refused_and_later_members_read(tmp_path):
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=True)
    response(w, "bomb", "https://x.example/bomb", b"<html><body>" + b" " * (300 << 20) + b"</body></html>")
    response(w, "after", "https://x.example/after", article("After").encode())
    path = tmp_path / "bomb.warc.gz"
    path.write_bytes(buf.getvalue())
    records, stats, sink = read(path, limits=Limits(ratio_floor_bytes=8 << 20))
    assert [r.id for r in records] == ["urn:uuid:after"]
    assert dict(stats.quarantined) == {"decompression_bomb": 1} and "max_ratio" in sink.entries[0]["detail"]


def test_duplicate_record_ids_are_quarantined(tmp_path):
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=False)
    response(w, "same", "https://x.example/1", article("One").encode())
    response(w, "same", "https://x.example/2", article("Two").encode())
    path = tmp_path / "dup.warc"
    path.write_bytes(buf.getvalue())
    records, stats, _ = read(path)
    assert len(records) == 1 and dict(stats.quarantined) == {"duplicate_id": 1}


def test_charset_comes_from_the_http_header_and_extra_headers_are_kept(tmp_path):
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=False)
    body = article("Café", [p + " Crème brûlée à la française." for p in PARAS], charset=None).encode("cp1252")
    response(w, "latin", "https://x.example/fr", body, ctype="text/html; charset=ISO-8859-1",
             warc_extra={"WARC-IP-Address": "192.0.2.7"})
    path = tmp_path / "fr.warc"
    path.write_bytes(buf.getvalue())
    records, _, _ = read(path, metadata_fields=["WARC-IP-Address"])
    assert "Crème brûlée à la française" in records[0].text
    assert records[0].meta["charset"] == "cp1252" and records[0].meta["WARC-IP-Address"] == "192.0.2.7"


def test_empty_warc_is_an_empty_file_entry(tmp_path):
    path = tmp_path / "empty.warc.gz"
    path.write_bytes(b"")
    assert dict(read(path)[1].quarantined) == {"empty_file": 1}


# shared/ beside the repo; CURATE_SHARED_DATA points elsewhere (a git worktree has no shared/ beside it)
REAL = Path(os.environ.get("CURATE_SHARED_DATA", SHARED_DATA)) / "web_text" / "warc"


@pytest.mark.slow
@pytest.mark.shared_data
@pytest.mark.skipif(not REAL.is_dir(), reason=f"real WARC samples not present ({REAL}); see shared/data/SOURCES.md")
def test_real_common_crawl_and_dolma_warcs():
    records, stats, _ = read(REAL / "dolma_sample-0000.warc.gz")
    # SOURCES.md: request+response records, 22 HTML responses
    assert len(records) == 22 and stats.dropped["warc_request"] == 22 and not stats.quarantined
    assert all(r.meta["url"].startswith("http") and r.id.startswith("urn:uuid:") for r in records)
    html, _, _ = read(REAL / "cc_whirlwind.warc.gz")
    wet, _, _ = read(REAL / "cc_whirlwind.warc.wet.gz")
    assert [r.meta["url"] for r in html] == [r.meta["url"] for r in wet] == ["https://an.wikipedia.org/wiki/Escopete"]
    # the main text of the page is in CC's own WET conversion of it (which keeps the boilerplate too)
    ours, theirs = set(html[0].text.lower().split()), set(wet[0].text.lower().split())
    assert len(ours & theirs) >= 0.8 * len(ours) and len(ours) < len(theirs)
    _, stats, _ = read(REAL / "warcio_example.warc.gz")
    assert stats.dropped["warc_revisit"] == 1 and stats.records_out == 1


def test_shipped_real_warc_sample():
    """A real crawler-written WARC that ships with the repo (tests/data/warc/SOURCES.md): it always runs."""
    records, stats, _ = read(Path(__file__).resolve().parents[3] / "data" / "warc" / "warcio_example.warc.gz")
    assert [r.meta["url"] for r in records] == ["http://example.com/"]
    assert dict(stats.dropped) == {"warc_warcinfo": 2, "warc_request": 2, "warc_revisit": 1}
    assert "illustrative examples" in records[0].text


# --- lying charsets (issue 22.8) ------------------------------------------------------------------
RUSSIAN = ["Городской совет проголосовал за ремонт моста возле мельницы; работы должны завершиться до "
           "осенней ярмарки.", "Посетители часто спрашивают об истории старой мельницы, и сотрудники "
           "отвечают рассказами о весеннем паводке и о пекаре, который продолжал печь хлеб."]
FRENCH_PLAIN = ["Le conseil municipal a voté la réparation du pont près du moulin ; les travaux doivent être "
                "achevés avant la foire d'automne, quand la place se remplit d'étals de pommes et de miel.",
                "Les visiteurs demandent souvent l'histoire du vieux moulin. Le personnel répond par des récits "
                "sur la crue du printemps et le boulanger qui a continué à cuire son pain."]
GERMAN = ["Der Gemeinderat stimmte für die Reparatur der Brücke an der Mühle; die Arbeiten sollen vor dem "
          "Herbstmarkt fertig sein, wenn der Platz voller Stände mit Äpfeln, Käse und Honig ist.",
          "Besucher fragen oft nach der Geschichte der alten Mühle, und die Mitarbeiter erzählen von der Flut "
          "im Frühjahr und dem Bäcker, der weiter Brot gebacken hat."]
JAPANESE = ["川沿いの町には小さな図書館があり、ボランティアが毎週寄贈された本を整理しています。",
            "訪れる人はよく古い水車小屋の歴史について尋ねます。職員は春の洪水の話をして答えます。"]
KOREAN = ["강가 마을에는 작은 도서관이 있고 자원봉사자들이 매주 기증된 책을 정리합니다.",
          "방문객들은 종종 오래된 물레방아의 역사에 대해 묻고 직원들은 봄 홍수 이야기로 답합니다."]
CHINESE = ["河边的小镇有一座小图书馆，志愿者每周整理捐赠的图书。星期四晚上阅览室开放到很晚。",
           "游客常常询问老磨坊的历史。工作人员用春天洪水的故事和重建水车的家庭来回答。"]
# (label, paragraphs whose UTF-8 bytes decode strictly with the label's codec, the codec)
LIES = [("shift_jis", FRENCH_PLAIN, "cp932"), ("euc-kr", GERMAN, "cp949"), ("gb2312", FRENCH_PLAIN, "gb18030"),
        ("windows-1251", RUSSIAN, "cp1251"), ("windows-1251", GERMAN, "cp1251")]
HONEST = [("shift_jis", JAPANESE, "cp932"), ("euc-kr", KOREAN, "cp949"), ("gb2312", CHINESE, "gb18030"),
          ("windows-1251", RUSSIAN, "cp1251"), ("iso-8859-1", FRENCH_PLAIN, "cp1252")]


def _charset_crawl(path: Path, pages: list[tuple[str, bytes]]) -> Path:
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=False)
    for i, (label, body) in enumerate(pages):
        response(w, f"p{i}", f"https://news.example/{i}", body, ctype=f"text/html; charset={label}")
    path.write_bytes(buf.getvalue())
    return path


def _texts(path: Path) -> list:
    return list(WarcReader(path, shard_label=path.name, source="s", sink=QuarantineSink()).run())


def test_a_lying_charset_that_decodes_is_overridden_and_recorded(tmp_path):
    pages = []
    for label, paras, codec in LIES:
        body = article("T", paras, charset=label).encode("utf-8")
        body.decode(codec)   # the lie decodes strictly: only a detector can tell
        pages.append((label, body))
    records = _texts(_charset_crawl(tmp_path / "lies.warc", pages))
    assert len(records) == len(LIES)
    for r, (label, paras, codec) in zip(records, LIES):
        assert r.meta["charset"] == "utf-8" and r.meta["charset_override"] == codec, (label, r.meta)
        assert paras[0][:40] in r.text, (label, r.text[:200])


def test_an_honest_charset_is_kept(tmp_path):
    pages = [(label, article("T", paras, charset=label).encode(codec)) for label, paras, codec in HONEST]
    records = _texts(_charset_crawl(tmp_path / "honest.warc", pages))
    assert len(records) == len(HONEST)
    for r, (label, paras, codec) in zip(records, HONEST):
        assert r.meta["charset"] == codec and "charset_override" not in r.meta, (label, r.meta)
        assert paras[0][:20] in r.text


# --- a Content-Length that is too long (issue 22.11) ---------------------------------------------------
def _three_pages(path: Path, grow: int) -> Path:
    """A plain WARC of three HTML responses whose second record's Content-Length is `grow` bytes too long."""
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=False)
    for i, title in enumerate(["Mill bridge", "Library nights", "Autumn fair"]):
        response(w, f"r{i}", f"https://news.example/{i}", article(title).encode())
    data = buf.getvalue()
    second = data.index(b"WARC/1.", 10)
    head_end = data.index(b"\r\n\r\n", second)
    header = data[second:head_end]
    old = next(line for line in header.split(b"\r\n") if line.lower().startswith(b"content-length:"))
    new = b"Content-Length: %d" % (int(old.split(b":")[1]) + grow)
    path.write_bytes(data[:second] + header.replace(old, new) + data[head_end:])
    return path


@pytest.mark.parametrize("grow", [200, 10**6], ids=["into the next record", "past the end of the file"])
def test_a_content_length_too_long_resyncs_to_the_next_record(tmp_path, grow):
    sink = QuarantineSink()
    path = _three_pages(tmp_path / "w.warc", grow)
    reader = WarcReader(path, shard_label="w", source="s", sink=sink)
    records = list(reader.run())
    assert [r.meta["warc_record_id"] for r in records] == ["urn:uuid:r0", "urn:uuid:r2"]
    assert "Autumn fair" in records[1].text
    assert dict(reader.stats.quarantined) == {"warc_bad_length": 1}
    assert reader.stats.records_in == 3      # the record with the wrong length is counted, the next one read
