"""Image folders and image URL lists are packed into WebDataset tars in raw/ and read like any tar."""
from __future__ import annotations

import json
import tarfile

import pytest

from tests.conftest import REPO, VOCAB
from tests.loopback import Server


def _demo_images(n: int) -> list[tuple[bytes, str]]:
    out = []
    with tarfile.open(REPO / "recipes" / "images" / "shards" / "captioned-00000.tar") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
    for key in ("0000", "0001", "0003", "0004", "0005")[:n]:
        out.append((members[f"{key}.jpg"], members[f"{key}.txt"].decode()))
    return out


def test_folder_packing_is_deterministic_and_keeps_sidecars(tmp_path):
    from curation.acquire.pack import folder_samples, write_tars
    (tmp_path / "in" / "sub").mkdir(parents=True)
    [(a, cap_a), (b, _)] = _demo_images(2)
    (tmp_path / "in" / "a.jpg").write_bytes(a)
    (tmp_path / "in" / "a.txt").write_text(cap_a)
    (tmp_path / "in" / "sub" / "b.v2.jpg").write_bytes(b)
    (tmp_path / "in" / "sub" / "b.v2.json").write_text(json.dumps({"caption": "two", "url": "https://x/b"}))
    write_tars(folder_samples(tmp_path / "in").samples, tmp_path / "o1", per_tar=1)
    write_tars(folder_samples(tmp_path / "in").samples, tmp_path / "o2", per_tar=1)
    names = sorted(p.name for p in (tmp_path / "o1").iterdir())
    assert names == ["images-00000.tar", "images-00001.tar"]
    assert all((tmp_path / "o1" / n).read_bytes() == (tmp_path / "o2" / n).read_bytes() for n in names)
    with tarfile.open(tmp_path / "o1" / "images-00001.tar") as tar:
        assert tar.getnames() == ["sub_b_v2.jpg", "sub_b_v2.json"]
        assert json.loads(tar.extractfile("sub_b_v2.json").read())["url"] == "https://x/b"


@pytest.mark.slow
def test_image_folder_and_url_list_sources_run_end_to_end(tmp_path):
    from curation.commands.run import run
    imgs = _demo_images(5)
    folder = tmp_path / "photos"
    folder.mkdir()
    for i, (data, caption) in enumerate(imgs[:3]):
        (folder / f"p{i}.jpg").write_bytes(data)
        (folder / f"p{i}.txt").write_text(caption)
    (folder / "p2.txt").write_bytes(b"caf\xe9 latin-1 caption")          # not UTF-8: quarantined
    server = Server("127.0.0.2", {"/3.jpg": lambda s: (200, {"Content-Type": "image/jpeg"}, imgs[3][0]),
                                  "/4.jpg": lambda s: (200, {"Content-Type": "image/jpeg"}, imgs[4][0]),
                                  "/page": lambda s: (200, {"Content-Type": "text/html"}, b"<html>no</html>"),
                                  "/gone.jpg": lambda s: (404, {}, b"")})
    try:
        entries = [{"url": f"{server.base}/{p}", "caption": c} for p, c in
                   (("3.jpg", imgs[3][1]), ("4.jpg", imgs[4][1]), ("page", "a page"), ("gone.jpg", "gone"))]
        (tmp_path / "urls.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
        (tmp_path / "r.yaml").write_text(f"""
name: image-sources
vocabulary: {VOCAB}
image_tokenizer: {REPO / "tokenizers" / "curate-demo-ibq.yaml"}
stages: [{{name: pretrain, seq_length: 1024}}]
sources:
  - name: folder
    modality: image
    license: CC0-1.0
    acquire: {{kind: image_folder, path: photos}}
    input: {{format: webdataset, paths: ["images-*.tar"]}}
    images: {{min_side: 64, area: 16384}}
  - name: web
    modality: image
    license: CC0-1.0
    acquire: {{kind: urls, path: urls.jsonl}}
    input: {{format: webdataset, paths: ["images-*.tar"], metadata_fields: [url]}}
    images: {{min_side: 64, area: 16384}}
""")
        result = run(tmp_path / "r.yaml", tmp_path / "out", progress=False)
    finally:
        server.close()
    reasons = {(q["source"], q["reason"]): q["records"] for q in result.rows["quarantine"]}
    assert reasons == {("folder", "bad_caption_encoding"): 1, ("web", "no_image"): 1}
    docs = {t["source"]: t["documents"] for t in result.rows["tokens"]}
    assert docs == {"folder": 2, "web": 2}
    outcomes = {(a["source"], a["outcome"]): a["items"] for a in result.rows["acquisition"]}
    assert outcomes[("web", "ok")] == 3 and outcomes[("folder", "ok")] == 3
