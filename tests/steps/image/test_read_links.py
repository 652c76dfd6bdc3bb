"""WebDataset link members: a link to an earlier member of the same tar stands for its bytes; any other link
quarantines its sample as `link_outside_input` (a sample made only of links used to vanish uncounted)."""
from __future__ import annotations

import io
import tarfile

from curation.core.record import QuarantineSink
from curation.steps.image.read import WebDatasetReader
from tests.conftest import REPO


def _images() -> list[bytes]:
    with tarfile.open(REPO / "recipes" / "images" / "shards" / "captioned-00000.tar") as tar:
        return [tar.extractfile(f"{k}.jpg").read() for k in ("0000", "0001", "0003")]


def _add(tar, name: str, data: bytes | None = None, link: str = "", hard: bool = False) -> None:
    info = tarfile.TarInfo(name)
    if data is not None:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        return
    info.type, info.linkname = (tarfile.LNKTYPE if hard else tarfile.SYMTYPE), link
    tar.addfile(info)


def test_link_members_are_resolved_inside_the_tar_or_quarantined(tmp_path):
    a, c, e = _images()
    path = tmp_path / "shard.tar"
    with tarfile.open(path, "w") as tar:
        _add(tar, "a.jpg", a)
        _add(tar, "a.txt", b"the first caption")
        _add(tar, "b.jpg", link="/etc/passwd")                    # a sample made only of links out
        _add(tar, "b.txt", link="../canary.txt")
        _add(tar, "c.jpg", c)
        _add(tar, "c.txt", link="a.txt", hard=True)               # GNU tar's second name of a file
        _add(tar, "d.jpg", link="../x.jpg", hard=True)
        _add(tar, "dir/e.jpg", e)
        _add(tar, "dir/e.txt", link="../a.txt")                   # a symlink to an earlier member
        _add(tar, "f.jpg", link="g.jpg")                          # names no earlier member
        _add(tar, "g.jpg", a)
        _add(tar, "h.jpg", c)
        _add(tar, "h.json", b'{"caption": "lone \\ud800 surrogate"}')
    reader = WebDatasetReader(path, metadata_fields=[], shard_label="00000", source="s", sink=QuarantineSink())
    kept = {r.id: (r.payload["image"], r.text) for r in reader.run()}
    assert kept == {"a": (a, "the first caption"), "c": (c, "the first caption"),
                    "dir/e": (e, "the first caption"), "g": (a, "")}
    assert dict(reader.stats.quarantined) == {"link_outside_input": 3, "bad_caption_encoding": 1}
    assert reader.stats.records_in == 8
    [b] = [q for q in reader.sink.entries if q["id"] == "00000:b"]
    assert "b.jpg -> /etc/passwd" in b["detail"] and "b.txt -> ../canary.txt" in b["detail"]
