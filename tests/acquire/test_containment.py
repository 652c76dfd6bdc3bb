"""curation.core.contain and the folder acquisitions built on it: nothing outside the declared input tree
(or an allowed root) is read, whether reached by a symlink, a hard link or a manifest name, and every
refusal is counted with its reason."""
from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import pytest

from curation.core.contain import LINK_OUTSIDE, NOT_A_FILE, PATH_OUTSIDE, InputTree, Refusal
from tests.conftest import REPO, VOCAB

CANARY = b"CANARY-7f3a outside the input tree"


@pytest.fixture
def layout(tmp_path):
    """tree/ with a real file, a link inside, links out (file and folder), a hard link out; outside/ holds
    the canary; shared/ is a root a recipe may allow."""
    tree, outside, shared = tmp_path / "tree", tmp_path / "outside", tmp_path / "shared"
    for d in (tree / "sub", outside, shared):
        d.mkdir(parents=True)
    (outside / "canary.txt").write_bytes(CANARY)
    (shared / "ok.txt").write_bytes(b"shared")
    (tree / "a.txt").write_bytes(b"a")
    (tree / "sub" / "b.txt").write_bytes(b"b")
    (tree / "in.txt").symlink_to("sub/b.txt")
    (tree / "out.txt").symlink_to(outside / "canary.txt")
    (tree / "rel_out.txt").symlink_to("../outside/canary.txt")
    (tree / "outdir").symlink_to(outside)
    (tree / "insidedir").symlink_to(tree / "sub")
    (tree / "shareddir").symlink_to(shared)
    os.link(outside / "canary.txt", tree / "hard.txt")
    return tree, outside, shared


def test_links_inside_are_followed_links_out_refused(layout):
    tree, outside, _ = layout
    t = InputTree(tree)
    assert t.read_bytes(tree / "in.txt") == b"b"
    for name in ("out.txt", "rel_out.txt", "outdir/canary.txt", "hard.txt"):
        got = t.read_bytes(tree / name)
        assert isinstance(got, Refusal) and got.reason == LINK_OUTSIDE, name
    assert "hard link with 2 names, 1 of them" in t.read_bytes(tree / "hard.txt").detail


def test_hard_links_all_of_whose_names_are_inside_are_read(layout):
    tree, _, shared = layout
    os.link(tree / "a.txt", tree / "sub" / "a_again.txt")
    assert InputTree(tree).read_bytes(tree / "sub" / "a_again.txt") == b"a"
    os.link(shared / "ok.txt", tree / "from_shared.txt")
    assert InputTree(tree).read_bytes(tree / "from_shared.txt").reason == LINK_OUTSIDE
    assert InputTree(tree, [shared]).read_bytes(tree / "from_shared.txt") == b"shared"


def test_walk_lists_files_and_refuses_links_out_whatever_they_are(layout):
    tree, _, shared = layout
    walked = {str(p.relative_to(tree)): (r.reason if r else None) for p, r in InputTree(tree).walk({".txt"})}
    # insidedir is not descended (its files are walked where they are); links out are refused, the
    # folder link whatever its name; shareddir is outside unless allowed
    assert walked == {"a.txt": None, "sub/b.txt": None, "in.txt": None, "hard.txt": None,
                      "out.txt": LINK_OUTSIDE, "rel_out.txt": LINK_OUTSIDE, "outdir": LINK_OUTSIDE,
                      "shareddir": LINK_OUTSIDE}
    allowed = {str(p.relative_to(tree)): (r.reason if r else None) for p, r in InputTree(tree, [shared]).walk({".txt"})}
    assert allowed["shareddir/ok.txt"] is None and "shareddir" not in allowed


def test_manifest_names_that_climb_out_or_are_absolute(layout, tmp_path):
    tree, outside, shared = layout
    t = InputTree(tree, [shared])
    for name in ("../outside/canary.txt", str(outside / "canary.txt"), "/etc/passwd", "sub/../../outside/canary.txt"):
        got = t.open_name(name)
        assert isinstance(got, Refusal) and got.reason == PATH_OUTSIDE, name
    assert t.open_name("sub/../a.txt").read() == b"a"
    assert t.open_name("../shared/ok.txt").read() == b"shared"          # an allowed root
    assert t.open_name(str(shared / "ok.txt")).read() == b"shared"
    assert t.open_name("out.txt").reason == LINK_OUTSIDE
    with pytest.raises(FileNotFoundError):
        t.open_name("missing.txt")


def test_special_files_are_never_opened(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    os.mkfifo(tree / "pipe.wav")          # opening it for reading would block forever
    t = InputTree(tree)
    assert t.open(tree / "pipe.wav").reason == NOT_A_FILE
    assert [(p.name, r.reason) for p, r in t.walk({".wav"})] == [("pipe.wav", NOT_A_FILE)]


def _img(n: int) -> list[bytes]:
    with tarfile.open(REPO / "recipes" / "images" / "shards" / "captioned-00000.tar") as tar:
        return [tar.extractfile(f"{k}.jpg").read() for k in ("0000", "0001", "0003", "0004", "0005")[:n]]


def test_image_folder_refuses_samples_that_reach_outside(tmp_path):
    from curation.acquire.pack import folder_samples
    a, b, c = _img(3)
    photos, outside = tmp_path / "photos", tmp_path / "outside"
    photos.mkdir()
    outside.mkdir()
    (outside / "canary.txt").write_bytes(CANARY)
    (outside / "canary.jpg").write_bytes(c)
    (photos / "p0.jpg").write_bytes(a)
    (photos / "p0.txt").write_text("a caption")
    (photos / "p1.jpg").write_bytes(b)
    (photos / "p1.txt").symlink_to(outside / "canary.txt")
    (photos / "p2.jpg").symlink_to(outside / "canary.jpg")
    (photos / "p3.jpg").write_bytes(b + b"\0")
    os.link(outside / "canary.txt", photos / "p3.txt")
    (photos / "p4.jpg").write_bytes(a + b"\0")
    (photos / "p4.json").write_text("[1, 2]")
    (photos / "p5.jpg").write_bytes(a + b"\0\0")
    (photos / "p5.json").write_text('{"url": "lone \\ud800 surrogate"}')
    scan = folder_samples(photos)
    assert [s[0] for s in scan.samples] == ["p0"]
    assert [(r["path"], r["reason"]) for r in scan.refused] == [
        ("p1.jpg", "link_outside_input"), ("p2.jpg", "link_outside_input"), ("p3.jpg", "link_outside_input"),
        ("p4.jpg", "bad_sidecar"), ("p5.jpg", "bad_sidecar")]
    assert not any(CANARY in s[1] or (s[3] and CANARY in s[3]) for s in scan.samples)
    allowed = folder_samples(photos, [outside])
    assert [s[0] for s in allowed.samples] == ["p0", "p1", "p2", "p3"]


def _recipe(tmp_path: Path, body: str) -> Path:
    (tmp_path / "r.yaml").write_text(f"name: contain\nvocabulary: {VOCAB}\n"
                                     f"audio_tokenizer: {REPO / 'tokenizers' / 'curate-demo-wavtokenizer.yaml'}\n"
                                     f"sources:\n{body}")
    return tmp_path / "r.yaml"


def test_audio_folder_copies_only_what_is_inside_and_keeps_transcript_bytes(tmp_path):
    from curation.acquire.sources import acquire_all
    from curation.recipe.load import load_recipe
    speech = REPO / "recipes" / "audio" / "speech"
    clips, outside = tmp_path / "clips" / "rec", tmp_path / "outside"
    clips.mkdir(parents=True)
    outside.mkdir()
    (outside / "canary.ogg").write_bytes((speech / "LJ001-0004.ogg").read_bytes())
    (outside / "canary.txt").write_bytes(CANARY)
    (clips / "00.ogg").write_bytes((speech / "LJ001-0001.ogg").read_bytes())
    (clips / "00.txt").write_bytes(b"caf\xe9 in latin-1")                 # not UTF-8: kept as bytes
    (clips / "01.ogg").symlink_to(outside / "canary.ogg")
    (clips / "02.ogg").write_bytes((speech / "LJ001-0002.ogg").read_bytes())
    (clips / "02.txt").symlink_to("../../outside/canary.txt")
    os.link(outside / "canary.ogg", clips / "03.ogg")
    (clips / "04.ogg").symlink_to("00.ogg")                               # inside: read
    recipe = _recipe(tmp_path, """  - name: clips
    modality: audio
    license: public-domain
    optout: not_available
    acquire: {kind: audio_folder, path: clips}
    input: {format: audio, paths: [clips.jsonl], id_field: id}
""")
    [record] = acquire_all(load_recipe(recipe, resolve_inputs=False), tmp_path / "raw").values()
    assert record["outcomes"] == {"ok": 2, "refused:link_outside_input": 3}
    assert sorted(r["path"] for r in record["refused"]) == ["rec/01.ogg", "rec/02.ogg", "rec/03.ogg"]
    raw = tmp_path / "raw" / "clips"
    assert sorted(p.name for p in (raw / "files" / "rec").iterdir()) == ["00.ogg", "04.ogg"]
    assert not any(p.is_symlink() for p in (raw / "files").rglob("*"))
    manifest = (raw / "clips.jsonl").read_bytes()
    assert b"caf\xe9 in latin-1" in manifest and CANARY not in manifest   # the bytes, not U+FFFD
    assert b"\xef\xbf\xbd" not in manifest


def test_folder_names_that_collide_or_are_not_utf8_never_stop_acquisition(tmp_path):
    """Two images with one sample key: the first (sorted) is kept, the other refused; names that are not
    UTF-8 are kept under backslash-escaped names (they used to stop the run with UnicodeEncodeError)."""
    from curation.acquire.pack import folder_samples
    from curation.acquire.sources import acquire_all
    from curation.recipe.load import load_recipe
    a, b = _img(2)
    photos = tmp_path / "photos"
    (photos / "sub").mkdir(parents=True)
    (photos / "sub" / "x.jpg").write_bytes(a)
    (photos / "sub_x.jpg").write_bytes(b)
    (Path(os.fsdecode(bytes(photos) + b"/caf\xe9.jpg"))).write_bytes(b + b"\0")
    scan = folder_samples(photos)
    assert [(s[0], s[2]["file"]) for s in scan.samples] == [("caf_", "caf\\xe9.jpg"), ("sub_x", "sub/x.jpg")]
    assert [(r["path"], r["reason"]) for r in scan.refused] == [("sub_x.jpg", "duplicate_key")]
    clips = tmp_path / "clips"
    clips.mkdir()
    ogg = (REPO / "recipes" / "audio" / "speech" / "LJ001-0002.ogg").read_bytes()
    Path(os.fsdecode(bytes(clips) + b"/caf\xe9.ogg")).write_bytes(ogg)
    recipe = _recipe(tmp_path, """  - name: clips
    modality: audio
    license: public-domain
    optout: not_available
    acquire: {kind: audio_folder, path: clips}
    input: {format: audio, paths: [clips.jsonl], id_field: id}
""")
    [record] = acquire_all(load_recipe(recipe, resolve_inputs=False), tmp_path / "raw").values()
    assert record["outcomes"] == {"ok": 1}
    line = json.loads((tmp_path / "raw" / "clips" / "clips.jsonl").read_text())
    assert line["audio"] == "files/caf\\xe9.ogg" and (tmp_path / "raw" / "clips" / line["audio"]).read_bytes() == ogg


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="no /proc/self/fd on this system")
def test_a_link_swapped_in_after_the_check_is_refused_on_the_opened_file(layout, monkeypatch):
    """The check before opening is passed (as if the file were replaced by a link just after it); the file
    actually opened is judged again, so the canary is still not read."""
    tree, _, _ = layout
    monkeypatch.setattr(InputTree, "check", lambda self, path: None)
    got = InputTree(tree).open(tree / "out.txt")
    assert isinstance(got, Refusal) and got.reason == LINK_OUTSIDE and "was opened as" in got.detail
